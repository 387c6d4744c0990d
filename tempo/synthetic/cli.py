"""`tempo synthetic render`: a synthetic video to mp4, with its ground truth and questions next to it as JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import time

import numpy as np

from ..errors import InputError
from .generation import MIN_DURATION, generate_video
from .mp4 import write_mp4
from .questions import make_questions, temporal_questions

log = logging.getLogger("tempo.synthetic")


DESCRIPTION = "Seeded synthetic long videos with exact ground truth, for training and demos."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="synthetic_command", metavar="{render}", required=True)
    render = commands.add_parser(
        "render", help="write PATH.mp4 and PATH.json for one seed",
        description="Render one synthetic video to an mp4 and write its ground truth and questions "
                    "to a .json file with the same name.")
    render.add_argument("--seed", type=int, required=True, help="non-negative integer; same seed, same video")
    render.add_argument("--duration", type=float, default=None,
                        help=f"seconds of video (>= {MIN_DURATION:g}); default: drawn log-uniformly in 60..3600")
    render.add_argument("--fps", type=float, default=4.0, help="frames per second of the mp4 (default: 4)")
    render.add_argument("--out", required=True, metavar="PATH.mp4", help="output mp4; the JSON goes to PATH.json")


def render(args: argparse.Namespace) -> int:
    """`tempo synthetic render`: PATH.mp4 and PATH.json for one seed."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.seed < 0:
        raise InputError(f"--seed must be non-negative, got {args.seed}")
    if not args.fps > 0:
        raise InputError(f"--fps must be positive, got {args.fps}")
    root, ext = os.path.splitext(args.out)
    if ext.lower() != ".mp4":
        raise InputError(f"--out must end in .mp4, got {args.out!r}")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise InputError(f"--out: directory {os.path.dirname(os.path.abspath(args.out))!r} does not exist")
    try:
        video = generate_video(args.seed, args.duration)
    except ValueError as err:
        raise InputError(str(err)) from None

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
