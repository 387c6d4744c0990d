"""Composed inputs: the decoder learns to find the evidence among W segments, and to read or copy from it.

A long video's decoder input is up to 128 segments, one of which holds the answer. Trained on real videos alone,
the tiny decoder learns per video where the evidence is instead of how to find it. So memories are computed once
(the compressor frozen) for every segment of many short videos under their questions, and inputs of W segments
are composed from them: the question's own segments (a run of them around the evidence, or all of them) between
irrelevant segments of other videos, with fresh evenly spaced time tags each time, so a "when" answer can only
be copied, never remembered. W grows 1 -> 4 -> 16 -> 64 -> 128; allocation is mostly ATA on the compressor's own
relevance, as at inference, so the evidence keeps more memory tokens than its neighbours. Stage 4 runs the
curriculum again with W doubling and "when" questions weighted up (the copy of a time tag forms only that way),
then mixes in real pairs on long videos: global questions, and inputs that are not composed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from ..allocation import adaptive_token_allocation
from ..config import GenerationConfig
from ..model import TempoModel
from ..synthetic import TEMPORAL_FAMILIES, Question, SyntheticVideo, is_correct, named_seconds, temporal_questions
from . import data
from .loop import Progress, ProgressFile, Schedule
from .paper import K_MIN, answer_loss, compress_video, training_allocation

FAMILIES = ("needle", "grounding", "counting")
EVAL_WIDTHS = (1, 4, 16, 64, 128)


@dataclass(frozen=True)
class PoolItem:
    """One question about one video: every segment's memories [N, k_max, d_s] (float16) and relevance under it."""

    video: int
    family: str
    question: str
    answer: str
    memories: torch.Tensor
    relevance: list[float]
    labels: list[bool]  # which segments show the evidence
    best: int  # the segment showing most of it: a "when" answer names its time tag


@dataclass(frozen=True)
class Composed:
    family: str
    memories: torch.Tensor  # [W, k_max, d_s]
    relevance: list[float]
    tag_times: list[float]
    segment_seconds: float  # the tags' spacing: a "when" answer is graded within half of it (+1 s)
    question: str
    answer: str
    evidence: int = 0  # the part a "when" answer names the tag of
    span: tuple[int, int] | None = None  # the first and last parts showing an interval question's event


def build_pool(model: TempoModel, videos: list[SyntheticVideo], rng: np.random.Generator, first: int = 0,
               families: tuple[str, ...] = FAMILIES, max_frames: int = 1024) -> list[PoolItem]:
    """Every question of these families about every video (at most `max_frames` sampled), compressed once (vision
    features are dropped per video); video numbers start at `first`. Interval and order questions come from the
    video's own stream, so asking for them changes no other item."""
    pool = []
    temporal = bool(set(families) & set(TEMPORAL_FAMILIES))
    for number, video in enumerate(videos, first):
        encoded, = data.encode_videos(model.compressor, [video], max_frames, model.geometry, rng)
        plan = encoded.plan
        for question in encoded.questions + (temporal_questions(video) if temporal else []):
            if question.family not in families:
                continue
            with torch.inference_mode():
                memories, relevance = compress_video(model, encoded, question.text)
            times = [plan.segment_frame_times(i) for i in range(len(plan.segments))]
            shown = [sum(start <= t < end for t in frames for start, end in question.evidence) for frames in times]
            pool.append(PoolItem(number, question.family, question.text, question.answer, memories.half().cpu(),
                                 relevance, [data.relevant(question, frames) for frames in times],
                                 int(np.argmax(shown))))
    return pool


