"""Tempo-Tiny v3 in resumable stages of at most 100 CPU-minutes: `python -m tempo.train --stage N` reads the
previous stage's state file and writes its own over it (one file, half precision, committed after each stage).

  stage 1  tokenizer, base pre-training, then localisation (the compressor's relevance ranks the evidence first)
  stage 2  the paper's stages 0-2 at toy scale (align, joint, longer) on that compressor, with the ranking loss
           beside every step that trains the compressor, so the localisation stays
  stage 3  the decoder alone on composed inputs of 1 -> 128 segments (see `compose`), with its growth curve
  stage 4  the decoder on composed inputs again from W = 1, "when" questions twice as often (stage 3's decoder
           never copied a time tag), then on whole long and medium videos, half the time still composed inputs
  stage 5  long phases at W = 16 -> 128 with "when" questions two in three, on videos the decoder has not seen
           (stage 4's copy stopped at W = 16 after short wide phases), then real pairs again
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from dataclasses import asdict

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import nn

from ..model import TempoModel, build_model, save_pretrained
from ..synthetic import generate_video
from . import data
from .base import relevance_accuracy
from .curriculum import pretrain, set_relevance_direction, align_and_joint, training_videos
from .localise import localisation_accuracy, ranking_regulariser, train_localisation
from .compose import FAMILIES, Composer, Mixture, build_pool, copy_accuracy, train_composed
from .recipe import TRAINING_SEEDS, TUNING_SEEDS, Recipe
from .tiny import write_skeleton

log = logging.getLogger(__name__)
STATE_FILE = "stage.safetensors"
HEAD_KEY = "base_lm_head.weight"  # the base Qwen3-VL's LM head: it is not part of the Tempo checkpoint


def save_state(model: TempoModel, head: nn.Linear, tokenizer: Tokenizer, stage: int, path: str) -> None:
    """Every weight in float16, with the tokenizer and the stage number in the header."""
    tensors = {name: p.detach().cpu().half().contiguous() for name, p in model.state_dict().items()}
    tensors[HEAD_KEY] = head.weight.detach().cpu().half().contiguous()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save_file(tensors, path + ".partial", metadata={"stage": str(stage), "tokenizer": tokenizer.to_str()})
    os.replace(path + ".partial", path)


def load_state(path: str, out_dir: str, device: torch.device) -> tuple[TempoModel, nn.Linear, Tokenizer, int]:
    """The model, base head and tokenizer a stage left in `path`, with a loadable checkpoint in `out_dir`."""
    with safe_open(path, "pt") as f:
        metadata = f.metadata()
    tokenizer = Tokenizer.from_str(metadata["tokenizer"])
    checkpoint_dir, base_dir = write_skeleton(out_dir, tokenizer)
    model = build_model(checkpoint_dir, base_dir, "Tempo-Tiny", device, torch.float32, initialize=True)
    tensors = load_file(path)
    head_weight = tensors.pop(HEAD_KEY)
    model.load_state_dict({name: t.float() for name, t in tensors.items()})
    head = nn.Linear(head_weight.shape[1], head_weight.shape[0], bias=False).to(device)
    with torch.no_grad():
        head.weight.copy_(head_weight.float())
    set_relevance_direction(model, head, checkpoint_dir, base_dir)
    save_pretrained(model, checkpoint_dir)
    return model.to(device), head, tokenizer, int(metadata["stage"])


def tuning_videos(recipe: Recipe) -> list:
    """Unseen 1-60 minute videos the stages report on (the acceptance check uses another range)."""
    return [generate_video(TUNING_SEEDS + i, min_duration=60, max_duration=recipe.tuning_max_duration)
            for i in range(recipe.tuning_videos)]


def stage_localise(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    report: dict = {"stage": 1, "recipe": asdict(recipe), "device": str(device), "stages": {}}
    pre = pretrain(out_dir, recipe, device, every, report)
    model, rng = pre.model, pre.rng
    tuning = data.encode_videos(model.compressor, tuning_videos(recipe), 1024, model.geometry, rng)
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


def resume(stage: int, recipe: Recipe, state_path: str, out_dir: str, device: torch.device):
    """The previous stage's model, head and tokenizer, this stage's report and its own random stream."""
    model, head, tokenizer, done = load_state(state_path, out_dir, device)
    if done != stage - 1:
        raise ValueError(f"stage {stage} continues stage {stage - 1}, but {state_path} holds stage {done}")
    torch.manual_seed(recipe.seed + stage)
    report: dict = {"stage": stage, "recipe": asdict(recipe), "device": str(device), "stages": {}}
    return model, head, tokenizer, report, np.random.default_rng([recipe.seed, stage])


def finish(model: TempoModel, head: nn.Linear, tokenizer: Tokenizer, stage: int, state_path: str,
           out_dir: str) -> None:
    """Replace the state file and write the loadable checkpoint."""
    model.eval()
    save_state(model, head, tokenizer, stage, state_path)
    save_pretrained(model, out_dir)


def stage_decoder(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    model, head, tokenizer, report, rng = resume(2, recipe, state_path, out_dir, device)
    model.train()
    model.compressor.requires_grad_(False)
    head.requires_grad_(False)
    started = time.perf_counter()
    videos = training_videos(recipe)
    encoded = {name: data.encode_videos(model.compressor, videos[name], 256 if name == "medium" else 1024,
                                        model.geometry, rng) for name in ("short", "medium", "long", "held_out")}
    tuning = data.encode_videos(model.compressor, tuning_videos(recipe), 1024, model.geometry, rng)
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


def composed_pools(model: TempoModel, recipe: Recipe, videos: int, rng: np.random.Generator,
                   weights: tuple[float, ...] | None = None, skip: int = 0):
    """Composers over `videos` short training videos after the first `skip` (families drawn by `weights`) and over
    the held-out ones the growth curve is read on (families drawn uniformly)."""
    first = TRAINING_SEEDS + recipe.seed * 10_000
    pool = build_pool(model, [generate_video(first + 200 + skip + i, min_duration=30, max_duration=150)
                              for i in range(videos)], rng)
    held_out = build_pool(model, [generate_video(first + 9_100 + i, min_duration=30, max_duration=150)
                                  for i in range(recipe.pool_held_out)], rng, first=videos)
    return Composer(pool, weights), Composer(held_out)


def stage_compose(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    model, head, tokenizer, report, rng = resume(3, recipe, state_path, out_dir, device)
    model.requires_grad_(False)
    started = time.perf_counter()
    pool, held_out = composed_pools(model, recipe, recipe.pool_videos, rng)
    report["stages"]["pool"] = {"seconds": round(time.perf_counter() - started, 1), "questions": len(pool.pool),
                                "held_out_questions": len(held_out.pool)}
    log.info("composed-input pool: %s", report["stages"]["pool"])
    report["copy_accuracy_before"] = copy_accuracy(model, held_out, recipe.copy_eval_inputs)
    log.info("held-out copy accuracy before: %s", report["copy_accuracy_before"])
    model.train()
    model.decoder.requires_grad_(True)
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
                      first=skip + pool_videos + recipe.pool_held_out, families=(*FAMILIES, "global"))
    report["stages"]["pairs"] = {"seconds": round(time.perf_counter() - started, 1), "real_pairs": len(real),
                                 "real_segments": sum(len(item.labels) for item in real),
                                 "composed_questions": len(pool.pool)}
    log.info("real pairs and composed-input pool: %s", report["stages"]["pairs"])
    report["copy_accuracy_before"] = copy_accuracy(model, held_out, recipe.copy_eval_inputs)
    log.info("held-out copy accuracy before: %s", report["copy_accuracy_before"])
    model.train()
    model.decoder.requires_grad_(True)
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
    """Stage 3's decoder never copied a time tag; trained again from W = 1, doubling, with "when" questions twice
    as often, it does. Then real pairs, half the time, at the widest W."""
    return composed_then_real(4, recipe, state_path, out_dir, device, every, "tags", recipe.tag_widths,
                              recipe.tag_steps, recipe.tag_family_weights, recipe.real_pool_videos)


def stage_wide(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    """Stage 4's phases at W = 64 and 128 (800 and 600 steps, a third of them "when") moved neither width's copy;
    here each wide width gets thousands of steps, two in three "when", on videos no earlier stage pooled; then
    real pairs as in stage 4."""
    seen = max(recipe.pool_videos, recipe.real_pool_videos)  # stages 3 and 4 drew their pools from these
    return composed_then_real(5, recipe, state_path, out_dir, device, every, "wide", recipe.wide_widths,
                              recipe.wide_steps, recipe.wide_family_weights, recipe.wide_pool_videos, seen)


STAGES = {1: stage_localise, 2: stage_decoder, 3: stage_compose, 4: stage_real, 5: stage_wide}


def run_stage(stage: int, recipe: Recipe, state_path: str, out_dir: str | None, device: torch.device,
              every: int) -> dict:
    """Run one stage, write its state file and its log (beside the state file, `stage-N.json`); with `out_dir`,
    the checkpoint there gets the logs of every stage so far as its `training_log.json`."""
    if stage not in STAGES:
        raise ValueError(f"there is no stage {stage}; the stages are {sorted(STAGES)}")
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
    with open(log_path, "w", encoding="utf-8") as f:
        json.dump({"recipe": "Tempo-Tiny v3, staged (python -m tempo.train --stage N)", "stages": stages,
                   "seconds": round(sum(report["seconds"] for report in stages.values()), 1)}, f, indent=1)
