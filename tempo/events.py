"""Typed progress events yielded by `tempo.pipeline.run`; the CLI and the app only consume these."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass(frozen=True)
class VideoProbed:
    """The video was opened and the sampling plan is known."""

    path: str
    duration: float
    native_fps: float
    total_frames: int
    width: int
    height: int
    sampled_frames: int
    real_fps: float
    num_segments: int
    backend: str
    window: tuple[float, float] | None = None  # the part sampled (start, end) in seconds, when a range was asked


@dataclass(frozen=True)
class SegmentRead:
    """One segment was decoded and preprocessed ahead of the accelerator (only where the model runs elsewhere)."""

    index: int
    num_segments: int


@dataclass(frozen=True)
class SegmentCompressed:
    """One segment went through the compressor."""

    index: int
    num_segments: int
    start: float  # seconds
    end: float
    relevance: float | None  # None when dynamic compression is off
    frame: np.ndarray = field(repr=False)  # representative RGB frame (middle of the segment), long edge <= 320


@dataclass(frozen=True)
class AllocationDone:
    """Memory tokens kept per segment."""

    tokens: list[int]
    budget: int
    tokens_used: int
    k_min: int
    k_max: int
    strategy: str
    truncation: str
    context_truncated: int  # visual positions cut to fit the decoder context (0 normally)


@dataclass(frozen=True)
class AnswerToken:
    """One generated token and the text it adds."""

    token_id: int
    text: str


@dataclass(frozen=True)
class SegmentSummary:
    index: int
    start: float
    end: float
    relevance: float | None
    tokens: int


@dataclass(frozen=True)
class Finished:
    """The answer and everything needed to report on the run."""

    answer: str
    token_ids: list[int]
    segments: list[SegmentSummary]
    budget: int
    tokens_used: int
    k_max: int
    timings: dict[str, float]
    video: VideoProbed
    settings: dict[str, object] = field(default_factory=dict)  # what the run was asked to do (see RunConfig.summary)
    alongside: tuple[str, ...] = ()  # stages that ran beside the others (decoding workers), outside the total's sum

    def to_dict(self) -> dict:
        """JSON-ready summary (the CLI's --json, the app's API and each line of a batch's output)."""
        return {
            "answer": self.answer,
            "segments": [asdict(s) for s in self.segments],
            "budget": self.budget,
            "tokens_used": self.tokens_used,
            "k_max": self.k_max,
            "tokens_without_compression": self.k_max * len(self.segments),
            "num_segments": len(self.segments),
            "sampled_frames": self.video.sampled_frames,
            "duration": self.video.duration,
            "timings": self.timings,
            "timings_alongside": list(self.alongside),
            "settings": self.settings,
        }


Event = VideoProbed | SegmentRead | SegmentCompressed | AllocationDone | AnswerToken | Finished
