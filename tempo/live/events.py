"""Typed events of a watch: the only contract between live mode and its callers (the page, the API, the tool, the
benchmark). Times are stream times, seconds since the watch began; `WatchStarted.started_at` turns them into clock
times."""

from __future__ import annotations

from dataclasses import dataclass

from ..events import Segment


@dataclass(frozen=True)
class WatchStarted:
    """A watch began: what it reads, the standing question, and when (seconds since the epoch) stream time 0 was."""

    source: str
    question: str
    started_at: float
    fps: float
    segment_frames: int


@dataclass(frozen=True)
class SegmentWatched:
    """One segment of the stream was compressed with the standing question as it arrived: the segment (its start and
    end in stream seconds, its relevance, its key frame and that frame's stream time), and how it stands against the
    stream's recent level."""

    segment: Segment
    level: float  # the stream's recent level as the alert rule reads it: a relevance, for plots
    rise: float  # how far this segment's log-odds of relevance stand above that level
    lag: float | None = None  # seconds from its last frame's moment in real time to its result; None: unpaced
    alert: bool = False  # this segment raised an alert (an `Alert` follows it)

    def to_dict(self) -> dict:
        """JSON-ready, without the frame."""
        segment = self.segment
        assert segment.relevance is not None and segment.frame_time is not None  # a watch's segments have both
        return {"index": segment.index, "start": round(segment.start, 3), "end": round(segment.end, 3),
                "relevance": round(segment.relevance, 6), "level": round(self.level, 6), "rise": round(self.rise, 3),
                "frame_time": round(segment.frame_time, 3), "alert": self.alert,
                "lag": None if self.lag is None else round(self.lag, 3)}


@dataclass(frozen=True)
class Alert:
    """A segment's relevance rose clearly above the stream's recent level (see `AlertRule`): the moment to look at,
    its key frame's stream time."""

    segment: Segment
    rise: float

    @property
    def time(self) -> float:
        """The moment: when the segment's key frame was taken (stream seconds)."""
        assert self.segment.frame_time is not None  # a watch times every segment's key frame
        return self.segment.frame_time

    def to_dict(self) -> dict:
        segment = self.segment
        assert segment.relevance is not None  # a watch scores every segment
        return {"index": segment.index, "start": round(segment.start, 3), "end": round(segment.end, 3),
                "time": round(self.time, 3), "relevance": round(segment.relevance, 6), "rise": round(self.rise, 3)}


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


LiveEvent = WatchStarted | SegmentWatched | Alert | Gap | WatchEnded