class Composer:
    """Draws composed inputs of a given width from a pool; `families` uniformly, or in proportion to `weights`
    (one per family)."""

    def __init__(self, pool: list[PoolItem], weights: tuple[float, ...] | None = None,
                 families: tuple[str, ...] = FAMILIES):
        self.pool = pool
        self.quiet = [(p, i) for p, item in enumerate(pool) for i, label in enumerate(item.labels) if not label]
        self.quiet_videos = {pool[p].video for p, _ in self.quiet}
        self.families = families
        self.by_family = {family: [p for p, item in enumerate(pool) if item.family == family] for family in families}
        self.weights = weights

    def draw_family(self, rng: np.random.Generator) -> str:
        families = [f for f in self.families if self.by_family[f]]
        if self.weights is None:
            return families[int(rng.integers(len(families)))]
        weights = np.array([w for f, w in zip(self.families, self.weights) if self.by_family[f]])
        return families[int(rng.choice(len(families), p=weights / weights.sum()))]

    def sample(self, width: int, rng: np.random.Generator) -> Composed:
        while True:
            family = self.draw_family(rng)
            item = self.pool[self.by_family[family][int(rng.integers(len(self.by_family[family])))]]
            if family != "counting" or width >= len(item.labels):  # a run of its segments could cut an occurrence off
                return self.compose(item, width, rng)

    def compose(self, item: PoolItem, width: int, rng: np.random.Generator) -> Composed:
        n = len(item.labels)
        if width <= n:
            start = int(rng.integers(max(0, item.best - width + 1), min(item.best, n - width) + 1))
            own, before, after = list(range(start, start + width)), 0, 0
        else:
            own = list(range(n))
            before = int(rng.integers(0, width - n + 1))
            after = width - n - before
        extra = before + after
        if extra and self.quiet_videos <= {item.video}:
            raise ValueError(f"An input of {width} segments needs {extra} quiet segments of other videos, and this "
                             f"pool has none besides video {item.video}'s: pool more videos.")
        drawn: np.ndarray | list[int] = rng.choice(len(self.quiet), size=extra,
                                                   replace=extra > len(self.quiet)) if extra else []
        quiet = [self.quiet[int(j)] for j in drawn if self.pool[self.quiet[int(j)][0]].video != item.video]
        while len(quiet) < before + after:  # rare: a draw from the item's own video was dropped
            p, i = self.quiet[int(rng.integers(len(self.quiet)))]
            if self.pool[p].video != item.video:
                quiet.append((p, i))
        parts = [(self.pool[p], i) for p, i in quiet[:before]] + [(item, i) for i in own] + \
                [(self.pool[p], i) for p, i in quiet[before:]]
        return tagged(item, parts, before + own.index(item.best), rng)


def tagged(item: PoolItem, parts: list[tuple[PoolItem, int]], evidence: int, rng: np.random.Generator,
           answer: str | None = None) -> Composed:
    """`item`'s question on the input made of these (item, segment) parts, with fresh evenly spaced time tags; a
    "when" answer names the tag of the part at `evidence`, an interval answer the tags of the first and last
    parts showing its event (`tag_answer`), any other is `answer` or the item's."""
    memories = torch.stack([source.memories[i] for source, i in parts])  # [W, k_max, d_s]
    relevance = [source.relevance[i] for source, i in parts]
    step = float(rng.uniform(2.0, 28.0))  # seconds per segment: 2 fps up to hour-long videos
    first = step * int(rng.integers(0, 64))
    tags = [round(first + j * step, 1) for j in range(len(parts))]
    answer = item.answer if answer is None else answer
    span = None
    if item.family == "interval":
        shown = [j for j, (source, i) in enumerate(parts) if source is item and item.labels[i]] or [evidence]
        span = (shown[0], shown[-1])
    answer = tag_answer(item.family, answer, tags, step, evidence, span)
    return Composed(item.family, memories, relevance, tags, step, item.question, answer, evidence, span)


def tag_answer(family: str, answer: str, tags: list[float], step: float, evidence: int,
               span: tuple[int, int] | None) -> str:
    """The answer read off the time tags (segment centres, `step` apart): "when" names the evidence's tag; an
    interval runs from the first showing part's tag to the last's, or over the one part's whole span (tag -+ half a
    step) when only one shows it, which is what maximises the temporal IoU a decoder seeing only segments can reach
    (experiments/tiny-v5, stage 8). Other families keep `answer`."""
    if family == "grounding":
        return f"At {tags[evidence]:.1f} seconds."
    if family == "interval" and span is not None:
        first, last = span
        if last > first:
            return f"From {tags[first]:.1f} to {tags[last]:.1f} seconds."
        return f"From {tags[first] - step / 2:.1f} to {tags[first] + step / 2:.1f} seconds."
    return answer


class Sampler(Protocol):
    """What draws composed inputs to train or read on: a `Composer`, a `Mixture`, or compose_long's."""

    def sample(self, width: int, rng: np.random.Generator) -> Composed: ...


