"""The blend stages: the decoder learns, with the compressor frozen, on a blend of composed inputs
(`compose_long`): own-video inputs (the evidence among its own long video's look-alikes), global inputs, the composed
stages' (the evidence among other videos' segments), short videos as own-video inputs, and interval and
order questions as own-video inputs of long and short videos, each stage in the shares its record gives
(`recipe.BlendStage`). Every stage draws fresh videos; its growth curve is read on unseen ones after every phase.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from ..model import TempoModel
from ..synthetic import TEMPORAL_FAMILIES, SyntheticVideo, generate_video
from .compose import FAMILIES, Composer, PoolItem, Sampler, build_pool, copy_accuracy, train_composed
from .compose_long import Blend, GlobalComposer, GlobalItem, OwnVideo, VideoTags, build_long_pool
from .distractors import NeedleDistractors
from .recipe import TRAINING_SEEDS, BlendStage, Recipe
from .state import (
    cached_pools,
    finish,
    pools_key,
    resume,
    short_pools,
    short_training_videos,
    stage_file,
    stage_progress_file,
)
from .uneven_tags import UnevenTags

log = logging.getLogger(__name__)
LONG_SEEDS = 4_000  # offset of the blend stages' 1-60 min training videos in a recipe's seed block ...
LONG_HELD_OUT_SEEDS = 9_500  # ... and of the unseen ones their growth curve is read on
SHORT_SEEN = 1_800  # short videos after the first 200 that stages 3-5 pooled; slots 0-5 come after them ...
LATER_SHORT_SEEN = 5_900  # ... and slots from 6 after the long training videos (+6,000-6,029), up to +8,999
LATER_SLOTS = 6
READ_WIDTHS = (16, 64, 128)


def seed_offsets(recipe: Recipe, slot: int) -> tuple[int, int]:
    """Where a blend stage's fresh videos start in the recipe's seed block: its 1-60 minute videos, and the short
    ones after the first 200 (`state.short_pools`). Each slot is a full stage wide, so a stage that pools fewer
    videos leaves the next slot's seeds alone."""
    short = SHORT_SEEN + slot * recipe.blend_short_videos if slot < LATER_SLOTS else \
        LATER_SHORT_SEEN + (slot - LATER_SLOTS) * recipe.blend_short_videos
    return LONG_SEEDS + slot * recipe.blend_videos, short


def pool_sizes(recipe: Recipe, stage: BlendStage, share: float | None = None) -> tuple[int, int]:
    """How many fresh 1-60 minute and short videos a blend stage pools (with `share`, that share of a slot)."""
    share = stage.pool_share if share is None else share
    return max(1, round(share * recipe.blend_videos)), max(1, round(share * recipe.blend_short_videos))


def counting_pool(model: TempoModel, recipe: Recipe, stage: BlendStage, rng: np.random.Generator) -> list[PoolItem]:
    """Counting questions alone about the slot's videos after the stage's blend pools: one question, so one
    compression, per video, and every occurrence kept in each input (`kept_segments`)."""
    n_long, n_short = pool_sizes(recipe, stage, stage.counting_pool_share)
    skip_long, skip_short = pool_sizes(recipe, stage)
    long_offset, short_skip = seed_offsets(recipe, stage.slot)
    videos = long_videos(recipe, long_offset + skip_long, n_long) + \
        short_training_videos(recipe, short_skip + skip_short, n_short)
    return build_pool(model, videos, rng, families=("counting",))


def long_videos(recipe: Recipe, offset: int, count: int) -> list[SyntheticVideo]:
    """`count` 1-60 minute videos (the evaluation's range) from `offset` in the recipe's seed block."""
    first = TRAINING_SEEDS + recipe.seed * 10_000 + offset
    return [generate_video(first + i, min_duration=60, max_duration=recipe.blend_max_duration) for i in range(count)]


@dataclass(frozen=True)
class StagePools:
    """A blend stage's compressed questions, what its samplers draw from: the slot's 1-60 minute videos (with their
    global items) and short ones, the unseen ones its growth curve is read on, and the counting-only pool (empty
    without `counting_pool_share`). Building them is most of a stage's pooling time; drawing from them is cheap."""

    long: list[PoolItem]
    long_global: list[GlobalItem]
    short: list[PoolItem]
    held_long: list[PoolItem]
    held_global: list[GlobalItem]
    held_short: list[PoolItem]
    counting: list[PoolItem]


def stage_pools(model: TempoModel, recipe: Recipe, stage: BlendStage, rng: np.random.Generator) -> StagePools:
    """Every question a blend stage draws from, each compressed once, from videos no earlier stage pooled (the
    held-out ones are the same in every stage). Interval and order questions come from each video's own stream, and
    the counting-only pool is built last, so the other pools are as they would be without either."""
    temporal = stage.temporal
    n_long, n_short = pool_sizes(recipe, stage)
    long_offset, short_skip = seed_offsets(recipe, stage.slot)
    items, global_items = build_long_pool(model, long_videos(recipe, long_offset, n_long), rng, temporal=temporal)
    short_items, short_held_items = short_pools(model, recipe, n_short, rng, short_skip,
                                                FAMILIES + (TEMPORAL_FAMILIES if temporal else ()))
    held_items, held_global = build_long_pool(model, long_videos(recipe, LONG_HELD_OUT_SEEDS, recipe.blend_held_out),
                                              rng, temporal=temporal)
    counting = counting_pool(model, recipe, stage, rng) if stage.counting_pool_share > 0 else []
    return StagePools(items, global_items, short_items, held_items, held_global, short_held_items, counting)


