"""Tempo-Tiny in resumable stages of at most 100 CPU-minutes: `tempo train --stage N` reads the
previous stage's state file and writes its own over it (one file, half precision, committed after each stage).
The stages are the recipe's records (`recipe.STAGES`); this module runs them, and holds the stages before the
blend (`blend_stages` holds those):

  localise  tokenizer, base pre-training, then localisation (the compressor's relevance ranks the evidence first)
  paper     the paper's stages 0-2 at toy scale (align, joint, longer) on that compressor, with the ranking loss
            beside every step that trains the compressor, so the localisation stays
  composed  the decoder alone on composed inputs, one phase per width, then (with real steps) on whole long and
            medium videos, part of the time still composed inputs

`--from` starts a new folder from an earlier one's state file and logs. Why each stage is what it is, with its
measurements: docs/tempo-tiny.md and experiments/.
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
from .blend_stages import train_blend_stage
from .compose import FAMILIES, Composer, Mixture, build_pool, copy_accuracy, train_composed
from .curriculum import align_and_joint, pretrain, set_relevance_direction, training_videos
from .localise import localisation_accuracy, ranking_regulariser, train_localisation
from .recipe import TUNING_SEEDS, ComposedStage, LocaliseStage, PaperStage, Recipe, RelevanceStage, Stage
from .state import composed_pools, finish, resume
from .two_objects import train_relevance_stage

log = logging.getLogger(__name__)


def tuning_videos(recipe: Recipe) -> list:
    """Unseen 1-60 minute videos the stages report on (the acceptance check uses another range)."""
    return [generate_video(TUNING_SEEDS + i, min_duration=60, max_duration=recipe.tuning_max_duration)
            for i in range(recipe.tuning_videos)]


def train_localise_stage(stage: LocaliseStage, recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                         every: int) -> dict:
    """Tokenizer, base pre-training, then the ranking lists."""
    report: dict = {"stage": stage.number, "recipe": asdict(recipe), "device": str(device), "parts": {}}
    pre = pretrain(out_dir, recipe, device, every, report)
    model, rng = pre.model, pre.rng
    tuning = data.encode_videos(model.compressor, tuning_videos(recipe), recipe.max_frames, model.geometry, rng)
    report["localisation_after_base"] = localisation_accuracy(model, tuning)
    log.info("localisation after the base stage: %s", report["localisation_after_base"])
    videos = pre.encoded["short"] + pre.encoded["medium"] + pre.encoded["long"]
    model.compressor.vlm.language_model.requires_grad_(True)
    report["parts"]["localise"] = train_localisation(model, pre.head, videos, stage.steps, stage.lists, stage.lr, rng,
                                                      every)
    set_relevance_direction(model, pre.head, pre.checkpoint_dir, pre.base_dir)
    report["relevance_after_localise"] = relevance_accuracy(model, pre.encoded["held_out"])
    report["localisation_after_localise"] = localisation_accuracy(model, tuning)
    log.info("localisation after localise: %s", report["localisation_after_localise"])
    finish(model, pre.head, pre.tokenizer, stage.number, state_path, pre.checkpoint_dir)
    return report


def train_paper_stage(stage: PaperStage, recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                      every: int) -> dict:
    """The paper's stages 0-2 with the ranking loss beside every compressor update."""
    model, head, tokenizer, report, rng = resume(stage.number, recipe, state_path, out_dir, device)
    model.train()
    model.compressor.requires_grad_(False)
    head.requires_grad_(False)
    started = time.perf_counter()
    videos = training_videos(recipe)
    encoded = {name: data.encode_videos(model.compressor, videos[name],
                                        recipe.medium_frames if name == "medium" else recipe.max_frames,
                                        model.geometry, rng) for name in ("short", "medium", "long", "held_out")}
    tuning = data.encode_videos(model.compressor, tuning_videos(recipe), recipe.max_frames, model.geometry, rng)
    report["parts"]["encode"] = {"seconds": round(time.perf_counter() - started, 1)}
    report["localisation_before"] = localisation_accuracy(model, tuning)
    log.info("localisation before the paper's stages: %s", report["localisation_before"])
    regulariser = ranking_regulariser(model, model.compressor.relevance_direction,
                                      encoded["short"] + encoded["medium"] + encoded["long"], rng)
    align_and_joint(model, encoded, recipe, rng, every, report, regulariser)
    model.compressor.requires_grad_(False)
    report["relevance_after_training"] = relevance_accuracy(model, encoded["held_out"])
    report["localisation_after"] = localisation_accuracy(model, tuning)
    log.info("localisation after them: %s", report["localisation_after"])
    finish(model, head, tokenizer, stage.number, state_path, out_dir)
    return report


def decoder_training(model: TempoModel, held_out: Composer, recipe: Recipe, report: dict) -> None:
    """Before the decoder trains on composed inputs: the held-out copy accuracy it starts from, then only the
    decoder set to learn."""
    report["copy_accuracy_before"] = copy_accuracy(model, held_out, recipe.copy_eval_inputs)
    log.info("held-out copy accuracy before: %s", report["copy_accuracy_before"])
    model.train()
    model.decoder.requires_grad_(True)


