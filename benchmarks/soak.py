"""A day's traffic in one run: `app.py` on loopback, 8 clients sending a mix of requests about videos it has never
seen, each (video, question) pair asked again at other times, and a few hostile files among them. The videos are
synthetic (tempo.synthetic, seeds from --seed on, so none was trained or evaluated on), 1-60 minutes long, rendered
once into outputs/soak-videos/. The endpoints are mixed: /answer, /chat with an earlier turn, /compare, /segment,
and the MCP tools locate and answer. Every result must be about its own video (its duration is the video's), and
every repeat of a pair must give what the pair gave first. The report: answered, refused with "queue is full",
refused as bad input, any other error, pairs whose repeats differ, answers about another video, p50/p95 latency, the
server's memory with its children (start, peak, MB per minute over the last half), its open file descriptors (and
which of them the run left open), and the size of its temporary and upload folders at start and end. Exit status 1
on any other error, differing pair or answer about another video.

    python -m benchmarks.soak [--requests 1000] [--videos 50] [--clients 8] [--json report.json]
    python -m benchmarks.soak --short          # 100 requests over 10 short videos (the test suite's form)
    python -m benchmarks.soak --short --plant-cache-bug   # a cache that ignores which video: must fail
"""

from __future__ import annotations

import argparse
import asyncio
import json
import queue
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from benchmarks.local_app import start_app
from benchmarks.server_watch import Watch

ROOT = Path(__file__).resolve().parent.parent

VIDEOS = ROOT / "outputs" / "soak-videos"
MIX = {"answer": 25, "chat": 15, "compare": 10, "segment": 15, "mcp_locate": 20, "mcp_answer": 15}  # weights
HOSTILE_SHARE = 0.03
HEARTBEAT_WAIT_S = 60.0  # for each client's heartbeat stream to end after it is closed
DURATION_TOLERANCE_S = 1.0  # the server's probe against the rendered length (frames / fps)


@dataclass(frozen=True)
class Video:
    path: Path
    duration: float
    questions: tuple[str, ...]


@dataclass(frozen=True)
class Job:
    number: int
    kind: str  # a MIX key, or "hostile"
    video: Video | None
    question: str
    path: Path | None = None  # a hostile file


@dataclass
class Outcome:
    job: Job
    status: str  # answered, queue_full, refused, error
    seconds: float
    detail: str = ""
    fingerprint: object = None  # what a repeat of the pair must give again
    duration: float | None = None  # the video's length as the result reports it
    finished_at: float = field(default_factory=time.monotonic)


# ------------------------------------------------------------------------------------------------ videos and plan

def render_videos(count: int, seed: int, short: bool) -> list[Video]:
    """`count` synthetic videos from seeds `seed`, `seed` + 1, ...: 20-38 s apart by 2 s (--short), else 1-60
    minutes drawn log-uniformly; rendered once into VIDEOS and reused."""
    from tempo.synthetic import generate_video, make_questions, write_mp4

    VIDEOS.mkdir(parents=True, exist_ok=True)
    videos, lengths = [], set()
    for number in range(count):
        duration = 20.0 + 2 * number if short else None
        synthetic = generate_video(seed + number, duration, min_duration=60.0, max_duration=3600.0)
        while round(synthetic.duration) in lengths:  # distinct lengths: a result names its video by its length
            synthetic = generate_video(seed + number, synthetic.duration + 2.0)
        lengths.update(range(round(synthetic.duration) - 1, round(synthetic.duration) + 2))
        path = VIDEOS / f"soak-{seed + number}-{synthetic.duration:g}s.mp4"
        if not path.is_file():
            print(f"rendering video {number + 1}/{count}: {path.name}", file=sys.stderr, flush=True)
            partial = path.with_suffix(".partial.mp4")
            write_mp4(synthetic, str(partial))
            partial.rename(path)
        questions = make_questions(synthetic, np.random.default_rng(seed + number))
        videos.append(Video(path, synthetic.duration, tuple(q.text for q in questions)))
    return videos


