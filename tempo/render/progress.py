"""A run as it unfolds: its events folded into what a viewer needs at any moment (the page, the streaming API, the
report), and the numbers and key frames that sum it up."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

import numpy as np

from ..events import (
    AllocationDone,
    AnswerToken,
    Compressed,
    Event,
    Finished,
    Segment,
    SegmentCompressed,
    SegmentRead,
    VideoProbed,
    Zoomed,
)
from ..times import clock, span

KEY_FRAMES = 6  # thumbnails of the segments that kept the most tokens, on the page and in reports
STAGE = "stage"  # the status's key as first published, still sent beside `status` so that older clients keep working


class Status(str, Enum):
    """How far a run is: the file opening, segments read ahead of a remote accelerator, segments compressed, the
    answer coming, done. The API's JSON sends it as `status` (and as `stage`, its first name, for older clients)."""

    OPENING = "opening"
    READING = "reading"
    COMPRESSING = "compressing"
    ANSWERING = "answering"
    DONE = "done"


@dataclass
class RunProgress:
    """The one record of a question's run, live or finished, that every surface reads (the page, the API, the
    report, the tools, the exports): its events folded into the question, the segments (each with its tokens once
    allocated and its key frame), the allocation, the answer so far and the finished record."""

    question: str = ""
    started: float = field(default_factory=time.perf_counter)
    probed: VideoProbed | None = None
    segments: list[Segment] = field(default_factory=list)
    allocation: AllocationDone | None = None
    answer: str = ""
    finished: Finished | None = None
    first_segment_at: float | None = None
    read: int = 0  # segments read ahead of a remote accelerator
    from_cache: bool = False  # the compression was replayed from the cache (the question was asked before)
    estimate: float | None = None  # seconds the whole run should take, said before it starts (None: not known yet)
    zoom: Zoomed | None = None  # the whole video's pass, once the run looks closer: what follows is the window's

    def update(self, event: Event) -> None:
        if isinstance(event, Zoomed):  # the window's pass starts afresh; the first pass stays in `zoom`
            self.zoom, self.probed, self.segments, self.allocation = event, None, [], None
            self.first_segment_at, self.read, self.from_cache = None, 0, False
        elif isinstance(event, VideoProbed):
            self.probed = event
        elif isinstance(event, SegmentRead):
            self.read = event.index + 1
        elif isinstance(event, Compressed):
            self.from_cache = event.from_cache
        elif isinstance(event, SegmentCompressed):
            if self.first_segment_at is None:
                self.first_segment_at = time.perf_counter()
            self.segments.append(event.segment)
        elif isinstance(event, AllocationDone):
            self.allocation = event
            self.segments = [replace(s, tokens=k) for s, k in zip(self.segments, event.tokens)]
        elif isinstance(event, AnswerToken):
            self.answer += event.text
        elif isinstance(event, Finished):
            self.finished = event
            self.answer = event.answer
            self.question = self.question or event.question

    @classmethod
    def of(cls, finished: Finished) -> RunProgress:
        """The record of a run known only by its `Finished` (another allocation of a compression: no key frames)."""
        allocation = finished.config.allocation
        progress = cls(finished.question, probed=finished.video, segments=list(finished.segments), zoom=finished.zoom)
        progress.allocation = AllocationDone([s.tokens or 0 for s in finished.segments], finished.budget,
                                             finished.tokens_used, allocation.k_min, finished.k_max,
                                             allocation.strategy, allocation.truncation, 0)
        progress.update(finished)
        return progress

    @property
    def status(self) -> Status:
        if self.finished:
            return Status.DONE
        if self.allocation:
            return Status.ANSWERING
        if self.read and not self.segments:
            return Status.READING
        return Status.COMPRESSING if self.probed else Status.OPENING

    @property
    def num_segments(self) -> int:
        return self.probed.num_segments if self.probed else 0

    def eta(self) -> float | None:
        """Seconds of compression left, from the pace since the first segment (which also paid for warm-up)."""
        done, total = len(self.segments), self.num_segments
        if not done or self.first_segment_at is None:
            return None
        elapsed = time.perf_counter() - self.started
        if done > 1:
            per_segment = (time.perf_counter() - self.first_segment_at) / (done - 1)
        else:
            per_segment = elapsed
        return per_segment * (total - done)

    def to_dict(self) -> dict:
        """The API's JSON: partial while streaming (`status` says how far), `Finished.to_dict()` at the end."""
        if self.finished:
            return {"status": Status.DONE.value, STAGE: Status.DONE.value, **self.finished.to_dict()}
        return {
            "status": self.status.value,
            STAGE: self.status.value,
            "answer": self.answer,
            "segments": [s.to_dict() for s in self.segments],
            "num_segments": self.num_segments,
            "budget": self.allocation.budget if self.allocation else None,
            "tokens_used": self.allocation.tokens_used if self.allocation else None,
            "timings": {"elapsed": round(time.perf_counter() - self.started, 4)},
            "zoom": self.zoom.to_dict() if self.zoom else None,
        }


def run_stats(finished: Finished) -> dict[str, float | int]:
    """Headline numbers: how much of the budget was spent and how much smaller the video became."""
    frames = finished.video.sampled_frames
    every = finished.k_max * len(finished.segments)
    return {
        "segments": len(finished.segments),
        "sampled_frames": frames,
        "tokens_used": finished.tokens_used,
        "budget": finished.budget,
        "tokens_per_frame": finished.tokens_used / frames if frames else 0.0,
        "every_memory_token": every,
        "reduction": every / finished.tokens_used if finished.tokens_used else float("inf"),
        "duration": finished.video.duration,
    }


@dataclass(frozen=True)
class Headline:
    """One of a run's headline numbers as people read it: the value, and what it counts."""

    value: str
    label: str


def headlines(finished: Finished) -> list[Headline]:
    """The run's headline numbers, worded here once for every surface that shows them (the page, the report)."""
    stats = run_stats(finished)
    rows = [Headline(f"{stats['segments']:,}",
                     f"segments · {stats['sampled_frames']:,} frames over {clock(stats['duration'])}"),
            Headline(f"{stats['tokens_used']:,} / {stats['budget']:,}", "memory tokens used / budget"),
            Headline(f"{stats['tokens_per_frame']:.2f}", "memory tokens per sampled frame"),
            Headline(f"{stats['reduction']:.1f}×", f"fewer than all {stats['every_memory_token']:,} memory tokens")]
    if finished.history_used or finished.history_dropped:
        left_out = f", {finished.history_dropped} left out" if finished.history_dropped else ""
        rows.append(Headline(f"{finished.history_used}", f"earlier turns read with the question{left_out}"))
    return rows


def key_segments(segments: Sequence[Segment], count: int = KEY_FRAMES) -> list[Segment]:
    """The `count` segments with a key frame that kept the most tokens, in time order."""
    # Ties (every segment at k_max when compression is off) go to the more relevant, then the earlier segment.
    kept = [s for s in segments if s.tokens and s.frame is not None]
    ranked = sorted(kept, key=lambda s: (-(s.tokens or 0), -(s.relevance or 0.0), s.index))[:count]  # kept: tokens
    return sorted(ranked, key=lambda s: s.index)


def key_frames(segments: Sequence[Segment], count: int = KEY_FRAMES) -> list[tuple[np.ndarray, str]]:
    """Key frames of `key_segments`, captioned with the frame's time (else the segment's span) and the tokens the
    segment kept."""
    return [(s.frame, f"{span(s.start, s.end) if s.frame_time is None else clock(s.frame_time)} · {s.tokens} tokens")
            for s in key_segments(segments, count) if s.frame is not None]