def train_composed_stage(stage: ComposedStage, recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                         every: int) -> dict:
    """The decoder on composed inputs of the stage's widths (families drawn by its weights, from its pool of short
    videos after the first `skip`); with real steps, then on real pairs of long and medium videos part of the
    time."""
    model, head, tokenizer, report, rng = resume(stage.number, recipe, state_path, out_dir, device)
    model.requires_grad_(False)
    started = time.perf_counter()
    pool, held_out = composed_pools(model, recipe, stage.pool_videos, rng, stage.family_weights, stage.skip)
    if stage.real_steps:
        videos = training_videos(recipe)
        real = build_pool(model, videos["long"] + videos["medium"], rng,
                          first=stage.skip + stage.pool_videos + recipe.pool_held_out, families=(*FAMILIES, "global"),
                          max_frames=recipe.max_frames)
        report["parts"]["pairs"] = {"seconds": round(time.perf_counter() - started, 1), "real_pairs": len(real),
                                     "real_segments": sum(len(item.labels) for item in real),
                                     "composed_questions": len(pool.pool)}
        log.info("real pairs and composed-input pool: %s", report["parts"]["pairs"])
    else:
        report["parts"]["pool"] = {"seconds": round(time.perf_counter() - started, 1), "questions": len(pool.pool),
                                    "held_out_questions": len(held_out.pool)}
        log.info("composed-input pool: %s", report["parts"]["pool"])
    decoder_training(model, held_out, recipe, report)
    report["parts"][stage.report_key] = train_composed(model, pool, stage.widths, stage.steps, 4, stage.lr,
                                                   recipe.copy_ata_share, rng, every, held_out,
                                                   recipe.copy_eval_inputs)
    log.info("growth curve, %s phases: %s", stage.report_key, report["parts"][stage.report_key]["growth_curve"])
    if stage.real_steps:
        report["parts"]["real"] = train_composed(model, Mixture(pool, real, stage.real_share), (max(stage.widths),),
                                                  (stage.real_steps,), 4, stage.real_lr, recipe.copy_ata_share, rng,
                                                  every, held_out, recipe.copy_eval_inputs)
        log.info("growth curve after real pairs: %s", report["parts"]["real"]["growth_curve"])
    finish(model, head, tokenizer, stage.number, state_path, out_dir)
    return report


def train_stage(stage: Stage, recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                every: int) -> dict:
    """Run one stage's procedure, by its kind."""
    if isinstance(stage, LocaliseStage):
        return train_localise_stage(stage, recipe, state_path, out_dir, device, every)
    if isinstance(stage, PaperStage):
        return train_paper_stage(stage, recipe, state_path, out_dir, device, every)
    if isinstance(stage, ComposedStage):
        return train_composed_stage(stage, recipe, state_path, out_dir, device, every)
    if isinstance(stage, RelevanceStage):
        return train_relevance_stage(stage, recipe, state_path, out_dir, device, every)
    return train_blend_stage(stage, recipe, state_path, out_dir, device, every)


def lineage(recipe: Recipe, number: int) -> list[int]:
    """The stages whose states led to stage `number`, first to last, with it: each goes on from the one numbered
    before it unless its record names the stage it `follows` (v7's from v6's shipped 12, not 14)."""
    chain = [number]
    while chain[-1] > 1:
        follows = getattr(recipe.stage(chain[-1]), "follows", None)
        chain.append(chain[-1] - 1 if follows is None else follows)
    return chain[::-1]


def start_from(source: str, state_path: str, stages: list[int]) -> None:
    """Begin `state_path`'s folder with `source`'s state file and the logs of `stages` beside it (a new version's
    folder goes on from an earlier one's)."""
    folder, earlier = os.path.dirname(os.path.abspath(state_path)), os.path.dirname(os.path.abspath(source))
    if os.path.abspath(source) == os.path.abspath(state_path):
        return
    os.makedirs(folder, exist_ok=True)
    for number in stages:
        name = f"stage-{number}.json"
        if os.path.isfile(os.path.join(earlier, name)):
            shutil.copyfile(os.path.join(earlier, name), os.path.join(folder, name))
    shutil.copyfile(source, state_path + ".partial")
    os.replace(state_path + ".partial", state_path)


def run_stage(number: int, recipe: Recipe, state_path: str, out_dir: str | None, device: torch.device,
              every: int, source: str | None = None) -> dict:
    """Run the recipe's stage `number`, write its state file and its log (beside the state file, `stage-N.json`);
    with `out_dir`, the checkpoint there gets the logs of every stage so far as its `training_log.json`. With
    `source`, the stage starts from that state file instead (`start_from`)."""
    stage = recipe.stage(number)
    if source is not None:
        start_from(source, state_path, lineage(recipe, number)[:-1])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        report = train_stage(stage, recipe, state_path, out_dir or scratch, device, every)
    report["seconds"] = round(time.perf_counter() - started, 1)
    folder = os.path.dirname(os.path.abspath(state_path))
    with open(os.path.join(folder, f"stage-{number}.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    if out_dir:
        write_training_log(folder, stage, lineage(recipe, number), out_dir)
    log.info("stage %d took %.0f s -> %s", number, report["seconds"], state_path)
    return report


def write_training_log(folder: str, stage: Stage, stages_run: list[int], out_dir: str) -> None:
    """The logs of `stages_run` (the stages that led to `stage`, with it) from `folder` as one training log, with
    the recipe's wall time so far."""
    stages = {}
    for number in stages_run:
        with open(os.path.join(folder, f"stage-{number}.json"), encoding="utf-8") as f:
            stages[str(number)] = json.load(f)
    with open(os.path.join(out_dir, "training_log.json"), "w", encoding="utf-8") as f:
        json.dump({"recipe": f"Tempo-Tiny {stage.version}, staged (python -m tempo.train --stage N)",
                   "stages": stages, "seconds": round(sum(report["seconds"] for report in stages.values()), 1)},
                  f, indent=1)
