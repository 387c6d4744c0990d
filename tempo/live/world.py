"""A synthetic stream that never ends: the synthetic world's videos from consecutive seeds, one after another, drawn
at the frames the watch samples. Its truth is known, so alerts can be graded (benchmarks/live.py): a standing
question names an event's shape and colour, and its evidence is every span that shape is shown."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..synthetic import SyntheticVideo, generate_video

CLIP_S = 600.0  # each seed's video: ten minutes
UNSEEN_SEEDS = (800_000, 900_000)  # never trained on (tempo/train/recipe.py) nor used by the shipped examples


@dataclass(frozen=True)
class Sighting:
    """One time a shape of a colour is shown in the stream (stream seconds)."""

    kind: str
    colour: str
    start: float
    end: float


class LiveWorld:
    """Clip k of the stream is `generate_video(seed + k, clip_s)`, placed at k * clip_s."""

    def __init__(self, seed: int, clip_s: float = CLIP_S, width: int = 512, height: int = 256) -> None:
        self.seed, self.clip_s, self.width, self.height = seed, clip_s, width, height
        self.made: dict[int, SyntheticVideo] = {}  # the clip being drawn, and the one before it

    def clip(self, number: int) -> SyntheticVideo:
        if number not in self.made:
            while len(self.made) >= 2:
                del self.made[min(self.made)]
            self.made[number] = generate_video(self.seed + number, self.clip_s, width=self.width, height=self.height)
        return self.made[number]

    def frames(self, fps: float = 2.0, until: float | None = None) -> Iterator[tuple[float, np.ndarray]]:
        """Frames at `fps` from stream time 0 on, for ever (or up to `until` seconds)."""
        for number in itertools.count():
            t = number / fps
            if until is not None and t >= until:
                return
            clip, at = divmod(t, self.clip_s)
            yield t, self.clip(int(clip)).frame(min(at, self.clip_s))

    def sightings(self, until: float) -> list[Sighting]:
        """Every event shown before `until`, in order."""
        found = []
        for number in range(int(np.ceil(until / self.clip_s))):
            offset = number * self.clip_s
            found += [Sighting(e.kind, e.colour, e.start + offset, e.end + offset)
                      for e in sorted(self.clip(number).events, key=lambda e: e.start) if e.start + offset < until]
        return found

    def question(self) -> tuple[str, Sighting]:
        """A standing question about the stream's first event ("When does the red star appear?") and that event."""
        first = self.sightings(self.clip_s)[0]
        return f"When does the {first.colour} {first.kind} appear?", first
