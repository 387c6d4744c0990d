"""v7's needle inputs with distractors: "What colour is the triangle?" on its own video's segments, keeping beside
the evidence every segment that shows another object in one other colour, where that colour is shown in more
segments than the needle. Answering the colour seen most in the input is then wrong, so a decoder that reads
colour from the whole video rather than from the segments it was pointed at is punished (experiments/tiny-v7)."""

from __future__ import annotations

import itertools
import re

import numpy as np

from ..synthetic import COLOURS, KINDS
from .compose import Composed, PoolItem
from .compose_long import MISSES, OwnVideo, kept_segments

NAMES_ONE = re.compile(r"the ([a-z]+) ([a-z]+) (?:appear|visible)\?$")  # grounding, counting and interval questions
MIN_DISTRACTORS = 2  # segments of the distractor colour an input keeps at least


def named_pair(question: str) -> tuple[str, str] | None:
    """The (kind, colour) a one-object question names ("When does the red square appear?"), or None."""
    match = NAMES_ONE.search(question)
    if match is None or match[1] not in COLOURS or match[2] not in KINDS:
        return None
    return match[2], match[1]


def distractor_segments(item: PoolItem, siblings: list[PoolItem]) -> set[int]:
    """The segments of a needle item's video showing objects of another kind in the colour, other than the
    answer, that the video's other questions show in the most segments; empty unless that is more segments than
    the needle's own and at least MIN_DISTRACTORS."""
    kind = item.question.removeprefix("What colour is the ").removesuffix("?")
    by_colour: dict[str, set[int]] = {}
    for other in siblings:
        pair = named_pair(other.question) if other.video == item.video else None
        if pair is None or pair[0] == kind or pair[1] == item.answer:
            continue
        by_colour.setdefault(pair[1], set()).update(i for i, shown in enumerate(other.labels) if shown)
    if not by_colour:
        return set()
    segments = max(by_colour.values(), key=len)
    return segments if len(segments) >= max(MIN_DISTRACTORS, sum(item.labels) + 1) else set()


class NeedleDistractors(OwnVideo):
    """Own-video needle inputs of W segments holding the evidence, its neighbours and the distractor segments
    (`distractor_segments`), the rest quiet segments of the same video; needle items without distractors are
    never drawn."""

    def __init__(self, pool: list[PoolItem]):
        by_video: dict[int, list[PoolItem]] = {}
        for item in pool:
            by_video.setdefault(item.video, []).append(item)
        self.distractors = {id(item): distractor_segments(item, by_video[item.video]) for item in pool
                            if item.family == "needle"}
        super().__init__([item for item in pool if self.distractors.get(id(item))], families=("needle",))

    def kept(self, item: PoolItem) -> set[int]:
        return kept_segments(item) | self.distractors[id(item)]

    def sample(self, width: int, rng: np.random.Generator) -> Composed:
        if not self.pool:
            raise ValueError("No needle question in this pool has distractors: pool more videos.")
        for attempt in itertools.count():
            item = self.pool[int(rng.integers(len(self.pool)))]
            if len(self.kept(item)) <= width or width >= len(item.labels):
                return self.compose(item, width, rng)
            if attempt == MISSES and all(len(self.kept(other)) > width for other in self.pool):
                raise ValueError(f"No needle question here keeps its distractors within {width} segments.")
        raise AssertionError("unreachable")
