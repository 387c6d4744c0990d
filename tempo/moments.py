"""Moments: the compressor's relevance read as ranked intervals of the video, with no second compression.

Each moment is a run of neighbouring segments whose relevance stands out against the video's own level; a moment's
score is the relevance of its most relevant segment. Where zoom ran, the window's segments (sampled at the full
rate) refine the moment that holds the window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .allocation import scaled_relevance

MOMENTS = 5  # how many moments a run lists
LEVEL = 0.5  # a segment is part of a moment when its scaled relevance (0 to 1 over the video) reaches this


class Scored(Protocol):
    """What moments are built from: a span of the video and its relevance (None when compression is off)."""

    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def relevance(self) -> float | None: ...


@dataclass(frozen=True)
class Moment:
    """One ranked interval of the video (seconds) and its score (relevance of its peak, 0 to 1)."""

    start: float
    end: float
    score: float

    def to_dict(self) -> dict[str, float]:
        """JSON-ready: the interval to the hundredth of a second, the score to four digits."""
        return {"start": round(self.start, 2), "end": round(self.end, 2), "score": round(self.score, 4)}


def find_moments(segments: Sequence[Scored], window: Sequence[Scored] = (), count: int = MOMENTS,
                 level: float = LEVEL) -> tuple[Moment, ...]:
    """The `count` highest-scoring moments among `segments` (in time order), best first; `window`: zoom's segments,
    which replace the span of the moment that contains them. None when no segment has a relevance."""
    runs = stand_out(segments, level)
    if window:
        closer = stand_out(window, level)
        if closer:
            best = max(closer, key=lambda m: m.score)
            runs = [Moment(best.start, best.end, max(best.score, run.score))
                    if run.start <= best.start and best.end <= run.end else run for run in runs]
    ranked = sorted(runs, key=lambda m: (-m.score, m.start))
    return tuple(ranked[:count])


def stand_out(segments: Sequence[Scored], level: float) -> list[Moment]:
    """Runs of neighbouring segments whose scaled relevance reaches `level`, each scored by its peak's raw
    relevance; none when no segment has a relevance."""
    raw = [s.relevance for s in segments]
    scaled = scaled_relevance(raw)
    runs: list[Moment] = []
    for segment, value, score in zip(segments, scaled, raw):
        if value is None or score is None or value < level:
            continue
        if runs and abs(runs[-1].end - segment.start) < 1e-6:
            last = runs[-1]
            runs[-1] = Moment(last.start, segment.end, max(last.score, score))
        else:
            runs.append(Moment(segment.start, segment.end, score))
    return runs
