"""The soak's clients: threads, each with its own client, sending the planned requests and sorting each outcome."""

from __future__ import annotations

import asyncio
import json
import queue
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import httpx

from .traffic import Job, Video

HEARTBEAT_WAIT_S = 60.0  # for each client's heartbeat stream to end after it is closed


@dataclass
class Outcome:
    job: Job
    status: str  # answered, queue_full, refused, error
    seconds: float
    detail: str = ""
    fingerprint: object = None  # what a repeat of the pair must give again
    duration: float | None = None  # the video's length as the result reports it
    finished_at: float = field(default_factory=time.monotonic)


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
