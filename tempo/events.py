"""Typed progress events yielded by `tempo.engine.run` (and the compression record one of them carries); the CLI,
the batch runner and the app only consume these."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from .config import RunConfig
from .moments import Moment, answer_interval, asks_interval, find_moments
from .settings import summary
from .video.sampling import SamplingPlan, VideoProbed


@dataclass(frozen=True)
class SegmentRead:
    """One segment was decoded and preprocessed ahead of the accelerator (only where the model runs elsewhere)."""

    index: int
    num_segments: int


@dataclass(frozen=True)
class Segment:
    """One segment as every caller reads it: its span in the video (seconds), its relevance (None when compression
    is off), the memory tokens it kept (None until allocated), and its key frame with that frame's time."""

    index: int
    start: float
    end: float
    relevance: float | None
    tokens: int | None = None
    frame: np.ndarray | None = field(default=None, repr=False, compare=False)  # sharpest sampled frame, RGB, <= 320
    frame_time: float | None = None  # when the key frame was taken (seconds); None: not known

    def to_dict(self) -> dict:
        """JSON-ready: everything but the frame's pixels."""
        return {"index": self.index, "start": self.start, "end": self.end, "relevance": self.relevance,
                "tokens": self.tokens}


@dataclass(frozen=True)
class SegmentCompressed:
    """One segment went through the compressor: its record (tokens not yet allocated), one of `num_segments`."""

    segment: Segment
    num_segments: int


@dataclass
class Compression:
    """The compressor's output for one query about one video: every segment's memory [k_max, d_s] and
    relevance, with the video and sampling they came from; all an answer needs, and what the cache keeps."""

    query: str  # what the compressor read (the question, or the previous one with it; see compressor_query)
    video: VideoProbed
    plan: SamplingPlan
    memories: list[torch.Tensor] = field(default_factory=list)
    relevance: list[float] = field(default_factory=list)

    @property
    def nbytes(self) -> int:
        return sum(m.numel() * m.element_size() for m in self.memories)


@dataclass(frozen=True)
class Compressed:
    """Every segment was compressed (or the compression came from the cache: `from_cache`). `vision`: the segments
    with their vision features (encoded `video.segments.PreparedSegment`s) when the accelerator sent them back for
    the cache, else None."""

    compression: Compression = field(repr=False)
    vision: list | None = field(default=None, repr=False)
    from_cache: bool = False


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
class Zoomed:
    """The whole video was compressed and the answer looks closer (zoom): the question is asked again over `window`
    (seconds in the video), which samples at the full rate around `moment`, the middle of the most relevant stretch.
    `video` and `segments` are the first pass's (tokens: what ATA would have kept of the whole video)."""

    window: tuple[float, float]
    moment: float
    reason: str  # why this answer zoomed, in words for the page ("the question asks when")
    video: VideoProbed
    segments: tuple[Segment, ...]

    def to_dict(self) -> dict:
        return {"window": list(self.window), "moment": self.moment, "reason": self.reason,
                "duration": self.video.duration, "segments": [s.to_dict() for s in self.segments]}


@dataclass(frozen=True)
class Finished:
    """The answer and everything needed to report on the run: the question it answers and the settings it ran
    under among them."""

    answer: str
    token_ids: list[int]
    segments: list[Segment]
    budget: int
    tokens_used: int
    k_max: int
    timings: dict[str, float]
    video: VideoProbed
    config: RunConfig = field(default_factory=RunConfig)  # what the run was asked to do
    alongside: tuple[str, ...] = ()  # timed parts that ran beside the others (decoding workers), outside the total
    history_used: int = 0  # earlier turns of the conversation the decoder read
    history_dropped: int = 0  # earlier turns left out: over the token allowance, or a model that takes none
    zoom: Zoomed | None = None  # the whole-video pass, when the answer looked closer first (`video` is the window's)
    question: str = ""  # what the decoder answered (the visitor's question)

    @property
    def moments(self) -> tuple[Moment, ...]:
        """The ranked moments of the run's relevance (the whole video's, refined by zoom's window where it ran)."""
        if self.zoom is not None:
            return find_moments(self.zoom.segments, self.segments)
        return find_moments(self.segments)

    @property
    def answer_interval(self) -> tuple[float, float] | None:
        """The interval the answer names (seconds), beside the moments, when the question asks from when to when."""
        return answer_interval(self.answer) if asks_interval(self.question) else None

    def to_dict(self) -> dict:
        """JSON-ready summary (the CLI's --json, the app's API and each line of a batch's output)."""
        return {
            "answer": self.answer,
            "segments": [s.to_dict() for s in self.segments],
            "budget": self.budget,
            "tokens_used": self.tokens_used,
            "k_max": self.k_max,
            "tokens_without_compression": self.k_max * len(self.segments),
            "num_segments": len(self.segments),
            "sampled_frames": self.video.sampled_frames,
            "duration": self.video.duration,
            "timings": self.timings,
            "timings_alongside": list(self.alongside),
            "settings": summary(self.config, self.budget),
            "history_used": self.history_used,
            "history_dropped": self.history_dropped,
            "zoom": self.zoom.to_dict() if self.zoom else None,
            "moments": [m.to_dict() for m in self.moments],
            "answer_interval": list(self.answer_interval) if self.answer_interval else None,
        }


Event = (VideoProbed | SegmentRead | SegmentCompressed | Compressed | Zoomed | AllocationDone | AnswerToken
         | Finished)
