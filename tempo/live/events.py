"""Typed events of a watch: the only contract between live mode and its callers (the page, the API, the tool, the
benchmark). Times are stream times, seconds since the watch began; `WatchStarted.started_at` turns them into clock
times."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..events import Segment


@dataclass(frozen=True)
class WatchStarted:
    """A watch began: what it reads, the standing question, and when (seconds since the epoch) stream time 0 was."""

    source: str
    question: str
    started_at: float
    fps: float
    segment_frames: int


@dataclass(frozen=True, kw_only=True)
class LiveSegment(Segment):
    """One segment of the stream was compressed with the standing question as it arrived: the segment record (its
    start and end in stream seconds, its key frame), and how it stands against the stream's recent level."""

    relevance: float
    frame: np.ndarray = field(repr=False, compare=False)  # the segment's sharpest frame (RGB, long edge <= 320)
    frame_time: float  # when that frame was taken (stream seconds)
    level: float  # the stream's recent level as the alert rule reads it: a relevance, for plots
    rise: float  # how far this segment's log-odds of relevance stand above that level
    lag: float | None = None  # seconds from its last frame's moment in real time to its result; None: unpaced
    alert: bool = False  # this segment raised an alert (an `Alert` follows it)

    def to_dict(self) -> dict:
        """JSON-ready, without the frame."""
        return {"index": self.index, "start": round(self.start, 3), "end": round(self.end, 3),
                "relevance": round(self.relevance, 6), "level": round(self.level, 6), "rise": round(self.rise, 3),
                "frame_time": round(self.frame_time, 3), "alert": self.alert,
                "lag": None if self.lag is None else round(self.lag, 3)}


@dataclass(frozen=True)
class Alert:
    """A segment's relevance rose clearly above the stream's recent level (see `AlertRule`): the moment to look at."""

    index: int
    start: float
    end: float
    time: float  # the key frame's stream time: the moment
    relevance: float
    rise: float
    frame: np.ndarray = field(repr=False)

    def to_dict(self) -> dict:
        return {"index": self.index, "start": round(self.start, 3), "end": round(self.end, 3),
                "time": round(self.time, 3), "relevance": round(self.relevance, 6), "rise": round(self.rise, 3)}


@dataclass(frozen=True)
class Gap:
    """Frames were skipped to keep up with real time (or the source sent none for a while): `start` to `end`."""

    start: float
    end: float


@dataclass(frozen=True)
class WatchEnded:
    """The watch is over: why, in one sentence, and what it saw. What was seen stays askable until it is closed."""

    reason: str
    segments: int
    alerts: int
    failed: bool = False  # the source died (unplugged, gone, corrupt), rather than ended or stopped


LiveEvent = WatchStarted | LiveSegment | Alert | Gap | WatchEnded