def plan(videos: list[Video], total: int, hostile: list[Path], rng: random.Random) -> list[Job]:
    """`total` requests: every (video, question) pair with its endpoint asked about equally often, shuffled so that
    a pair's repeats come at different times; hostile files sprinkled in."""
    pairs = [(kind, video, question) for video in videos for question in video.questions for kind in MIX]
    rng.shuffle(pairs)
    weights = [MIX[kind] for kind, _, _ in pairs]
    n_hostile = min(len(hostile), round(total * HOSTILE_SHARE)) if hostile else 0
    # Half as many distinct pairs as requests, each drawn by its endpoint's weight: most are asked twice or more.
    chosen = rng.choices(pairs, weights, k=max(1, (total - n_hostile) // 2))
    picks = chosen + rng.choices(chosen, k=total - n_hostile - len(chosen))
    rng.shuffle(picks)
    jobs = [Job(0, kind, video, question) for kind, video, question in picks]
    for path in rng.sample(hostile, n_hostile):
        jobs.insert(rng.randrange(len(jobs) + 1), Job(0, "hostile", None, "What moves across the screen?", path))
    return [Job(n, job.kind, job.video, job.question, job.path) for n, job in enumerate(jobs)]


# ------------------------------------------------------------------------------------------------ requests

def history(video: Video, question: str) -> list[dict]:
    """The earlier turn a /chat request carries: the video's previous question, with a fixed answer."""
    earlier = video.questions[video.questions.index(question) - 1]
    return [{"question": earlier, "answer": "I am not sure."}]


def send(client, url: str, job: Job) -> tuple[object, float | None]:
    """(fingerprint, reported duration) of one request; raises what the client raises."""
    from gradio_client import handle_file

    video = handle_file(str(job.video.path))
    if job.kind == "answer":
        result = client.predict(video, job.question, api_name="/answer")
        return result["answer"], result["duration"]
    if job.kind == "chat":
        result = client.predict(video, job.question, history=history(job.video, job.question), api_name="/chat")
        turn = result["turns"][-1]
        return turn["answer"], turn["duration"]
    if job.kind == "compare":
        result = client.predict(video, job.question, api_name="/compare")
        return (result["first"]["answer"], result["second"]["answer"]), result["first"]["duration"]
    if job.kind == "segment":
        facts, _ = client.predict(video, job.question, segment=job.number % 3, api_name="/segment")
        return (facts["index"], facts["rank"], facts["tokens"], round(facts["relevance"], 4)), None
    return tool(url, job)


def tool(url: str, job: Job) -> tuple[object, float | None]:
    """An MCP tool call, as an agent's host makes it: the video uploaded first, its path handed over."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    with job.video.path.open("rb") as file:
        uploaded = httpx.post(url + "/gradio_api/upload", files={"files": (job.video.path.name, file, "video/mp4")},
                              timeout=120)
    uploaded.raise_for_status()

    async def session():
        async with streamablehttp_client(url + "/gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as opened:
                await opened.initialize()
                return await opened.call_tool(job.kind.removeprefix("mcp_"),
                                              {"video": uploaded.json()[0], "question": job.question})

    result = asyncio.run(session())
    text = result.content[0].text if result.content else ""
    if result.isError:
        raise ToolRefusal(text)
    found = json.loads(text)
    if job.kind == "mcp_locate":
        return [segment["index"] for segment in found["looked_at"]], found["duration"]
    return found["answer"], found["duration"]


class ToolRefusal(Exception):
    """An MCP tool's error result: the server's sentence."""


def attempt(client, url: str, job: Job, timeout: float) -> Outcome:
    """One job, timed and sorted: answered, queue_full, refused (bad input) or error."""
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as Timeout

    from gradio_client.exceptions import AppError

    from benchmarks.fuzz import outcome

    started = time.monotonic()
    pool = ThreadPoolExecutor(1)  # not `with`: leaving it would wait for a request that hangs
    future = pool.submit(outcome, client, job.path) if job.kind == "hostile" else pool.submit(send, client, url, job)
    try:
        result = future.result(timeout=timeout)
    except Timeout:
        return Outcome(job, "error", time.monotonic() - started, f"no answer within {timeout:g} s")
    except AppError as exc:
        generic = "Something went wrong" in str(exc)
        return Outcome(job, "error" if generic else "refused", time.monotonic() - started, str(exc))
    except ToolRefusal as exc:
        return Outcome(job, "refused", time.monotonic() - started, str(exc))
    except Exception as exc:  # noqa: BLE001 -- a client-side failure is counted, not fatal
        status = "queue_full" if "queue is full" in str(exc).lower() else "error"
        return Outcome(job, status, time.monotonic() - started, f"{type(exc).__name__}: {exc}")
    finally:
        pool.shutdown(wait=False)
    seconds = time.monotonic() - started
    if job.kind == "hostile":
        kind, detail = result
        status = {"answered": "answered", "refused": "refused"}.get(kind, "error")
        return Outcome(job, status, seconds, f"{kind}: {detail}")
    fingerprint, duration = result
    return Outcome(job, "answered", seconds, fingerprint=fingerprint, duration=duration)


def progress(outcomes: list[Outcome], total: int, seconds: float) -> None:
    """One line on standard error: requests done, their outcomes so far, and the time left at this pace."""
    left = seconds / len(outcomes) * (total - len(outcomes))
    counts = ", ".join(f"{status} {n}" for status, n in sorted(Counter(o.status for o in outcomes).items()))
    print(f"{len(outcomes)}/{total} requests in {seconds / 60:.1f} min ({counts}); about {left / 60:.0f} min left",
          file=sys.stderr, flush=True)


def run_clients(url: str, jobs: list[Job], clients: int, timeout: float) -> list[Outcome]:
    """`clients` threads, each with its own client, taking the jobs in order."""
    from gradio_client import Client

    todo: queue.Queue[Job] = queue.Queue()
    for job in jobs:
        todo.put(job)
    outcomes: list[Outcome] = []
    lock = threading.Lock()
    started = time.monotonic()

    def work() -> None:
        client = Client(url, verbose=False)
        try:
            while True:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                result = attempt(client, url, job, timeout)
                with lock:
                    outcomes.append(result)
                    if len(outcomes) % 25 == 0 or len(outcomes) == len(jobs):
                        progress(outcomes, len(jobs), time.monotonic() - started)
        finally:
            # The client's heartbeat stream ends at the server's next heartbeat after close(); until then it counts
            # among the server's open descriptors.
            client.close()
            client.heartbeat.join(timeout=HEARTBEAT_WAIT_S)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(outcomes, key=lambda o: o.job.number)


# ------------------------------------------------------------------------------------------------ the server

def within_cache_cap(report: dict) -> dict:
    """The server's growth against its per-video cache's cap (the goal: within the cap + 10 %)."""
    from tempo.settings import limits_from_env

    cap = limits_from_env().cache_mb
    growth = report["main_rss_end_mb"] - report["main_rss_start_mb"]
    return {"cache_cap_mb": cap, "main_rss_growth_mb": growth, "main_rss_growth_within_cap": growth <= 1.1 * cap}


def folder_mb(folder: Path) -> float:
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 2**20, 2)


def start_soaked_app(scratch: Path, planted: bool) -> tuple[subprocess.Popen, str]:
    """app.py on loopback (with `planted`, behind a per-video cache that ignores which video it is)."""
    return start_app(scratch, [sys.executable, "-m", "benchmarks.soak", "--serve-planted"] if planted else None)

def serve_planted() -> None:
    """app.py behind a planted bug: the per-video cache's key ignores the file, so two videos share an entry."""
    import spaces  # noqa: F401  (as app.py: before torch)

    from tempo.engine import VideoCache
    from tempo.engine.steps import VideoKey

    VideoCache.key = lambda self, path, sampling: VideoKey("any video", 0, 0, sampling)
    from demo.launch import main

    main()


# ------------------------------------------------------------------------------------------------ the report

def percentile(values: list[float], share: float) -> float | None:
    return round(float(np.percentile(values, share)), 2) if values else None


def summary(outcomes: list[Outcome], seconds: float) -> dict:
    """Counts, latency, differing pairs and answers about another video."""
    counts = Counter(o.status for o in outcomes)
    answered = [o for o in outcomes if o.status == "answered" and o.job.kind != "hostile"]
    first: dict[tuple, Outcome] = {}
    differing: dict[tuple, list] = defaultdict(list)
    for outcome in sorted(answered, key=lambda o: o.finished_at):
        job = outcome.job
        pair = (job.kind, job.video.path.name, job.question, job.number % 3 if job.kind == "segment" else None)
        if pair not in first:
            first[pair] = outcome
        elif outcome.fingerprint != first[pair].fingerprint:
            differing[pair].append((first[pair].fingerprint, outcome.fingerprint))
    other_video = [o for o in answered if o.duration is not None
                   and abs(o.duration - o.job.video.duration) > DURATION_TOLERANCE_S]
    repeated = Counter(pair for pair in [(o.job.kind, o.job.video.path.name, o.job.question) for o in answered])
    latency = [o.seconds for o in outcomes if o.status == "answered"]
    return {
        "requests": len(outcomes), "seconds": round(seconds, 1), "answered": counts["answered"],
        "refused_queue_full": counts["queue_full"], "refused_bad_input": counts["refused"],
        "refused_not_hostile": sum(o.status == "refused" and o.job.kind != "hostile" for o in outcomes),
        "other_errors": counts["error"], "pairs": len(first), "pairs_repeated": sum(n > 1 for n in repeated.values()),
        "pairs_whose_repeats_differ": len(differing), "answers_about_another_video": len(other_video),
        "latency_p50_s": percentile(latency, 50), "latency_p95_s": percentile(latency, 95),
        "by_endpoint": {kind: dict(Counter(o.status for o in outcomes if o.job.kind == kind))
                        for kind in [*MIX, "hostile"]},
        "examples": {"errors": [f"#{o.job.number} {o.job.kind}: {o.detail[:200]}" for o in outcomes
                                if o.status == "error"][:10],
                     "differing": [f"{pair[0]} {pair[1]} {pair[2]!r}: {seen[0]!r} then {seen[1]!r}"[:300]
                                   for pair, [seen, *_] in list(differing.items())[:10]],
                     "another_video": [f"#{o.job.number} {o.job.kind} {o.job.video.path.name}: reported "
                                       f"{o.duration:g} s" for o in other_video[:10]]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, help="requests in all (default 1000; --short: 100)")
    parser.add_argument("--videos", type=int, help="distinct videos (default 50; --short: 10)")
    parser.add_argument("--short", action="store_true", help="100 requests over 10 videos of 20-38 s")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seed", type=int, default=900_000, help="the first video's seed (default 900,000)")
    parser.add_argument("--timeout", type=float, help="seconds before a request is an error (default 900; short 180)")
    parser.add_argument("--plant-cache-bug", action="store_true", help="serve behind a cache that ignores the video")
    parser.add_argument("--serve-planted", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="write the report here too")
    parser.add_argument("--samples", help="write the memory and descriptor samples here (CSV, one a second)")
    args = parser.parse_args(argv)
    if args.serve_planted:
        serve_planted()
        return 0
    total = args.requests or (100 if args.short else 1000)
    videos = render_videos(args.videos or (10 if args.short else 50), args.seed, args.short)
    rng = random.Random(args.seed)
    scratch = Path(tempfile.mkdtemp(prefix="tempo-soak-"))
    try:
        from benchmarks.mutants import write_mutants

        index = write_mutants(scratch / "hostile", max(12, round(2 * total * HOSTILE_SHARE)), args.seed)
        mutants = [scratch / "hostile" / entry["file"] for entry in index if entry["kind"] != "clean"]
        jobs = plan(videos, total, mutants, rng)
        process, url = start_soaked_app(scratch, args.plant_cache_bug)
        try:
            folders = {name: folder_mb(scratch / name) for name in ("tmp", "uploads")}
            watch = Watch(process.pid)
            started = time.monotonic()
            outcomes = run_clients(url, jobs, args.clients, args.timeout or (180.0 if args.short else 900.0))
            seconds = time.monotonic() - started
            report = summary(outcomes, seconds) | watch.report()
            if args.samples:
                watch.write(Path(args.samples))
            report |= within_cache_cap(report)
            report |= {f"{name}_mb_start": mb for name, mb in folders.items()}
            report |= {f"{name}_mb_end": folder_mb(scratch / name) for name in ("tmp", "uploads")}
        finally:
            process.terminate()
            process.wait(timeout=60)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report["planted_cache_bug"] = args.plant_cache_bug
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    failed = report["other_errors"] or report["pairs_whose_repeats_differ"] or report["answers_about_another_video"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
