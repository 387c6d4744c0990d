"""What stage 8 costs per step and per pooled video, beside stage 7's blend, to size its plan (issue 47).

    PYTHONPATH=. python experiments/tiny-v5/stage8_cost.py --steps 12 --json experiments/tiny-v5/stage8-cost.json

From the shipped Tempo-Tiny (v4's stage 6): pools built from stage 8's first long and short videos, with the time
spent on the vision tower and on each compressed question; then training steps of 4 inputs at W = 64 and 128
drawn from stage 7's blend and from stage 8's (both half with video tags), each the same number of steps; and one
held-out reading per sampler kind, scaled to the recipe's 24 inputs per width.
"""

from __future__ import annotations

import argparse
import json
import logging
import time

import numpy as np
import torch

import tempo
from tempo.synthetic import ALL_FAMILIES, TEMPORAL_FAMILIES, generate_video
from tempo.train import compose
from tempo.train.blend_stages import LONG_SEEDS, READ_WIDTHS, SHORT_SEEN, by_kind, long_videos
from tempo.train.compose import Composer, copy_accuracy, train_composed
from tempo.train.compose_long import Blend, GlobalComposer, OwnVideo, VideoTags, build_long_pool
from tempo.train.recipe import TRAINING_SEEDS, Recipe

log = logging.getLogger("stage8_cost")


def timed_pools(model, recipe: Recipe, long_count: int, short_count: int, rng) -> tuple[dict, dict]:
    """Stage 8's first videos pooled with interval and order, and where the time went."""
    spent = {"compress": 0.0, "questions": 0}
    compress = compose.compress_video

    def counted(*args, **kwargs):
        began = time.perf_counter()
        out = compress(*args, **kwargs)
        spent["compress"] += time.perf_counter() - began
        spent["questions"] += 1
        return out

    compose.compress_video = counted
    began = time.perf_counter()
    videos = long_videos(recipe, LONG_SEEDS + 2 * recipe.blend_videos, long_count)
    items, global_items = build_long_pool(model, videos, rng, temporal=True)
    long_seconds, long_spent = time.perf_counter() - began, dict(spent)
    first = TRAINING_SEEDS + recipe.seed * 10_000 + 200 + SHORT_SEEN + 2 * recipe.blend_short_videos
    shorts = [generate_video(first + i, min_duration=30, max_duration=150) for i in range(short_count)]
    began = time.perf_counter()
    short_items = compose.build_pool(model, shorts, rng, families=(*compose.FAMILIES, *TEMPORAL_FAMILIES))
    short_seconds = time.perf_counter() - began
    compose.compress_video = compress
    segments = [len(g.item.labels) for g in global_items]
    report = {
        "long": {"videos": long_count, "minutes": [round(v.duration / 60, 1) for v in videos], "segments": segments,
                 "seconds": round(long_seconds, 1), "compress_seconds": round(long_spent["compress"], 1),
                 "questions": long_spent["questions"],
                 "compress_seconds_per_question": round(long_spent["compress"] / long_spent["questions"], 2)},
        "short": {"videos": short_count, "seconds": round(short_seconds, 1),
                  "compress_seconds": round(spent["compress"] - long_spent["compress"], 1),
                  "questions": spent["questions"] - long_spent["questions"]}}
    pools = {"items": items, "global": global_items, "short": short_items}
    return report, pools


def blends(recipe: Recipe, pools: dict) -> dict:
    """Stage 7's blend and stage 8's over the same pools, each half with video tags as in the recipe."""
    (own, own_t), (short, short_t) = by_kind(pools["items"]), by_kind(pools["short"])
    weights = recipe.blend_family_weights
    old = [OwnVideo(own, weights), GlobalComposer(pools["global"]), Composer(short, weights), OwnVideo(short, weights)]
    new = [OwnVideo(pool, recipe.blend_temporal_weights, TEMPORAL_FAMILIES) for pool in (own_t, short_t)]
    seventh, eighth = recipe.stage(7), recipe.stage(8)
    return {"stage 7": VideoTags(Blend(old, seventh.weights), seventh.video_tags),
            "stage 8": VideoTags(Blend(old + new, eighth.weights), eighth.video_tags),
            "interval and order only": VideoTags(Blend(new, (2, 1)), 0.5)}


def step_seconds(model, sampler, width: int, steps: int, seed: int) -> float:
    """Seconds per step of 4 inputs at `width` (the decoder learning, as in a stage)."""
    model.train()
    model.decoder.requires_grad_(True)
    summary = train_composed(model, sampler, (width,), (steps,), 4, 1e-3, 0.7, np.random.default_rng(seed), 10_000)
    return summary["seconds"] / steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="steps per blend and width")
    parser.add_argument("--long", type=int, default=2, help="long videos pooled")
    parser.add_argument("--short", type=int, default=6, help="short videos pooled")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.manual_seed(0)
    recipe = Recipe()
    model = tempo.from_pretrained(device="cpu")
    model.requires_grad_(False)
    report: dict = {"threads": torch.get_num_threads(), "families": list(ALL_FAMILIES)}
    report["pools"], pools = timed_pools(model, recipe, args.long, args.short, np.random.default_rng(0))
    log.info("pools: %s", report["pools"])
    samplers = blends(recipe, pools)
    report["steps"] = {name: {str(width): round(step_seconds(model, sampler, width, args.steps, width), 3)
                              for width in (64, 128)} for name, sampler in samplers.items()}
    log.info("seconds per step: %s", report["steps"])
    model.eval()
    reading = {}
    for name, sampler in (("own video (old families)", OwnVideo(by_kind(pools["items"])[0])),
                          ("interval and order, own video", OwnVideo(by_kind(pools["items"])[1],
                                                                     families=TEMPORAL_FAMILIES))):
        began = time.perf_counter()
        copy_accuracy(model, sampler, 4, widths=READ_WIDTHS)
        reading[name] = round((time.perf_counter() - began) * recipe.blend_eval_inputs / 4, 1)
    report["reading_seconds_per_sampler_at_24_inputs"] = reading
    log.info("reading: %s", reading)
    print(json.dumps(report, indent=1))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
