"""Composed inputs over long videos, for the blend stages (why: experiments/tiny-v4 and tiny-v5).

- Own-video inputs: the question's evidence among quiet segments of its own video, where the look-alikes are
  (the same scene, the same moving shapes).
- Global inputs: "Which shape appears most?" on runs of consecutive segments from one to three videos, answered
  with the kind those segments show most.

Both get fresh evenly spaced time tags every time (`compose.tagged`); `VideoTags` re-tags a share of any
sampler's inputs as a whole video's own would be.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from ..model import TempoModel
from ..synthetic import KINDS, TEMPORAL_FAMILIES, SyntheticVideo
from . import data
from .compose import FAMILIES, Composed, Composer, PoolItem, Sampler, build_pool, tag_answer, tagged

MISSES = 1_000  # draws that fit no input before an own-video sampler checks that any question can
NEIGHBOURS = 2  # segments either side of the evidence an own-video input always keeps: its look-alikes
GLOBAL_MARGIN = 1.5  # a global input's answer shows this many times as often as the next kind, or it is redrawn
GLOBAL_VIDEOS = (1, 3)  # videos a global input is made of, at least and at most
FULL_RATE_STEP = 4.0  # seconds between a segment's tags when a video is sampled at the full 2 fps
WIDEST_STEP = 3600.0 / 128  # ... and in an hour-long video at 1,024 frames


@dataclass(frozen=True)
class GlobalItem:
    """A video compressed under the global question, and how many shapes of each kind each segment shows."""

    item: PoolItem
    counts: np.ndarray  # [N, len(KINDS)]: shapes (moving and big) summed over each segment's sampled frames


def kind_counts(video: SyntheticVideo, max_frames: int = 1024) -> np.ndarray:
    """Shapes of each kind drawn in each segment's sampled frames [N, len(KINDS)], as the pool samples them."""
    plan = data.plan_video(video, max_frames)
    counts = np.zeros((len(plan.segments), len(KINDS)), dtype=np.int64)
    for index in range(len(plan.segments)):
        for t in plan.segment_frame_times(index):
            for drawn in video.sprites(t):
                counts[index, KINDS.index(drawn.kind)] += 1
    return counts


def build_long_pool(model: TempoModel, videos: list[SyntheticVideo], rng: np.random.Generator, first: int = 0,
                    temporal: bool = False) -> tuple[list[PoolItem], list[GlobalItem]]:
    """Every question about every video compressed once (one vision pass per video): the needle, grounding and
    counting items own-video inputs are made of (with `temporal`, interval and order items too), and the global
    items with their kind counts."""
    items: list[PoolItem] = []
    global_items: list[GlobalItem] = []
    families = (*FAMILIES, "global", *(TEMPORAL_FAMILIES if temporal else ()))
    for number, video in enumerate(videos, first):
        for item in build_pool(model, [video], rng, number, families=families):
            if item.family == "global":
                global_items.append(GlobalItem(item, kind_counts(video)))
            else:
                items.append(item)
    return items, global_items


def kept_segments(item: PoolItem) -> set[int]:
    """What an own-video input always keeps: the evidence's segment and its neighbours; for counting, every
    segment showing an occurrence and one quiet segment either side of each run, so occurrences stay apart; for
    interval and order, every segment showing the event (both events) and its neighbours, so the answer holds."""
    n = len(item.labels)
    kept = set(range(max(0, item.best - NEIGHBOURS), min(n, item.best + NEIGHBOURS + 1)))
    shown = [i for i, label in enumerate(item.labels) if label]
    if item.family == "counting":
        kept |= {j for i in shown for j in (i - 1, i, i + 1) if 0 <= j < n}
    if item.family in TEMPORAL_FAMILIES:
        kept |= {j for i in shown for j in range(i - NEIGHBOURS, i + NEIGHBOURS + 1) if 0 <= j < n}
    return kept


def fits(item: PoolItem, width: int) -> bool:
    """Whether an own-video input of `width` segments holds what `item` must keep (counting: every occurrence)."""
    return len(kept_segments(item)) <= width or width >= len(item.labels)


