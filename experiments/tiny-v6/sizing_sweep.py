"""Tempo-Tiny v6's decoder sizing sweep: v5's decoder (stage 11) grown to each candidate size with the same answers
(`grow.widened`), then trained the same short schedule on the same inputs (the pools are built once, from a seed
slot no stage uses), and read on the blend stages' unseen videos after every phase. The rule that picks one, and
why these sizes: experiments/tiny-v6/README.md.

    OMP_NUM_THREADS=1 nice -n 19 env PYTHONPATH=. .venv/bin/python experiments/tiny-v6/sizing_sweep.py \\
        --out outputs/tiny-v6/sweep > outputs/tiny-v6/sweep/sweep.log 2>&1

Resumable: the pools are saved once (`pools.pt`), and every candidate's report (`<name>.json`) as it ends; a rerun
skips what is there. `--scale 0.01` runs the whole sweep as a trial in a few minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import time

import numpy as np
import torch

from tempo.model import TempoModel, save_pretrained
from tempo.train.blend_stages import blend_reading, blend_samplers, pools_key, stage_pools
from tempo.train.compose import Sampler, train_composed
from tempo.train.compose_long import VideoTags
from tempo.train.grow import decoder_parameters, decoder_size
from tempo.train.recipe import BlendStage, DecoderSize, Recipe
from tempo.train.state import cached_pools, load_state
from tempo.train.tiny import DECODER, VOCAB_SIZE

log = logging.getLogger("sizing_sweep")
V5_STATE = "experiments/tiny-v5/stage.safetensors"
CANDIDATES = {
    "v5": DECODER,
    "deeper": DecoderSize(layers=5, width=128, heads=4, kv_heads=2, mlp_width=384),
    "wider MLP": DecoderSize(layers=3, width=128, heads=4, kv_heads=2, mlp_width=768),
    "wider": DecoderSize(layers=3, width=160, heads=6, kv_heads=3, mlp_width=512),
    "widest": DecoderSize(layers=3, width=192, heads=6, kv_heads=3, mlp_width=384),
}
# The sweep's own stage: stage 12's blend on a quarter of a stage's videos from slot 14, which no stage uses, so
# stage 12 still meets fresh videos; three short phases, the same inputs for every candidate.
SWEEP = BlendStage(12, "v6", weights=(0.25, 0.1, 0.1, 0.1, 0.25, 0.2), video_tags=0.5, temporal=True,
                   widths=(16, 64, 128), steps=(300, 300, 200), lr=1e-3, layers=3, pool_share=0.25, slot=14)
MAX_BYTES = 8_000_000  # the whole Tempo checkpoint (model.safetensors), float32 as stored
MEMORY_WIDTH = 96


def scores(reading: dict) -> dict[str, float]:
    """The sweep's measures from one held-out reading: interval (greedy, IoU >= 0.5 with the tagged answer),
    order and counting (teacher-forced exact match), and the old families (needle, "when" within tolerance,
    global), each the mean over the samplers and widths that have it."""
    def mean(samplers: tuple[str, ...], keys: tuple[str, ...]) -> float:
        values = [cell[key] for name in samplers if name in reading for cell in reading[name].values()
                  for key in keys if key in cell]
        return round(float(np.mean(values)), 4) if values else float("nan")

    temporal = ("interval and order, own video", "interval and order, short own video, video tags")
    old = ("own video", "global", "other videos", "short own video, video tags")
    return {"interval": mean(temporal, ("interval_within",)), "order": mean(temporal, ("order",)),
            "counting": mean(old, ("counting",)), "old": mean(old, ("needle", "when_within", "global"))}


def answer_seconds(model: TempoModel, width: int, repeats: int = 3) -> float:
    """Median seconds of one decoder pass over a page-default input (1,024 memory tokens, 128 time tags and a
    question: ~1,200 positions) plus 16 single-token steps, as a greedy answer costs."""
    embeds = torch.randn(1, 1200, width)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        with torch.inference_mode():
            out = model.decoder.lm(inputs_embeds=embeds, use_cache=True)
            cache = out.past_key_values
            for _ in range(16):
                out = model.decoder.lm(inputs_embeds=embeds[:, -1:], past_key_values=cache, use_cache=True)
                cache = out.past_key_values
        times.append(time.perf_counter() - began)
    return round(statistics.median(times), 3)


def pools(recipe: Recipe, out: str) -> tuple[Sampler, dict[str, Sampler]]:
    """The sweep's blend and held-out samplers, over pools built once with v5's (frozen) compressor and saved."""
    model, _, _, _ = load_state(V5_STATE, os.path.join(out, "checkpoints", "pools"), torch.device("cpu"))
    rng = np.random.default_rng([recipe.seed, 12, 0])
    cached = cached_pools(os.path.join(out, "pools.pt"), {"sweep": pools_key(recipe, SWEEP, model)},
                          lambda: stage_pools(model, recipe, SWEEP, rng), rng)
    log.info("pools %s (%s s to build)", "read" if cached.read else "built", cached.built_seconds)
    return blend_samplers(cached.pools, recipe, SWEEP)


def candidate(name: str, size: DecoderSize, recipe: Recipe, stage: BlendStage, blend: Sampler,
              held_out: dict[str, Sampler], out: str) -> dict:
    """One candidate: grown from v5, trained the sweep's phases, read after each; its size and answer time."""
    folder = os.path.join(out, "checkpoints", name.replace(" ", "-"))
    model, _, _, _ = load_state(V5_STATE, folder, torch.device("cpu"), decoder=size)
    if decoder_size({k: v for k, v in model.state_dict().items()}) != size:
        raise RuntimeError(f"{name}: the grown decoder is not {size}")
    model.requires_grad_(False)
    torch.manual_seed(recipe.seed + stage.number)
    rng = np.random.default_rng([recipe.seed, stage.number, 1])  # the same inputs for every candidate

    def read(reading_model: TempoModel) -> dict:
        return blend_reading(reading_model, held_out, recipe.blend_eval_inputs)

    report: dict = {"name": name, "decoder": dataclasses.asdict(size),
                    "decoder_parameters": decoder_parameters(size, VOCAB_SIZE, MEMORY_WIDTH),
                    "answer_seconds": answer_seconds(model, size.width)}
    if name == "v5":
        report["reading_before"] = read(model)
        report["scores_before"] = scores(report["reading_before"])
    model.train()
    model.decoder.requires_grad_(True)
    began = time.perf_counter()
    trained = train_composed(model, VideoTags(blend, stage.video_tags), stage.widths, stage.steps, 4, stage.lr,
                             recipe.copy_ata_share, rng, 50, read=read)
    report["train_seconds"] = round(time.perf_counter() - began, 1)
    report["growth_curve"] = trained["growth_curve"]
    report["final_loss"] = trained["final_loss"]
    report["scores"] = scores(trained["growth_curve"][-1])
    model.eval()
    save_pretrained(model, folder)
    report["checkpoint_bytes"] = os.path.getsize(os.path.join(folder, "model.safetensors"))
    return report