def blend_samplers(pools: StagePools, recipe: Recipe, stage: BlendStage) -> tuple[Blend, dict[str, Sampler]]:
    """A blend stage's training blend over its pools, in the shares its record gives, and the held-out samplers its
    growth curve is read on."""
    temporal = stage.temporal
    (own, own_temporal), (short, short_temporal) = by_kind(pools.long), by_kind(pools.short)
    (held_own, held_temporal), (short_held, short_held_temporal) = by_kind(pools.held_long), by_kind(pools.held_short)
    samplers: list[Sampler] = [OwnVideo(own, recipe.blend_family_weights), GlobalComposer(pools.long_global),
                               Composer(short, recipe.blend_family_weights)]
    weights = stage.weights
    counting = stage.counting_pool_share > 0
    if len(weights) - len(samplers) - 2 * temporal - counting - 2 * stage.distractors == 1:  # short videos whole
        samplers.append(OwnVideo(short, recipe.blend_family_weights))
    if temporal:
        samplers += [OwnVideo(pool, stage.temporal_weights or recipe.blend_temporal_weights, TEMPORAL_FAMILIES)
                     for pool in (own_temporal, short_temporal)]
    if counting:
        samplers.append(OwnVideo(pools.counting, families=("counting",)))
    if stage.distractors:
        samplers += [NeedleDistractors(pools.long), NeedleDistractors(pools.short)]
    if len(weights) != len(samplers):
        raise ValueError(f"stage {stage.number} has {len(samplers)} samplers but {len(weights)} blend weights")
    empty = [j for j, sampler in enumerate(samplers) if isinstance(sampler, NeedleDistractors) and not sampler.pool]
    if empty:  # a trial's few videos may hold no needle with distractors
        log.warning("stage %d: no needle question with distractors in samplers %s; their weight goes to the rest",
                    stage.number, empty)
        weights = tuple(0.0 if j in empty else w for j, w in enumerate(weights))
    held_out: dict[str, Sampler] = {"own video": OwnVideo(held_own), "global": GlobalComposer(pools.held_global),
                                    "other videos": Composer(short_held)}
    if stage.video_tags > 0:
        held_out["short own video, video tags"] = VideoTags(OwnVideo(short_held), 1.0)
    if temporal:
        held_out["interval and order, own video"] = OwnVideo(held_temporal, families=TEMPORAL_FAMILIES)
        held_out["interval and order, short own video, video tags"] = VideoTags(
            OwnVideo(short_held_temporal, families=TEMPORAL_FAMILIES), 1.0)
    if stage.distractors and (held_needles := NeedleDistractors(pools.held_long + pools.held_short)).pool:
        held_out["needle with distractors"] = held_needles
    if stage.uneven_tags > 0:
        held_out["short own video, uneven tags"] = UnevenTags(OwnVideo(short_held), 1.0)
    return Blend(samplers, weights), held_out


def by_kind(items: list[PoolItem]) -> tuple[list[PoolItem], list[PoolItem]]:
    """A pool's needle, grounding and counting items, and its interval and order items."""
    return [i for i in items if i.family in FAMILIES], [i for i in items if i.family in TEMPORAL_FAMILIES]


def blend_reading(model: TempoModel, held_out: dict[str, Sampler], per_width: int) -> dict:
    """Per held-out sampler and width, teacher-forced exact match per family and greedy "when" within tolerance."""
    return {name: copy_accuracy(model, sampler, per_width, widths=READ_WIDTHS) for name, sampler in held_out.items()}


def train_blend_stage(stage: BlendStage, recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                      every: int) -> dict:
    """The decoder (grown to the size the stage gives) on the stage's blend, in its phases. Beside the state file:
    the stage's pools, and the loop's progress until the stage ends, so a run cut off and run again goes on where
    it was."""
    model, head, tokenizer, report, rng = resume(stage.number, recipe, state_path, out_dir, device, stage.layers,
                                                 stage.decoder, stage.follows)
    model.requires_grad_(False)
    report["decoder_layers"] = len(model.decoder.lm.model.layers)
    report["decoder_width"] = model.decoder.lm.config.hidden_size
    progress_file = stage_progress_file(stage, recipe, state_path, model, head)
    cached = cached_pools(stage_file(state_path, stage.number, "pools"), pools_key(recipe, stage, model),
                          lambda: stage_pools(model, recipe, stage, rng), rng)
    blend, held_out = blend_samplers(cached.pools, recipe, stage)
    report["parts"]["pools"] = {"seconds": cached.built_seconds, "read_from_file": cached.read,
                                 "own_video_questions": len(blend.samplers[0].pool),
                                 "global_videos": len(blend.samplers[1].pool),
                                 "short_questions": len(blend.samplers[2].pool),
                                 "interval_and_order_questions": sum(len(sampler.pool) for sampler in blend.samplers
                                                                     if isinstance(sampler, OwnVideo) and
                                                                     sampler.families == TEMPORAL_FAMILIES)}
    log.info("pools: %s", report["parts"]["pools"])
    training: Sampler = VideoTags(blend, stage.video_tags) if stage.video_tags > 0 else blend
    training = UnevenTags(training, stage.uneven_tags) if stage.uneven_tags > 0 else training

    def read(reading_model: TempoModel) -> dict:
        return blend_reading(reading_model, held_out, recipe.blend_eval_inputs)

    report["reading_before"] = read(model)
    log.info("held-out reading before: %s", report["reading_before"])
    model.train()
    model.decoder.requires_grad_(True)
    report["parts"]["blend"] = train_composed(model, training, stage.widths, stage.steps, 4, stage.lr,
                                               recipe.copy_ata_share, rng, every, read=read,
                                               progress_file=progress_file)
    log.info("growth curve: %s", report["parts"]["blend"]["growth_curve"])
    finish(model, head, tokenizer, stage.number, state_path, out_dir)
    progress_file.remove()
    return report
