"""Tempo-Tiny v3 in resumable stages of at most 100 CPU-minutes: `python -m tempo.train --stage N` reads the
previous stage's state file and writes its own over it (one file, half precision, committed after each stage).

  stage 1  tokenizer, base pre-training, then localisation (the compressor's relevance ranks the evidence first)
  stage 2  the paper's stages 0-2 at toy scale (align, joint, longer) on that compressor, with the ranking loss
           beside every step that trains the compressor, so the localisation stays
  stage 3  the decoder alone on composed inputs of 1 -> 128 segments (see `compose`), with its growth curve
  stage 4  the decoder on composed inputs again from W = 1, "when" questions twice as often, then on whole long
           and medium videos, half the time still composed inputs
  stage 5  long phases at W = 16 -> 128 with "when" questions two in three, on videos the decoder has not seen,
           then real pairs again

v4 and v5 go on with stages 6 and up (`v4`); `--from` starts a new folder from an earlier one's state file and
logs. Why each stage is what it is, with its measurements: experiments/tiny-v3, tiny-v4 and tiny-v5.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import asdict

import torch

from ..model import TempoModel
from ..synthetic import generate_video
from . import data
from .base import relevance_accuracy
from .compose import FAMILIES, Composer, Mixture, build_pool, copy_accuracy, train_composed
from .curriculum import align_and_joint, pretrain, set_relevance_direction, training_videos
from .localise import localisation_accuracy, ranking_regulariser, train_localisation
from .recipe import TUNING_SEEDS, Recipe
from .state import STATE_FILE, composed_pools, finish, resume  # noqa: F401 (STATE_FILE is read from here)
from .v4 import V4_STAGES

log = logging.getLogger(__name__)


def tuning_videos(recipe: Recipe) -> list:
    """Unseen 1-60 minute videos the stages report on (the acceptance check uses another range)."""
    return [generate_video(TUNING_SEEDS + i, min_duration=60, max_duration=recipe.tuning_max_duration)
            for i in range(recipe.tuning_videos)]


def stage_localise(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    report: dict = {"stage": 1, "recipe": asdict(recipe), "device": str(device), "stages": {}}
    pre = pretrain(out_dir, recipe, device, every, report)
    model, rng = pre.model, pre.rng
    tuning = data.encode_videos(model.compressor, tuning_videos(recipe), recipe.max_frames, model.geometry, rng)
    report["localisation_after_base"] = localisation_accuracy(model, tuning)
    log.info("localisation after the base stage: %s", report["localisation_after_base"])
    videos = pre.encoded["short"] + pre.encoded["medium"] + pre.encoded["long"]
    model.compressor.vlm.language_model.requires_grad_(True)
    report["stages"]["localise"] = train_localisation(model, pre.head, videos, recipe.localise_steps,
                                                      recipe.localise_lists, recipe.localise_lr, rng, every)
    set_relevance_direction(model, pre.head, pre.checkpoint_dir, pre.base_dir)
    report["relevance_after_localise"] = relevance_accuracy(model, pre.encoded["held_out"])
    report["localisation_after_localise"] = localisation_accuracy(model, tuning)
    log.info("localisation after localise: %s", report["localisation_after_localise"])
    finish(model, pre.head, pre.tokenizer, 1, state_path, pre.checkpoint_dir)
    return report


def stage_decoder(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    model, head, tokenizer, report, rng = resume(2, recipe, state_path, out_dir, device)
    model.train()
    model.compressor.requires_grad_(False)
    head.requires_grad_(False)
    started = time.perf_counter()
    videos = training_videos(recipe)
    encoded = {name: data.encode_videos(model.compressor, videos[name],
                                        recipe.medium_frames if name == "medium" else recipe.max_frames,
                                        model.geometry, rng) for name in ("short", "medium", "long", "held_out")}
    tuning = data.encode_videos(model.compressor, tuning_videos(recipe), recipe.max_frames, model.geometry, rng)
    report["stages"]["encode"] = {"seconds": round(time.perf_counter() - started, 1)}
    report["localisation_before"] = localisation_accuracy(model, tuning)
    log.info("localisation before stage 2: %s", report["localisation_before"])
    regulariser = ranking_regulariser(model, model.compressor.relevance_direction,
                                      encoded["short"] + encoded["medium"] + encoded["long"], rng)
    align_and_joint(model, encoded, recipe, rng, every, report, regulariser)
    model.compressor.requires_grad_(False)
    report["relevance_after_training"] = relevance_accuracy(model, encoded["held_out"])
    report["localisation_after"] = localisation_accuracy(model, tuning)
    log.info("localisation after stage 2: %s", report["localisation_after"])
    finish(model, head, tokenizer, 2, state_path, out_dir)
    return report


def decoder_training(model: TempoModel, held_out: Composer, recipe: Recipe, report: dict) -> None:
    """Before the decoder trains on composed inputs: the held-out copy accuracy it starts from, then only the
    decoder set to learn."""
    report["copy_accuracy_before"] = copy_accuracy(model, held_out, recipe.copy_eval_inputs)
    log.info("held-out copy accuracy before: %s", report["copy_accuracy_before"])
    model.train()
    model.decoder.requires_grad_(True)


def stage_compose(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    model, head, tokenizer, report, rng = resume(3, recipe, state_path, out_dir, device)
    model.requires_grad_(False)
    started = time.perf_counter()
    pool, held_out = composed_pools(model, recipe, recipe.pool_videos, rng)
    report["stages"]["pool"] = {"seconds": round(time.perf_counter() - started, 1), "questions": len(pool.pool),
                                "held_out_questions": len(held_out.pool)}
    log.info("composed-input pool: %s", report["stages"]["pool"])
    decoder_training(model, held_out, recipe, report)
    report["stages"]["compose"] = train_composed(model, pool, recipe.copy_widths, recipe.copy_steps, 4,
                                                 recipe.copy_lr, recipe.copy_ata_share, rng, every,
                                                 held_out, recipe.copy_eval_inputs)
    log.info("growth curve: %s", report["stages"]["compose"]["growth_curve"])
    finish(model, head, tokenizer, 3, state_path, out_dir)
    return report


def composed_then_real(stage: int, recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int,
                       phase: str, widths: tuple[int, ...], steps: tuple[int, ...], weights: tuple[float, ...],
                       pool_videos: int, skip: int = 0) -> dict:
    """The decoder on composed inputs of `widths` for `steps` (families drawn by `weights`, from `pool_videos`
    short videos after the first `skip`), then on real pairs of long and medium videos half of the time."""
    model, head, tokenizer, report, rng = resume(stage, recipe, state_path, out_dir, device)
    model.requires_grad_(False)
    started = time.perf_counter()
    videos = training_videos(recipe)
    pool, held_out = composed_pools(model, recipe, pool_videos, rng, weights, skip)
    real = build_pool(model, videos["long"] + videos["medium"], rng,
                      first=skip + pool_videos + recipe.pool_held_out, families=(*FAMILIES, "global"),
                      max_frames=recipe.max_frames)
    report["stages"]["pairs"] = {"seconds": round(time.perf_counter() - started, 1), "real_pairs": len(real),
                                 "real_segments": sum(len(item.labels) for item in real),
                                 "composed_questions": len(pool.pool)}
    log.info("real pairs and composed-input pool: %s", report["stages"]["pairs"])
    decoder_training(model, held_out, recipe, report)
    report["stages"][phase] = train_composed(model, pool, widths, steps, 4, recipe.copy_lr, recipe.copy_ata_share,
                                             rng, every, held_out, recipe.copy_eval_inputs)
    log.info("growth curve, %s phases: %s", phase, report["stages"][phase]["growth_curve"])
    report["stages"]["real"] = train_composed(model, Mixture(pool, real, recipe.real_share), (max(widths),),
                                              (recipe.real_steps,), 4, recipe.lr, recipe.copy_ata_share, rng, every,
                                              held_out, recipe.copy_eval_inputs)
    log.info("growth curve after real pairs: %s", report["stages"]["real"]["growth_curve"])
    finish(model, head, tokenizer, stage, state_path, out_dir)
    return report


def stage_real(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    """Composed inputs again from W = 1, doubling, with "when" questions twice as often; then real pairs, half the
    time, at the widest W."""
    return composed_then_real(4, recipe, state_path, out_dir, device, every, "tags", recipe.tag_widths,
                              recipe.tag_steps, recipe.tag_family_weights, recipe.real_pool_videos)


def stage_wide(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    """Thousands of steps at each wide width, two in three "when", on videos no earlier stage pooled; then real
    pairs as in stage 4."""
    seen = max(recipe.pool_videos, recipe.real_pool_videos)  # stages 3 and 4 drew their pools from these
    return composed_then_real(5, recipe, state_path, out_dir, device, every, "wide", recipe.wide_widths,
                              recipe.wide_steps, recipe.wide_family_weights, recipe.wide_pool_videos, seen)


STAGES = {1: stage_localise, 2: stage_decoder, 3: stage_compose, 4: stage_real, 5: stage_wide, **V4_STAGES}


def start_from(source: str, state_path: str, stage: int) -> None:
    """Begin `state_path`'s folder with `source`'s state file and the logs of the stages before `stage` (a new
    version's folder goes on from an earlier one's)."""
    folder, earlier = os.path.dirname(os.path.abspath(state_path)), os.path.dirname(os.path.abspath(source))
    if os.path.abspath(source) == os.path.abspath(state_path):
        return
    os.makedirs(folder, exist_ok=True)
    for number in range(1, stage):
        name = f"stage-{number}.json"
        if os.path.isfile(os.path.join(earlier, name)):
            shutil.copyfile(os.path.join(earlier, name), os.path.join(folder, name))
    shutil.copyfile(source, state_path + ".partial")
    os.replace(state_path + ".partial", state_path)


def run_stage(stage: int, recipe: Recipe, state_path: str, out_dir: str | None, device: torch.device,
              every: int, source: str | None = None) -> dict:
    """Run one stage, write its state file and its log (beside the state file, `stage-N.json`); with `out_dir`,
    the checkpoint there gets the logs of every stage so far as its `training_log.json`. With `source`, the
    stage starts from that state file instead (`start_from`)."""
    if stage not in STAGES:
        raise ValueError(f"there is no stage {stage}; the stages are {sorted(STAGES)}")
    if source is not None:
        start_from(source, state_path, stage)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        report = STAGES[stage](recipe, state_path, out_dir or scratch, device, every)
    report["seconds"] = round(time.perf_counter() - started, 1)
    folder = os.path.dirname(os.path.abspath(state_path))
    with open(os.path.join(folder, f"stage-{stage}.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    if out_dir:
        write_training_log(folder, stage, out_dir)
    log.info("stage %d took %.0f s -> %s", stage, report["seconds"], state_path)
    return report


def write_training_log(folder: str, stage: int, out_dir: str) -> None:
    """Stages 1..`stage`'s logs from `folder` as one training log, with the recipe's wall time so far."""
    stages = {}
    for number in range(1, stage + 1):
        with open(os.path.join(folder, f"stage-{number}.json"), encoding="utf-8") as f:
            stages[str(number)] = json.load(f)
    log_path = os.path.join(out_dir, "training_log.json")
    version = "v3" if stage < min(V4_STAGES) else "v4" if stage == min(V4_STAGES) else "v5"
    with open(log_path, "w", encoding="utf-8") as f:
        json.dump({"recipe": f"Tempo-Tiny {version}, staged (python -m tempo.train --stage N)", "stages": stages,
                   "seconds": round(sum(report["seconds"] for report in stages.values()), 1)}, f, indent=1)