def pick(reports: dict[str, dict]) -> dict:
    """The rule written before the sweep ran (README): among candidates within the limits whose old families stay
    within 5 points of v5 trained alike, the highest mean of interval, order and counting; a candidate within 3
    points of a cheaper one (fewer parameters) loses to it."""
    control = reports["v5"]["scores"]["old"]
    allowed = {name: r for name, r in reports.items() if r["checkpoint_bytes"] <= MAX_BYTES and
               r["scores"]["old"] >= control - 0.05}
    merit = {name: float(np.mean([r["scores"][k] for k in ("interval", "order", "counting")]))
             for name, r in allowed.items()}
    ranked = sorted(allowed, key=lambda name: allowed[name]["decoder_parameters"])
    best = max(merit, key=merit.__getitem__)
    chosen = next(name for name in ranked if merit[name] >= merit[best] - 0.03)
    return {"merit": {name: round(value, 4) for name, value in merit.items()}, "excluded": sorted(set(reports) -
            set(allowed)), "best": best, "chosen": chosen}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="outputs/tiny-v6/sweep")
    parser.add_argument("--scale", type=float, default=1.0, help="videos, steps and readings times this")
    parser.add_argument("--only", help="comma-separated candidate names (default: all)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    recipe, stage = Recipe(), SWEEP
    if args.scale != 1.0:  # a trial: short videos too, so that it takes minutes, and at least two of each length
        scaled = recipe.scaled(args.scale)  # pooled (a quarter of eight), since an input mixes two videos
        recipe = dataclasses.replace(scaled, blend_max_duration=90.0, blend_videos=max(8, scaled.blend_videos),
                                     blend_short_videos=max(8, scaled.blend_short_videos))
        stage = SWEEP.scaled(args.scale)
    blend, held_out = pools(recipe, args.out)
    names = args.only.split(",") if args.only else list(CANDIDATES)
    reports = {}
    for name in names:
        path = os.path.join(args.out, f"{name.replace(' ', '-')}.json")
        if not os.path.isfile(path):
            log.info("candidate %s: %s", name, CANDIDATES[name])
            report = candidate(name, CANDIDATES[name], recipe, stage, blend, held_out, args.out)
            with open(path + ".partial", "w", encoding="utf-8") as f:
                json.dump(report, f, indent=1)
            os.replace(path + ".partial", path)
            log.info("candidate %s: %s in %.0f s", name, report["scores"], report["train_seconds"])
        with open(path, encoding="utf-8") as f:
            reports[name] = json.load(f)
    if set(CANDIDATES) <= set(reports):
        summary = {"scale": args.scale, "sweep_stage": dataclasses.asdict(stage), "pick": pick(reports),
                   "candidates": {name: {k: r[k] for k in ("decoder", "decoder_parameters", "checkpoint_bytes",
                                                           "answer_seconds", "train_seconds", "scores")}
                                  for name, r in reports.items()}}
        with open(os.path.join(args.out, "sizing-sweep.json"), "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=1)
        log.info("pick: %s", summary["pick"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