class OwnVideo(Composer):
    """Own-video inputs of W segments: `kept_segments` and quiet segments of the same video drawn at random, in the
    video's order; at W >= the video's length, the whole video. Families as `Composer` draws them."""

    def sample(self, width: int, rng: np.random.Generator) -> Composed:
        for attempt in itertools.count():
            family = self.draw_family(rng)
            item = self.pool[self.by_family[family][int(rng.integers(len(self.by_family[family])))]]
            if fits(item, width):
                return self.compose(item, width, rng)
            if attempt == MISSES and not any(fits(other, width) for other in self.pool
                                             if other.family in self.families):
                raise ValueError(f"No question in this pool keeps its evidence within {width} segments "
                                 f"(`kept_segments`): start its stage at a wider input or pool shorter videos.")
        raise AssertionError("unreachable")

    def kept(self, item: PoolItem) -> set[int]:
        """The segments an input of `item` always keeps (its evidence: `kept_segments`)."""
        return kept_segments(item)

    def compose(self, item: PoolItem, width: int, rng: np.random.Generator) -> Composed:
        n = len(item.labels)
        kept = self.kept(item)
        if width >= n:
            segments = list(range(n))
        else:
            rest = [i for i in range(n) if i not in kept]
            drawn = rng.choice(len(rest), size=width - len(kept), replace=False)
            segments = sorted(kept | {rest[int(j)] for j in drawn})
        return tagged(item, [(item, i) for i in segments], segments.index(item.best), rng)


def runs(width: int, videos: int, rng: np.random.Generator) -> list[int]:
    """`width` split at random into `videos` runs of at least one segment each."""
    cuts: np.ndarray | list[int] = np.sort(rng.choice(np.arange(1, width), size=videos - 1,
                                                      replace=False)) if videos > 1 else []
    return np.diff([0, *cuts, width]).tolist()


def global_answer(counts: np.ndarray) -> str | None:
    """The kind shown most in these kind counts [len(KINDS)], or None when it does not lead the next clearly."""
    second, top = np.sort(counts)[-2:]
    return KINDS[int(np.argmax(counts))] if top >= GLOBAL_MARGIN * second and top > 0 else None


class GlobalComposer:
    """Global inputs of up to W segments: one run of consecutive segments from each of one to three videos (a run
    longer than its video is the whole video), answered with the kind those segments show most."""

    def __init__(self, pool: list[GlobalItem]):
        self.pool = pool

    def sample(self, width: int, rng: np.random.Generator) -> Composed:
        while True:
            videos = min(int(rng.integers(GLOBAL_VIDEOS[0], GLOBAL_VIDEOS[1] + 1)), len(self.pool), width)
            chosen = [self.pool[int(p)] for p in rng.choice(len(self.pool), size=videos, replace=False)]
            parts: list[tuple[PoolItem, int]] = []
            counts = np.zeros(len(KINDS), dtype=np.int64)
            for source, length in zip(chosen, runs(width, videos, rng)):
                n = len(source.item.labels)
                start = int(rng.integers(0, max(0, n - length) + 1))
                segments = range(start, min(n, start + length))
                parts += [(source.item, i) for i in segments]
                counts += source.counts[list(segments)].sum(0)
            answer = global_answer(counts)
            if answer is not None:
                return tagged(chosen[0].item, parts, 0, rng, answer)


class Blend:
    """Draws from several samplers (anything with `sample`) in proportion to `weights`."""

    def __init__(self, samplers: list, weights: tuple[float, ...]):
        self.samplers = samplers
        self.weights = np.array(weights, dtype=float) / sum(weights)

    def sample(self, width: int, rng: np.random.Generator) -> Composed:
        return self.samplers[int(rng.choice(len(self.samplers), p=self.weights))].sample(width, rng)


def video_tags(count: int, rng: np.random.Generator) -> tuple[list[float], float]:
    """Tags as a whole video's own would be, and their spacing: segment centres from 0 s, 4 s apart below 128
    segments (2 fps), else a 512-3600 s video's spacing (log-uniform)."""
    if count < 128:
        step = FULL_RATE_STEP
    else:
        step = float(math.exp(rng.uniform(math.log(FULL_RATE_STEP), math.log(WIDEST_STEP))))
    return [round(step * (j + 0.5), 1) for j in range(count)], step


class VideoTags:
    """`share` of `sampler`'s inputs tagged as a whole video's would be (`video_tags`), the rest as drawn (composed
    inputs start their tags up to 63 steps in, while a short video's start at half a step)."""

    def __init__(self, sampler: Sampler, share: float):
        self.sampler, self.share = sampler, share

    def sample(self, width: int, rng: np.random.Generator) -> Composed:
        example = self.sampler.sample(width, rng)
        if rng.random() >= self.share:
            return example
        tags, step = self.retag(len(example.tag_times), rng)
        answer = tag_answer(example.family, example.answer, tags, step, example.evidence, example.span)
        return replace(example, tag_times=tags, segment_seconds=step, answer=answer)

    def retag(self, count: int, rng: np.random.Generator) -> tuple[list[float], float]:
        """`count` new tags and their step (`video_tags`)."""
        return video_tags(count, rng)
