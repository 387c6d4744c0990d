"""Tempo-Tiny v4: stages 6 and up, from v3's stage 5 (`python -m tempo.train --stage 6 --from
experiments/tiny-v3/stage.safetensors --state experiments/tiny-v4/stage.safetensors`, then --stage 7, 8).

The decoder learns, with the compressor frozen, on a blend of composed inputs (`compose_long`): own-video inputs
(the evidence among its own long video's look-alikes), global inputs, and v3's composed inputs (the evidence among
other videos' segments). Every stage draws fresh videos; its growth curve is read on unseen ones after every phase.

  stage 6  the blend at W = 32, 64, 128
  stage 7  (v5) the blend again at W = 64 and 128, with short videos as own-video inputs too and half the inputs
           tagged as a whole video's would be (`VideoTags`)
  stage 8  (v5) the stage 7 blend with two more samplers: interval and order questions as own-video inputs of
           long and of short videos (`compose_long.OwnVideo` over `TEMPORAL_FAMILIES`), answered from the tags
           (`compose.tag_answer`); the decoder can be grown deeper (`grow`, `Recipe.blend_layers`)
  stage 9  (v5) stage 8's samplers on fresh videos, interval and order half of the inputs, more steps at W = 64
  stage 10 (v5) the same samplers on fresh videos, interval and order 60% of the inputs (40% from short videos),
           most steps at W = 16 and 32, where they are cheapest and the evidence is among few segments
  stage 11 (v5) stage 9's shares again (long own-video inputs 25%, interval and order 45%) at W = 64 and 128, on
           half as many fresh videos and at half the learning rate, to win back the long inputs' digit copy

The plans, decisions and measurements behind each stage: experiments/tiny-v4 and experiments/tiny-v5.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import torch

from ..model import TempoModel
from ..synthetic import TEMPORAL_FAMILIES, generate_video
from .compose import FAMILIES, Composer, PoolItem, copy_accuracy, train_composed
from .compose_long import Blend, GlobalComposer, OwnVideo, VideoTags, build_long_pool
from .recipe import TRAINING_SEEDS, Recipe
from .state import finish, resume, short_pools

log = logging.getLogger(__name__)
FIRST_STAGE = 6
LONG_SEEDS = 4_000  # offset of v4's 1-60 min training videos in a recipe's seed block (no earlier role uses it)
LONG_HELD_OUT_SEEDS = 9_500  # ... and of the unseen ones its growth curve is read on
SHORT_SEEN = 1_800  # short videos after the first 200 that stages 3-5 pooled; v4's come after them
READ_WIDTHS = (16, 64, 128)


def long_videos(recipe: Recipe, offset: int, count: int) -> list:
    """`count` 1-60 minute videos (the evaluation's range) from `offset` in the recipe's seed block."""
    first = TRAINING_SEEDS + recipe.seed * 10_000 + offset
    return [generate_video(first + i, min_duration=60, max_duration=recipe.blend_max_duration) for i in range(count)]


def blend_pools(model: TempoModel, recipe: Recipe, index: int, rng: np.random.Generator) -> tuple[Blend, dict]:
    """The training blend of v4 stage number `index` (0 for stage 6) from videos no earlier stage pooled, and the
    held-out samplers its growth curve is read on (the same unseen videos in every stage). Interval and order
    questions (v5's stage 8) are drawn from each video's own stream, so the other samplers are as without them."""
    temporal, share = recipe.blend_temporal[index], recipe.blend_pool_shares[index]
    # the seed blocks stay a full stage wide, so a stage that pools fewer videos leaves the next stage's seeds alone
    n_long, n_short = (max(1, round(share * n)) for n in (recipe.blend_videos, recipe.blend_short_videos))
    items, global_items = build_long_pool(model, long_videos(recipe, LONG_SEEDS + index * recipe.blend_videos, n_long),
                                          rng, temporal=temporal)
    short_items, short_held_items = short_pools(model, recipe, n_short, rng,
                                                SHORT_SEEN + index * recipe.blend_short_videos,
                                                FAMILIES + (TEMPORAL_FAMILIES if temporal else ()))
    held_items, held_global = build_long_pool(model, long_videos(recipe, LONG_HELD_OUT_SEEDS, recipe.blend_held_out),
                                              rng, temporal=temporal)
    (own, own_temporal), (short, short_temporal) = by_kind(items), by_kind(short_items)
    (held_own, held_temporal), (short_held, short_held_temporal) = by_kind(held_items), by_kind(short_held_items)
    samplers = [OwnVideo(own, recipe.blend_family_weights), GlobalComposer(global_items),
                Composer(short, recipe.blend_family_weights)]
    # Weights: own video, global, other videos[, short own video (v5)][, interval and order, long and short (v5)].
    weights = recipe.blend_weights[index]
    if len(weights) - len(samplers) - 2 * temporal == 1:  # the short videos whole at W >= their length
        samplers.append(OwnVideo(short, recipe.blend_family_weights))
    if temporal:
        samplers += [OwnVideo(pool, recipe.blend_temporal_weights, TEMPORAL_FAMILIES)
                     for pool in (own_temporal, short_temporal)]
    if len(weights) != len(samplers):
        raise ValueError(f"stage {index + 6} has {len(samplers)} samplers but {len(weights)} blend weights")
    held_out = {"own video": OwnVideo(held_own), "global": GlobalComposer(held_global),
                "other videos": Composer(short_held)}
    if recipe.blend_video_tags[index] > 0:
        held_out["short own video, video tags"] = VideoTags(OwnVideo(short_held), 1.0)
    if temporal:
        held_out["interval and order, own video"] = OwnVideo(held_temporal, families=TEMPORAL_FAMILIES)
        held_out["interval and order, short own video, video tags"] = VideoTags(
            OwnVideo(short_held_temporal, families=TEMPORAL_FAMILIES), 1.0)
    return Blend(samplers, weights), held_out


def by_kind(items: list[PoolItem]) -> tuple[list[PoolItem], list[PoolItem]]:
    """A pool's needle, grounding and counting items, and its interval and order items."""
    return [i for i in items if i.family in FAMILIES], [i for i in items if i.family in TEMPORAL_FAMILIES]


def blend_reading(model: TempoModel, held_out: dict, per_width: int) -> dict:
    """Per held-out sampler and width, teacher-forced exact match per family and greedy "when" within tolerance."""
    return {name: copy_accuracy(model, sampler, per_width, widths=READ_WIDTHS) for name, sampler in held_out.items()}


def stage_blend(stage: int, recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                every: int) -> dict:
    """The decoder (grown to the layers the recipe gives this stage) on the blend, in the stage's phases."""
    index = stage - FIRST_STAGE
    model, head, tokenizer, report, rng = resume(stage, recipe, state_path, out_dir, device,
                                                 recipe.blend_layers[index])
    model.requires_grad_(False)
    report["decoder_layers"] = len(model.decoder.lm.model.layers)
    started = time.perf_counter()
    blend, held_out = blend_pools(model, recipe, index, rng)
    report["stages"]["pools"] = {"seconds": round(time.perf_counter() - started, 1),
                                 "own_video_questions": len(blend.samplers[0].pool),
                                 "global_videos": len(blend.samplers[1].pool),
                                 "short_questions": len(blend.samplers[2].pool),
                                 "interval_and_order_questions": sum(len(sampler.pool) for sampler in blend.samplers
                                                                     if isinstance(sampler, OwnVideo) and
                                                                     sampler.families == TEMPORAL_FAMILIES)}
    log.info("pools: %s", report["stages"]["pools"])
    share = recipe.blend_video_tags[index]
    training = VideoTags(blend, share) if share > 0 else blend

    def read(reading_model: TempoModel) -> dict:
        return blend_reading(reading_model, held_out, recipe.blend_eval_inputs)

    report["reading_before"] = read(model)
    log.info("held-out reading before: %s", report["reading_before"])
    model.train()
    model.decoder.requires_grad_(True)
    report["stages"]["blend"] = train_composed(model, training, recipe.blend_widths[index], recipe.blend_steps[index],
                                               4, recipe.blend_lrs[index], recipe.copy_ata_share, rng, every,
                                               read=read)
    log.info("growth curve: %s", report["stages"]["blend"]["growth_curve"])
    finish(model, head, tokenizer, stage, state_path, out_dir)
    return report


def stage_long(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    return stage_blend(6, recipe, state_path, out_dir, device, every)


def stage_wider(recipe: Recipe, state_path: str, out_dir: str, device: torch.device, every: int) -> dict:
    return stage_blend(7, recipe, state_path, out_dir, device, every)


def stage_interval_and_order(recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                             every: int) -> dict:
    return stage_blend(8, recipe, state_path, out_dir, device, every)


def stage_more_interval_and_order(recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                                  every: int) -> dict:
    return stage_blend(9, recipe, state_path, out_dir, device, every)


def stage_small_widths_first(recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                             every: int) -> dict:
    return stage_blend(10, recipe, state_path, out_dir, device, every)


def stage_long_inputs_again(recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                            every: int) -> dict:
    return stage_blend(11, recipe, state_path, out_dir, device, every)


V4_STAGES = {6: stage_long, 7: stage_wider, 8: stage_interval_and_order, 9: stage_more_interval_and_order,
             10: stage_small_widths_first, 11: stage_long_inputs_again}
