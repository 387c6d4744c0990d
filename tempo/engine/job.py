"""The job that travels from the host's half of a request to the accelerator's: what to compress (or the
compression, when the cache holds it) and what to answer. Everything in it pickles once its segments are a list."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..config import RunConfig
from ..events import Compression, VideoProbed
from ..model.prompts import Exchange
from ..timing import Timer
from ..video import SamplingPlan
from ..video.segments import PreparedSegment


@dataclass(frozen=True)
class Dialogue:
    """The question the decoder answers and the earlier turns it reads with it (those the allowance kept)."""

    question: str
    history: tuple[Exchange, ...] = ()
    dropped: int = 0  # earlier turns left out


@dataclass(frozen=True)
class Job:
    """One trip to the accelerator: compress `segments` for `query` (unless `compression` is given), `micro_batch`
    at a time, then answer once under each of `answer_configs` (an ask has one, a comparison two, a budget sweep
    six, a compression alone none)."""

    query: str  # what the compressor reads (the cache keeps its compression under it)
    video: VideoProbed
    plan: SamplingPlan
    micro_batch: int | None  # segments per compressor pass (None: where the model runs decides)
    answer_configs: tuple[RunConfig, ...]  # each answer's allocation and generation
    timer: Timer
    segments: Iterable[PreparedSegment] = ()
    compression: Compression | None = None
    keep_vision_bytes: int = 0  # send the vision features back with the compression while they fit in this
    dialogue: Dialogue | None = None  # what the decoder answers (None: `query`, on its own)

    @property
    def to_compress(self) -> int:
        """Segments the accelerator compresses (none when the compression is given)."""
        return 0 if self.compression is not None else self.video.num_segments
