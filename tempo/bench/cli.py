"""`tempo bench`: how fast a video file becomes Tempo's answer, ours against the released pipeline's steps.

Both modes run in this process on the same videos (generated once with the ffmpeg that imageio-ffmpeg ships,
kept under $TEMPO_CACHE/bench). The reference mode follows the released pipeline: every sampled frame decoded at
full size in one batch, resized one by one, each segment preprocessed on its own, then all segments through the
compressor in a single batch. Ours streams: decoding, preprocessing and compression overlap, frames are reduced
as they are decoded, and the question-independent work is cached for follow-up questions. Ours is also measured
decoding in a child process, as the app does (`Limits.isolate_decoding`), beside decoding in this one.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from typing import Any

from ..model import from_pretrained
from ..paths import cache_folder
from ..video import sandbox
from .measuring import PeakMemory
from .report import ratios, table
from .runs import bench_video, first_segments
from .videos import VIDEOS, make_video

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="only the 10-minute video (a few minutes)")
    parser.add_argument("--video", help="benchmark this file instead of the generated videos")
    parser.add_argument("--model", default=os.environ.get("TEMPO_MODEL"), help="default: the embedded Tempo-Tiny")
    parser.add_argument("--base", default=os.environ.get("TEMPO_BASE"))
    parser.add_argument("--device", help="cpu or cuda (default: cuda if available)")
    parser.add_argument("--json", dest="json_out", help="write the raw figures and ratios here")
    parser.add_argument("--first-segment", type=int, metavar="RUNS",
                        help="only the first segment's result, RUNS times per video (seconds; no reference)")


def run_bench(args: argparse.Namespace) -> int:
    """`tempo bench`: the table for each video on stdout, and the figures in `--json`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    model = from_pretrained(args.model, base=args.base, device=args.device)
    sandbox.warm_up()  # the decoding processes' fork server starts once, as the app's does at start-up
    memory = PeakMemory(model.device)
    cache = cache_folder("bench")
    if args.video:
        videos = {os.path.basename(args.video): args.video}
    else:
        chosen = {"10-minute": 600} if args.quick else VIDEOS
        videos = {name: make_video(os.path.join(cache, f"testsrc2-720p30-{seconds}s.mp4"), seconds)
                  for name, seconds in chosen.items()}
    report: dict[str, Any] = {"device": str(model.device), "model": model.spec.name,
                              "cores": len(os.sched_getaffinity(0)), "videos": {}}
    if args.first_segment:
        report["videos"] = {name: first_segments(model, path, args.first_segment) for name, path in videos.items()}
    else:
        for name, path in videos.items():
            log.info("benchmarking %s", name)
            figures = bench_video(model, path, memory)
            figures["ratios"] = ratios(figures)
            report["videos"][name] = figures
            print(table(name, figures), flush=True)
        headline = report["videos"][next(iter(videos))]
        report["ratios"] = headline["ratios"]
        report["first_segment_s"] = headline["ours"]["first"]["first_segment_s"]
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, default=str)
    return 0
