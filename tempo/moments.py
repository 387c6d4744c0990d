"""Moments: the compressor's relevance read as ranked intervals of the video, with no second compression.

A segment whose relevance stands out against the video's own level (its log-odds at least LEVEL median absolute
deviations above the median) starts a moment at its peak; the moment spans where the relevance, read linearly
between the segments' middles, stays above EDGE of the way from the median to the peak, so its edges fall inside
segments. Its score is its peak's relevance. Where zoom ran, the window's segments (sampled at the full rate) make
the moments inside the window, and the whole video's make those outside it. The rule was chosen by measurement on
the synthetic world's tuning seeds (`experiments/moments/`). Every ranked moment goes into the JSON; a person is shown
those scoring at least SHOWN_SHARE of the best, each worded once (`shown`), wherever it is shown."""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from .allocation import logit
from .synthetic import named_seconds
from .times import span, time_mentions

MOMENTS = 5  # how many moments a run lists
LEVEL = 2.0  # a segment starts a moment this many median absolute deviations (of log-odds) above the median
EDGE = 0.7  # a moment spans where relevance stays this far of the way from the video's median to its peak
TOUCH = 1e-3  # seconds: segments this close are neighbours
# A moment is shown to a person when it scores at least this share of the best: over 48 synthetic queries and seven
# shipped examples it shows 2.7 moments a run, not 4.3, and keeps 52 of 53 true moments (the one lost scores 0.04 of a
# best of 0.024: nothing was found) (`python -m benchmarks.shown_moments`; docs/demo.md).
SHOWN_SHARE = 0.1

# A question that asks for an interval: "from when to when", "between which times", "when does it start and end".
INTERVAL = re.compile(r"\bfrom when\b|\bbetween (what|which) times?\b|\b(start|begin)s? and (end|stop)s?\b",
                      re.IGNORECASE)


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


@dataclass(frozen=True)
class Shown:
    """One moment as a person is shown it, worded once for every surface: its rank (1 = best), its span, the details
    after it (its length), its score in words and as a share of the best one's (for a bar)."""

    rank: int
    moment: Moment
    when: str
    details: tuple[str, ...]
    value: str
    share: float

    @property
    def words(self) -> str:
        """Its facts in one line: "01:53–01:59 · 6 s · score 1.00"."""
        return " · ".join((self.when, *self.details, f"score {self.value}"))

    @property
    def label(self) -> str:
        """The facts with its rank: "moment 1: 01:53–01:59 · 6 s · score 1.00"."""
        return f"moment {self.rank}: {self.words}"


def shown(moments: Sequence[Moment], share: float = SHOWN_SHARE) -> tuple[Shown, ...]:
    """The moments a person is shown, in their order (best first): those scoring at least `share` of the best, each
    worded."""
    best = max((m.score for m in moments), default=0.0)
    return tuple(Shown(rank, m, span(m.start, m.end), (f"{m.end - m.start:.0f} s",), f"{m.score:.2f}",
                       max(0.0, m.score) / best if best > 0 else 0.0)
                 for rank, m in enumerate((m for m in moments if m.score >= share * best), 1))


def find_moments(segments: Sequence[Scored], window: Sequence[Scored] = (), count: int = MOMENTS,
                 level: float = LEVEL) -> tuple[Moment, ...]:
    """The `count` highest-scoring moments among `segments` (in time order), best first, none overlapping; `window`:
    zoom's segments, whose moments replace the whole video's inside the window. None when no segment has a
    relevance."""
    found = stand_out(segments, level)
    if window:
        low, high = window[0].start, window[-1].end
        found = [m for m in found if m.end <= low or m.start >= high] + stand_out(window, level)
    return tuple(sorted(found, key=lambda m: (-m.score, m.start))[:count])


def stand_out(segments: Sequence[Scored], level: float = LEVEL) -> list[Moment]:
    """Every moment of one pass's segments (in time order), most relevant first; none when no segment has a
    relevance."""
    scored = [s for s in segments if s.relevance is not None]
    if not scored:
        return []
    odds = [logit(s.relevance or 0.0) for s in scored]  # every one scored: `or` only narrows the type
    median = statistics.median(odds)
    threshold = median + level * statistics.median([abs(v - median) for v in odds])
    used = [False] * len(scored)
    found: list[Moment] = []
    for peak in sorted(range(len(scored)), key=lambda i: (-odds[i], i)):
        if used[peak] or odds[peak] <= threshold:  # strictly above: a flat video has no moment
            continue
        low = high = peak  # the run above the threshold that holds the peak: one moment
        while low > 0 and not used[low - 1] and odds[low - 1] > threshold and _touch(scored, low - 1, low):
            low -= 1
        while high + 1 < len(scored) and not used[high + 1] and odds[high + 1] > threshold and \
                _touch(scored, high, high + 1):
            high += 1
        start, end = _edges(scored, odds, used, peak, median + EDGE * (odds[peak] - median))
        for i in range(len(scored)):
            if low <= i <= high or start <= (scored[i].start + scored[i].end) / 2 <= end:
                used[i] = True
        for other in found:  # an edge between segments may reach into a neighbouring moment: stop at it
            if start < other.end <= end:
                start = other.end
            if start <= other.start < end:
                end = other.start
        relevance = scored[peak].relevance
        assert relevance is not None  # scored segments only
        found.append(Moment(start, end, relevance))
    return found


def _edges(segments: Sequence[Scored], odds: list[float], used: list[bool], peak: int,
           edge: float) -> tuple[float, float]:
    """Where the relevance, linear between the segments' middles, falls below `edge` either side of the peak (a
    segment's outer end where its neighbour is missing or taken)."""
    middles = [(s.start + s.end) / 2 for s in segments]
    low = high = peak
    while low > 0 and not used[low - 1] and odds[low - 1] >= edge and _touch(segments, low - 1, low):
        low -= 1
    while high + 1 < len(segments) and not used[high + 1] and odds[high + 1] >= edge and \
            _touch(segments, high, high + 1):
        high += 1
    start, end = segments[low].start, segments[high].end
    if low > 0 and not used[low - 1] and _touch(segments, low - 1, low):
        share = (edge - odds[low - 1]) / (odds[low] - odds[low - 1])
        start = middles[low - 1] + share * (middles[low] - middles[low - 1])
    if high + 1 < len(segments) and not used[high + 1] and _touch(segments, high, high + 1):
        share = (edge - odds[high + 1]) / (odds[high] - odds[high + 1])
        end = middles[high + 1] - share * (middles[high + 1] - middles[high])
    return start, end


def _touch(segments: Sequence[Scored], left: int, right: int) -> bool:
    return abs(segments[right].start - segments[left].end) < TOUCH


def asks_interval(question: str) -> bool:
    """Whether the question asks from when to when something happens."""
    return bool(INTERVAL.search(question))


def answer_interval(answer: str) -> tuple[float, float] | None:
    """The interval an answer names (seconds, earlier first): its first two times as clocks or with a unit
    ("1:58 to 2:04", "118 s to 124 s"), else its first two numbers as the interval family's grader reads them
    ("From 118.0 to 124.0 seconds."); None when it names fewer than two."""
    times = [seconds for _, _, seconds in time_mentions(answer)]
    if len(times) < 2:
        times = named_seconds(answer)
    if len(times) < 2:
        return None
    return min(times[0], times[1]), max(times[0], times[1])
