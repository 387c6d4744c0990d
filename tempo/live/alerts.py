"""When a segment raises an alert: its relevance rises clearly above the stream's recent level.

The compressor's relevance is a probability, and a quiet stream sits near one level for a long time (Tempo-Tiny:
0.0002 for a shape that is absent, 0.02 for one that looks alike), so the rise is read in log-odds: the segment's
logit minus the median logit of the recent segments. A median ignores the few spikes it holds, and the log-odds
make the rule the same at any level. The relevance must also be above a floor, so that a blip from 0.0002 to 0.02
(a hundredfold rise, but still "no") is not an alert. One moment raises one alert: segments that stay high after it
belong to it until the relevance falls back under half the rise. The defaults were chosen by measurement on
synthetic streams from unseen seeds (`python -m benchmarks.live alerts`, docs/live.md): on the tuning seeds a rise
of 4 with a floor of 0.1 alerted 36 of 38 showings with 0.7 false alerts per 10 minutes; a rise of 2 or 3 alerted
no more and falsely more often, a rise of 5 missed 4 more."""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass

from ..allocation import logit


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


@dataclass(frozen=True)
class AlertRule:
    """An alert when a segment's log-odds stand `rise` above the median of the `recent` segments before it and its
    relevance is at least `floor`. Before `warmup` segments are known, the level is `prior` (a relevance)."""

    rise: float = 4.0
    floor: float = 0.1
    recent: int = 30  # two minutes of segments
    warmup: int = 3
    prior: float = 0.01

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rise) and self.rise > 0):
            raise ValueError(f"the alert rise must be a positive number, got {self.rise!r}")
        if not 0 <= self.floor < 1:
            raise ValueError(f"the alert floor must be in [0, 1), got {self.floor!r}")
        if self.recent < 1 or self.warmup < 1:
            raise ValueError("the alert rule needs at least one recent segment")


class Alerting:
    """The rule applied to a stream, segment by segment (it keeps the last `rule.recent` log-odds, nothing more)."""

    def __init__(self, rule: AlertRule) -> None:
        self.rule = rule
        self.recent: deque[float] = deque(maxlen=rule.recent)
        self.raised = False  # inside a moment that already raised its alert

    def level(self) -> float:
        """The stream's recent level, in log-odds."""
        if len(self.recent) < self.rule.warmup:
            return logit(self.rule.prior)
        return statistics.median(self.recent)

    def judge(self, relevance: float) -> tuple[float, float, bool]:
        """(level as a relevance, rise in log-odds, whether this segment raises an alert); then it joins the
        recent segments."""
        level = self.level()
        rise = logit(relevance) - level
        high = rise >= self.rule.rise and relevance >= self.rule.floor
        alert = high and not self.raised
        if high:
            self.raised = True
        elif rise < self.rule.rise / 2 or relevance < self.rule.floor:
            self.raised = False
        self.recent.append(logit(relevance))
        return sigmoid(level), rise, alert
