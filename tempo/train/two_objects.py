"""v7's relevance for questions naming two objects ("Which appears first, the red square or the purple diamond?",
"either", "both"): ranking lists whose positives are the segments showing any named object, beside stage 1's
one-object lists, learnt by the compressor's language model and the base head while an anchor keeps the memory
tokens the decoder reads where the stage before left them (experiments/tiny-v7/README.md)."""

from __future__ import annotations

import copy
import functools
import logging
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..model import TempoModel
from ..model.compressor import LocalCompressor
from ..model.prompts import segment_prompt_ids
from ..synthetic import COLOURS, generate_video, temporal_questions
from . import data
from .curriculum import set_relevance_direction, training_videos
from .localise import LIST_SIZE, RankingList, SegmentIndex, draw_into, localisation_accuracy, ranking_loss, top_up
from .loop import Progress, ProgressFile, Schedule
from .paper import compress_video
from .recipe import TUNING_SEEDS, Recipe, RelevanceStage, shared_settings
from .state import cached_pools, finish, pools_key, resume, stage_file, stage_progress_file, stage_rng
from .tiny import BASE_DIRNAME

log = logging.getLogger(__name__)
FORMS = ("Which appears first, the {} or the {}?", "Does the {} or the {} appear?",
         "When do the {} and the {} appear?", "Do both the {} and the {} appear?")
ONE_ABSENT_SHARE = 0.15  # lists naming one object the video never shows: only the other one's segments are positive
Pair = tuple[str, str]  # (kind, colour), as `SegmentIndex.shown` holds them


@dataclass(frozen=True)
class TwoObjectList:
    """A ranking list for a question naming two objects, and which listed segments show each of them."""

    ranking: RankingList  # labels: the segment shows either object
    each: tuple[tuple[bool, ...], ...]  # per named object, per listed segment


def two_object_question(pairs: tuple[Pair, Pair], rng: np.random.Generator) -> str:
    """One of FORMS naming both objects, in the order given."""
    names = [f"{colour} {kind}" for kind, colour in pairs]
    return FORMS[int(rng.integers(len(FORMS)))].format(*names)


