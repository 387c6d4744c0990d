"""What one update of stage 15 costs, and how its memory anchor and losses move over the first few: a few updates
on a few short training videos, from a state file, CPU time by the process's own clock (the machine is shared).

    PYTHONPATH=. .venv/bin/python experiments/tiny-v7/stage15_cost.py --json experiments/tiny-v7/stage15-cost.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import tempfile

import numpy as np
import torch

from tempo.synthetic import generate_video
from tempo.train import data
from tempo.train.loop import ProgressFile
from tempo.train.recipe import TRAINING_SEEDS
from tempo.train.state import load_state
from tempo.train.two_objects import frozen_compressor, train_two_objects

log = logging.getLogger("stage15_cost")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--state", default="experiments/tiny-v6/stage.safetensors", help="the state file read")
    parser.add_argument("--videos", type=int, default=4, help="short training videos (stage 1's first ones)")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--anchor", type=float, default=10.0)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        model, head, _, stage = load_state(args.state, scratch, torch.device("cpu"))
        videos = [generate_video(TRAINING_SEEDS + i, min_duration=30, max_duration=150) for i in range(args.videos)]
        started = cpu_seconds()
        encoded = data.encode_videos(model.compressor, videos, 1024, model.geometry, np.random.default_rng(0))
        encoding = cpu_seconds() - started
        started = cpu_seconds()
        summary = train_two_objects(model, head, frozen_compressor(model), encoded, args.steps, 4, 2e-4, 0.5,
                                    args.anchor, np.random.default_rng(0), 1,
                                    ProgressFile(os.path.join(scratch, "progress.pt"), {}))
        per_update = (cpu_seconds() - started) / args.steps
    report = {"state_stage": stage, "videos": args.videos, "segments": sum(len(v.plan.segments) for v in encoded),
              "encode_cpu_seconds": round(encoding, 1), "updates": args.steps,
              "cpu_seconds_per_update": round(per_update, 2), "anchor_weight": args.anchor, "training": summary}
    log.info("%s", report)
    with open(args.json, "w") as file:
        json.dump(report, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
