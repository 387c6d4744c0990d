"""CLI: render a synthetic video to mp4 with its ground truth and questions next to it as JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from typing import NoReturn

import numpy as np

from .questions import make_questions, temporal_questions
from .world import MIN_DURATION, generate_video, write_mp4

log = logging.getLogger("tempo.synthetic")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, not usage + error: the message already says which argument is wrong.
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m tempo.synthetic",
                     description="Seeded synthetic long videos with exact ground truth, for training and demos.")
    commands = parser.add_subparsers(dest="command", required=True)
    render = commands.add_parser(
        "render", help="write PATH.mp4 and PATH.json for one seed",
        description="Render one synthetic video to an mp4 and write its ground truth and questions "
                    "to a .json file with the same name.")
    render.add_argument("--seed", type=int, required=True, help="non-negative integer; same seed, same video")
    render.add_argument("--duration", type=float, default=None,
                        help=f"seconds of video (>= {MIN_DURATION:g}); default: drawn log-uniformly in 60..3600")
    render.add_argument("--fps", type=float, default=4.0, help="frames per second of the mp4 (default: 4)")
    render.add_argument("--out", required=True, metavar="PATH.mp4", help="output mp4; the JSON goes to PATH.json")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.seed < 0:
        parser.error(f"--seed must be non-negative, got {args.seed}")
    if not args.fps > 0:
        parser.error(f"--fps must be positive, got {args.fps}")
    root, ext = os.path.splitext(args.out)
    if ext.lower() != ".mp4":
        parser.error(f"--out must end in .mp4, got {args.out!r}")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        parser.error(f"--out: directory {os.path.dirname(os.path.abspath(args.out))!r} does not exist")
    try:
        video = generate_video(args.seed, args.duration)
    except ValueError as err:
        parser.error(str(err))

    began = time.perf_counter()
    write_mp4(video, args.out, args.fps)
    # A separate stream so the questions can change without changing the video of a seed.
    questions = make_questions(video, np.random.default_rng([args.seed, 1])) + temporal_questions(video)
    with open(root + ".json", "w") as f:
        json.dump({"video": video.to_dict(), "questions": [dataclasses.asdict(q) for q in questions]}, f, indent=1)
    log.info("wrote %s and %s.json: seed %d, %.1f s, %d frames at %g fps, %d scenes, %d events, dominant %s, %.1f s",
             args.out, root, video.seed, video.duration, round(video.duration * args.fps), args.fps,
             len(video.scenes), len(video.events), video.dominant_kind, time.perf_counter() - began)
    return 0


if __name__ == "__main__":
    sys.exit(main())