def two_object_list(index: SegmentIndex, rng: np.random.Generator) -> TwoObjectList:
    """Two objects of one video (now and then one the video never shows), every segment showing either (at most
    LIST_SIZE // 2), their neighbours and the video's other events, then other videos' look-alikes."""
    videos = [v for v, segments in enumerate(index.shown) if len(set().union(*segments)) >= 2]
    if not videos:
        raise ValueError("No video here shows two different objects: pool longer videos.")
    v = videos[int(rng.integers(len(videos)))]
    present = sorted(set().union(*index.shown[v]))
    first, second = (present[int(j)] for j in rng.choice(len(present), size=2, replace=False))
    if rng.random() < ONE_ABSENT_SHARE:
        second = (second[0], str(rng.choice([c for c in COLOURS if (second[0], c) not in present])))
    pairs = (first, second) if rng.random() < 0.5 else (second, first)
    chosen: list[tuple[int, int]] = []

    add = functools.partial(draw_into, chosen, rng=rng)  # add(candidates, count)

    shown = index.shown[v]
    for pair in pairs:
        add([(v, j) for j in range(len(shown)) if pair in shown[j]], LIST_SIZE // 4)
    for i in [j for _, j in chosen]:
        add([(v, j) for j in (i - 1, i + 1) if 0 <= j < len(shown)], 1)  # the neighbours look alike
    add([(v, j) for j in range(len(shown)) if shown[j]], 3)  # the video's other events
    for kind, colour in pairs:
        add([c for c in index.by_kind[kind] if c[0] != v], 1)
        add([c for c in index.by_colour[colour] if c[0] != v], 1)
    add([(v, j) for j in range(len(shown))], LIST_SIZE - len(chosen))
    top_up(chosen, index.with_event, rng)
    each = tuple(tuple(pair in index.shown[a][b] for a, b in chosen) for pair in pairs)
    labels = [any(shows) for shows in zip(*each)]
    return TwoObjectList(RankingList(two_object_question(pairs, rng), chosen, labels), each)


def two_object_loss(logits: torch.Tensor, each: tuple[tuple[bool, ...], ...]) -> torch.Tensor:
    """Every named object shown must outrank the segments showing neither (a listwise term per object, so one
    object cannot take all the mass), plus Yes/No cross-entropy on "shows either"."""
    shows = torch.tensor(each, device=logits.device)  # [objects, n]
    either = shows.any(0)
    loss = F.binary_cross_entropy_with_logits(logits, either.float())
    for object_shown in shows:
        if object_shown.any():
            contenders = object_shown | ~either
            loss = loss + torch.logsumexp(logits[contenders], 0) - torch.logsumexp(logits[object_shown], 0)
    return loss


def frozen_compressor(model: TempoModel) -> LocalCompressor:
    """A frozen copy of the compressor as it is now: what the memory anchor holds the memory tokens to."""
    return copy.deepcopy(model.compressor).requires_grad_(False).eval()


def anchored_pass(model: TempoModel, frozen: LocalCompressor, direction: torch.Tensor, question: str,
                  segments: list[tuple[data.EncodedVideo, int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Relevance logits [n] of these segments (differentiable) and the memory anchor: the mean squared distance of
    their memory tokens from the frozen compressor's, relative to the frozen ones' mean square."""
    tok = model.compressor_tokenizer
    vision = [video.segment_vision(i, model.device, model.dtype) for video, i in segments]
    prompts = [segment_prompt_ids(tok, question, video.plan, i, features.grid, model.geometry)
               for (video, i), features in zip(segments, vision)]
    k = model.compressor.num_memory_tokens
    hidden, lengths = model.compressor.hidden_states(prompts, vision, model.compressor.compression_tokens[0])
    with torch.no_grad():
        target, _ = frozen.hidden_states(prompts, vision, frozen.compression_tokens[0])
    memories = torch.stack([hidden[b, n:n + k] for b, n in enumerate(lengths)]).float()
    anchor_to = torch.stack([target[b, n:n + k] for b, n in enumerate(lengths)]).float()
    last = torch.stack([hidden[b, n - 1] for b, n in enumerate(lengths)]).float()
    anchor = (memories - anchor_to).pow(2).mean() / anchor_to.pow(2).mean().clamp_min(1e-8)
    return last @ direction.float(), anchor


def train_two_objects(model: TempoModel, head: nn.Linear, frozen: LocalCompressor, videos: list[data.EncodedVideo],
                      steps: int, lists: int, lr: float, two_object_share: float, anchor_weight: float,
                      rng: np.random.Generator, every: int, progress_file: ProgressFile) -> dict:
    """The compressor's language model and the base head on one- and two-object lists, each list's memory tokens
    anchored to `frozen` (the compressor as it was; its memory tokens' own parameters and the vision tower stay
    frozen). At every progress line the loop's state goes to `progress_file`, and a run finding one goes on from
    it: the same updates as a run never cut off. Everything is frozen again, in eval mode, when it returns."""
    model.requires_grad_(False)
    model.train()
    model.compressor.vlm.language_model.requires_grad_(True)
    head.requires_grad_(True)
    index = SegmentIndex(videos)
    tok = model.compressor_tokenizer
    yes, no = tok.token_id("Yes"), tok.token_id("No")
    params = list(model.compressor.vlm.language_model.parameters()) + list(head.parameters())
    schedule = Schedule([{"params": params, "lr": lr}], steps)
    progress = Progress("two objects", steps, every)
    anchors: list[float] = []
    resumed_at = None
    if (saved := progress_file.go_on(schedule, progress, rng)) is not None:
        resumed_at, anchors = saved["updates"], list(saved["anchors"])
    for step in range(resumed_at or 0, steps):
        total = 0.0
        for _ in range(lists):
            direction = head.weight[yes] - head.weight[no]
            if rng.random() < two_object_share:
                drawn = two_object_list(index, rng)
                segments = [(index.videos[v], i) for v, i in drawn.ranking.segments]
                logits, anchor = anchored_pass(model, frozen, direction, drawn.ranking.question, segments)
                loss = two_object_loss(logits, drawn.each)
            else:
                ranking = index.sample(rng)
                segments = [(index.videos[v], i) for v, i in ranking.segments]
                logits, anchor = anchored_pass(model, frozen, direction, ranking.question, segments)
                loss = ranking_loss(logits, torch.tensor(ranking.labels, device=logits.device))
            loss = (loss + anchor_weight * anchor) / lists
            loss.backward()
            total += loss.item()
            anchors.append(anchor.item())
        schedule.step()
        progress.update(step, total)
        if progress.line_due(step):  # every 50 updates by default; a save (5 MB) takes 0.01 s, an update 3 s
            progress_file.save_loop(step + 1, schedule, progress, rng, anchors=anchors)
    model.requires_grad_(False)
    head.requires_grad_(False)
    model.eval()
    # seconds: this run's, plus the earlier runs' up to their last save (the updates they lost after it are not)
    return progress.summary() | {"anchors": [round(a, 5) for a in anchors[::max(1, len(anchors) // 100)]],
                                 "anchor_last_100": float(np.mean(anchors[-100:])), "resumed_at": resumed_at,
                                 "seconds_in_earlier_runs": round(progress.earlier_seconds, 1)}


def two_object_localisation(model: TempoModel, videos: list[data.EncodedVideo]) -> dict:
    """On each video's order question: how often the most relevant segment shows a named object, how often each
    named object has a segment with relevance over 0.5, and the mean over questions of the lower of the two
    objects' highest relevance."""
    top, both, lower = [], [], []
    for video in videos:
        order = [q for q in temporal_questions(video.video) if q.family == "order"]
        if not order:
            continue
        with torch.inference_mode():
            _, relevance = compress_video(model, video, order[0].text)
        shown = [{(e.kind, e.colour) for e in data.visible_events(video.video, video.plan.segment_frame_times(i))}
                 for i in range(len(video.plan.segments))]
        pairs = named_in_order(order[0].text)
        top.append(bool(shown[int(np.argmax(relevance))] & set(pairs)))
        best = [max((r for r, s in zip(relevance, shown) if pair in s), default=0.0) for pair in pairs]
        both.append(min(best) > 0.5)
        lower.append(min(best))
    return {"questions": len(top), "top_shows_one": float(np.mean(top)) if top else None,
            "both_over_half": float(np.mean(both)) if both else None,
            "mean_lower_best": float(np.mean(lower)) if lower else None}


def named_in_order(text: str) -> tuple[Pair, Pair]:
    """The two (kind, colour) pairs an order question names."""
    head, tail = text.removesuffix("?").split(", the ", 1)[1].split(" or the ")
    (c1, k1), (c2, k2) = head.split(), tail.split()
    return (k1, c1), (k2, c2)


def memory_drift(model: TempoModel, frozen: LocalCompressor, videos: list[data.EncodedVideo]) -> float:
    """The anchor's measure over every segment of these videos under their first question: how far the memory
    tokens moved from the frozen compressor's."""
    drifts = []
    for video in videos:
        question = video.questions[0].text
        segments = [(video, i) for i in range(len(video.plan.segments))]
        with torch.inference_mode():
            for start in range(0, len(segments), 16):
                direction = model.compressor.relevance_direction
                drifts.append(anchored_pass(model, frozen, direction, question, segments[start:start + 16])[1].item())
    return float(np.mean(drifts))


def train_relevance_stage(stage: RelevanceStage, recipe: Recipe, state_path: str, out_dir: str, device: torch.device,
                          every: int) -> dict:
    """Stage 1's and stage 2's videos as ranking lists, one- and two-object; read before and after: one-object
    localisation and two-object localisation on the tuning videos, and how far the memory tokens moved. Beside the
    state file: the encoded videos with the readings before (or, with `videos_of`, that stage's), and the loop's
    progress until the stage ends, so a run cut off and run again goes on where it was."""
    model, head, tokenizer, report, rng = resume(stage.number, recipe, state_path, out_dir, device,
                                                 follows=stage.follows)
    frozen = frozen_compressor(model)
    progress_file = stage_progress_file(stage, recipe, state_path, model, head)
    if stage.videos_of is None:
        cached = cached_pools(stage_file(state_path, stage.number, "pools"), pools_key(recipe, stage, model),
                              lambda: relevance_pools(model, frozen, recipe, rng), rng)
        pools, read, before = cached.pools, cached.read, cached.pools["before"]
    else:
        pools, read = earlier_videos(stage.videos_of, recipe, state_path, model)
        before = relevance_readings(model, frozen, pools["tuning"])
    encoded, tuning = pools["encoded"], pools["tuning"]
    report["parts"]["encode"] = {"seconds": pools["encode_seconds"], "read_from_file": read,
                                 "videos_of": stage.videos_of or stage.number}
    report["before"] = before
    report["parts"]["two objects"] = train_two_objects(model, head, frozen, encoded, stage.steps, stage.lists,
                                                       stage.lr, stage.two_object_share, stage.anchor, rng, every,
                                                       progress_file)
    set_relevance_direction(model, head, out_dir, os.path.join(out_dir, BASE_DIRNAME))  # the head's new w_yes - w_no
    report["after"] = relevance_readings(model, frozen, tuning)
    finish(model, head, tokenizer, stage.number, state_path, out_dir)
    progress_file.remove()
    return report


def relevance_videos(model: TempoModel, recipe: Recipe, rng: np.random.Generator) -> dict:
    """The relevance stages' training and tuning videos encoded, and the seconds that took."""
    started = time.perf_counter()
    videos = training_videos(recipe)
    encoded = data.encode_videos(model.compressor, videos["short"] + videos["medium"] + videos["long"],
                                 recipe.max_frames, model.geometry, rng)
    tuning = data.encode_videos(model.compressor, [
        generate_video(TUNING_SEEDS + i, min_duration=60, max_duration=recipe.tuning_max_duration)
        for i in range(recipe.tuning_videos)], recipe.max_frames, model.geometry, rng)
    return {"encoded": encoded, "tuning": tuning, "encode_seconds": round(time.perf_counter() - started, 1)}


def relevance_pools(model: TempoModel, frozen: LocalCompressor, recipe: Recipe, rng: np.random.Generator) -> dict:
    """The encoded videos and the readings before training: the stage's first 40 CPU-minutes at full scale, done
    once (`state.cached_pools`)."""
    pools = relevance_videos(model, recipe, rng)
    return pools | {"before": relevance_readings(model, frozen, pools["tuning"])}


def earlier_videos(number: int, recipe: Recipe, state_path: str, model: TempoModel) -> tuple[dict, bool]:
    """Relevance stage `number`'s encoded videos, and whether they were read from its pools file: when that file
    is gone or another recipe's, they are encoded again from the random stream that stage began with (the same
    videos and questions, the vision tower being frozen)."""
    path = stage_file(state_path, number, "pools")
    if os.path.isfile(path):
        saved = torch.load(path, weights_only=False)
        if saved["key"]["recipe"] == shared_settings(recipe) and saved["key"]["stage"] == number:
            log.info("stage %d's encoded videos read from %s", number, path)
            return saved["pools"], True
        log.info("%s holds another recipe's videos; encoding stage %d's again", path, number)
    return relevance_videos(model, recipe, stage_rng(recipe, number)), False


def relevance_readings(model: TempoModel, frozen: LocalCompressor, tuning: list[data.EncodedVideo]) -> dict:
    """One-object localisation, two-object localisation (on the videos' order questions) and how far the memory
    tokens are from `frozen`'s (on the first four videos)."""
    readings = {"localisation": localisation_accuracy(model, tuning),
                "two_object_localisation": two_object_localisation(model, tuning),
                "memory_drift": memory_drift(model, frozen, tuning[:4])}
    log.info("relevance readings: %s", readings)
    return readings