class Mixture:
    """Whole real videos `share` of the time (global questions too), else composed inputs of the asked width. Real
    videos get fresh tags as well: 360 pairs seen ten times each would otherwise teach their "when" answers."""

    def __init__(self, composer: Composer, real: list[PoolItem], share: float):
        self.composer, self.real, self.share = composer, real, share

    def sample(self, width: int, rng: np.random.Generator) -> Composed:
        if rng.random() < self.share:
            item = self.real[int(rng.integers(len(self.real)))]
            return self.composer.compose(item, len(item.labels), rng)
        return self.composer.sample(width, rng)


def width_schedule(widths: tuple[int, ...], steps: tuple[int, ...], rng: np.random.Generator,
                   start: int = 0) -> Iterator[int]:
    """Per step from `start`, the width to train on: mostly the phase's own, sometimes an earlier one (so no skill
    fades). Steps before `start` draw nothing: a loop going on from a save has `rng` as it stood there."""
    phases = [phase for phase, (_, count) in enumerate(zip(widths, steps)) for _ in range(count)]
    for phase in phases[start:]:
        yield widths[phase] if phase == 0 or rng.random() < 0.7 else widths[int(rng.integers(phase))]


def train_composed(model: TempoModel, composer: Sampler, widths: tuple[int, ...],
                   steps: tuple[int, ...],
                   batch: int, lr: float, ata_share: float, rng: np.random.Generator, every: int,
                   held_out: Composer | None = None, eval_inputs: int = 40,
                   read: Callable[[TempoModel], dict] | None = None,
                   progress_file: ProgressFile | None = None) -> dict:
    """The decoder (and projector) on composed inputs (`composer`: anything with `sample`); after each phase, the
    growth curve: `read(model)`, or the copy accuracy on `held_out`. With `progress_file`, the loop is saved there
    at every progress line and goes on from a save it finds: the same updates as a run never cut off."""
    k_max = model.spec.num_memory_tokens
    total = sum(steps)
    schedule = Schedule([{"params": list(model.decoder.parameters()), "lr": lr}], total)
    progress = Progress("compose", total, every)
    curve: list[dict] = []
    resumed_at = None
    if progress_file is not None and (saved := progress_file.go_on(schedule, progress, rng)) is not None:
        resumed_at, curve = saved["updates"], list(saved["growth_curve"])
    ends = dict(zip(np.cumsum(steps).tolist(), widths))  # last step of a phase -> its width
    reader = read
    if reader is None and held_out is not None:
        sampler = held_out

        def reader(reading_model: TempoModel) -> dict:
            return copy_accuracy(reading_model, sampler, eval_inputs)

    start = resumed_at or 0
    for step, width in enumerate(width_schedule(widths, steps, rng, start), start):
        loss_sum = 0.0
        for _ in range(batch):
            example = composer.sample(width, rng)
            tokens = training_allocation(example.relevance, k_max, rng, ata_share)
            loss = answer_loss(model, example.memories.to(model.device, model.dtype), tokens, example.tag_times,
                               example.question, example.answer) / batch
            loss.backward()
            loss_sum += loss.item()
        schedule.step()
        progress.update(step, loss_sum)
        if reader is not None and step + 1 in ends:
            curve.append({"after_width": ends[step + 1], "step": step + 1, **reader(model)})
        if progress_file is not None and progress.line_due(step):  # after the reading: the saved curve holds it
            progress_file.save_loop(step + 1, schedule, progress, rng, growth_curve=curve)
    summary = progress.summary() | {"growth_curve": curve}
    if progress_file is None:
        return summary
    # seconds: this run's, plus the earlier runs' up to their last save (the updates they lost after it are not)
    return summary | {"resumed_at": resumed_at, "seconds_in_earlier_runs": round(progress.earlier_seconds, 1)}


