"""Whether a second relevance stage from stage 15 would find both objects of an order question: a short run of
stage 15's loop from its state file, on its own encoded training videos (its pools file), under other settings
(anchor weight, two-object share, learning rate), then the readings stage 15 was judged by: one- and two-object
localisation on the tuning videos, the memory drift from stage 15, and `two_objects.py`'s "each object found" on
its 13 videos. CPU time by the process's own clock (the machine is shared).

    PYTHONPATH=. .venv/bin/python experiments/tiny-v7/relevance_again_cost.py --steps 100 --anchor 30 \
        --share 0.75 --lr 2e-4 --json experiments/tiny-v7/relevance-again-cost-a.json
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import tempfile

import numpy as np
import torch

from tempo.model import TempoModel
from tempo.train.curriculum import set_relevance_direction
from tempo.train.loop import ProgressFile
from tempo.train.state import load_state
from tempo.train.tiny import BASE_DIRNAME
from tempo.train.two_objects import frozen_compressor, relevance_readings, train_two_objects

two_objects = importlib.import_module("experiments.tiny-v7.two_objects")  # its 13 videos and their summaries
cpu_seconds = importlib.import_module("experiments.tiny-v7.stage15_cost").cpu_seconds

log = logging.getLogger("relevance_again_cost")


def each_found(model: TempoModel) -> dict:
    """`two_objects.py`'s readings of the shipped order example and its 12 videos, order wording and each object
    alone (its probe is left out)."""
    videos = [v for v in [two_objects.read_video(model, *two_objects.EXAMPLE)]
              + [two_objects.read_video(model, s, None) for s in two_objects.SEEDS] if v]
    readings = {name: two_objects.aggregate([two_objects.summary(
        **{key: v["read"][name][key] for key in ("relevance", "labels", "each")}) for v in videos])
        for name in ("order", "either", "both", "first alone", "second alone")}
    example = two_objects.summary(**{key: videos[0]["read"]["order"][key] for key in ("relevance", "labels", "each")})
    return readings | {"example_order": example}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--state", default="outputs/tiny-v7/stage.safetensors", help="stage 15's state file")
    parser.add_argument("--pools", default="outputs/tiny-v7/stage-15-pools.pt", help="stage 15's encoded videos")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lists", type=int, default=4)
    parser.add_argument("--anchor", type=float, default=30.0)
    parser.add_argument("--share", type=float, default=0.75, help="the share of two-object lists")
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--json", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        model, head, _, stage = load_state(args.state, scratch, torch.device("cpu"))
        pools = torch.load(args.pools, weights_only=False)["pools"]
        encoded, tuning = pools["encoded"], pools["tuning"]
        frozen = frozen_compressor(model)
        started = cpu_seconds()
        summary = train_two_objects(model, head, frozen, encoded, args.steps, args.lists, args.lr, args.share,
                                    args.anchor, np.random.default_rng(0), 10,
                                    ProgressFile(os.path.join(scratch, "progress.pt"), {}))
        training = cpu_seconds() - started
        set_relevance_direction(model, head, scratch, os.path.join(scratch, BASE_DIRNAME))  # the head's new one
        started = cpu_seconds()
        readings = relevance_readings(model, frozen, tuning) | {"two_objects": each_found(model)}
        reading = cpu_seconds() - started
    report = {"state_stage": stage, "updates": args.steps, "lists": args.lists, "anchor_weight": args.anchor,
              "two_object_share": args.share, "lr": args.lr, "training_cpu_seconds": round(training, 1),
              "cpu_seconds_per_update": round(training / args.steps, 2), "reading_cpu_seconds": round(reading, 1),
              "after": readings, "training": summary}
    log.info("after: %s", readings)
    with open(args.json, "w") as file:
        json.dump(report, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
