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
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from benchmarks.server_watch import Watch

from .clients import run_clients
from .report import summary
from .server import folder_mb, serve_planted, start_soaked_app, within_cache_cap
from .traffic import HOSTILE_SHARE, plan, render_videos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.splitlines()[0])
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