def evaluation_allocation(relevance: list[float], k_max: int) -> list[int]:
    """Memory tokens per segment when the growth curve is read: ATA at a quarter of all tokens."""
    return adaptive_token_allocation(relevance, max(len(relevance), len(relevance) * k_max // 4), K_MIN, k_max)


def top_choices(model: TempoModel, example: Composed, tokens: list[int]) -> tuple[list[int], list[int]]:
    """The decoder's top choice at every answer position given the answer's tokens before it, and those tokens."""
    tok = model.tokenizer
    answer_ids = tok.text(example.answer) + [tok.token_id("<|im_end|>")]
    with torch.inference_mode():
        embeds, _ = model.decoder_inputs(example.memories.to(model.device, model.dtype), tokens, "head",
                                         example.question, example.tag_times, answer_ids=answer_ids)
        logits = model.decoder.lm(inputs_embeds=embeds[None], logits_to_keep=len(answer_ids) + 1).logits[0]
    return logits[:len(answer_ids)].argmax(-1).tolist(), answer_ids


def teacher_forced_match(model: TempoModel, example: Composed, tokens: list[int]) -> bool:
    """Whether every answer token is the decoder's top choice given the ones before it."""
    top, answer_ids = top_choices(model, example, tokens)
    return top == answer_ids


def greedy_answer(model: TempoModel, example: Composed, tokens: list[int]) -> str:
    """The decoder's greedy answer to a composed input (at most 16 tokens)."""
    tok = model.tokenizer
    end = tok.token_id("<|im_end|>")
    with torch.inference_mode():
        embeds, _ = model.decoder_inputs(example.memories.to(model.device, model.dtype), tokens, "head",
                                         example.question, example.tag_times)
        answer = [t for t in model.decoder.generate(embeds, GenerationConfig(max_new_tokens=16), {end}) if t != end]
    return tok.decode(answer)


def when_within_tolerance(model: TempoModel, example: Composed, tokens: list[int], answer: str | None = None) -> bool:
    """Whether the greedy answer (or `answer`) to a "when" question names a time the grader accepts: within half a
    segment (+1 s) of the evidence segment's tag."""
    tag = float(example.answer.split()[1])
    answer = greedy_answer(model, example, tokens) if answer is None else answer
    return is_correct(Question("grounding", example.question, example.answer, ((tag, tag),)), answer,
                      example.segment_seconds)


def interval_within_iou(model: TempoModel, example: Composed, tokens: list[int], answer: str | None = None) -> bool:
    """Whether the greedy answer (or `answer`) to an interval question overlaps the tagged answer's interval as the
    grader requires (temporal IoU >= 0.5)."""
    start, end = named_seconds(example.answer)
    answer = greedy_answer(model, example, tokens) if answer is None else answer
    return is_correct(Question("interval", example.question, example.answer, ((start, end),)), answer,
                      example.segment_seconds)


def names_off_tags(example: Composed, answer: str) -> bool:
    """Whether a timed answer names a time no tag of its input allows: before the first tag or after the last by
    more than a step, what "outside the video" is for a composed input (a digit written twice lands there)."""
    low, high = example.tag_times[0] - example.segment_seconds, example.tag_times[-1] + example.segment_seconds
    return any(not low <= seconds <= high for seconds in named_seconds(answer))


def copy_accuracy(model: TempoModel, composer: Sampler, per_width: int = 40, seed: int = 0,
                  widths: tuple[int, ...] = EVAL_WIDTHS) -> dict:
    """Held-out teacher-forced exact match per width and family, allocated by ATA at a quarter of all tokens;
    `when_within` and `interval_within` grade the greedy "when" and interval answers as the grader does, and
    `off_tags` counts those naming a time the input's tags do not allow (`names_off_tags`).
    `composer`: anything with `sample`."""
    rng = np.random.default_rng(seed)
    k_max = model.spec.num_memory_tokens
    readings: dict = {}
    for width in widths:
        hits: dict[str, list[bool]] = {}
        graded: dict[str, list[bool]] = {"when_within": [], "interval_within": [], "off_tags": []}
        for _ in range(per_width):
            example = composer.sample(width, rng)
            tokens = evaluation_allocation(example.relevance, k_max)
            hits.setdefault(example.family, []).append(teacher_forced_match(model, example, tokens))
            if example.family in ("grounding", "interval"):
                answer = greedy_answer(model, example, tokens)
                within = when_within_tolerance if example.family == "grounding" else interval_within_iou
                graded["when_within" if example.family == "grounding" else "interval_within"].append(
                    within(model, example, tokens, answer))
                graded["off_tags"].append(names_off_tags(example, answer))
        readings[str(width)] = {family: round(float(np.mean(h)), 3) for family, h in sorted(hits.items())}
        readings[str(width)] |= {name: round(float(np.mean(g)), 3) for name, g in graded.items() if g}
    return readings
