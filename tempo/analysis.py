"""Looking at one compression from other angles: how two allocations of it differ (compare), how peaked one is,
which answers say anything (budget sweeps), and one segment's frames as the run saw it. The compression comes from
the per-video cache when the question was asked before, so none of this reruns the vision tower or the compressor.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .allocation import scaled_relevance
from .config import Limits, RunConfig
from .engine.steps import allocate_tokens
from .errors import InputError
from .events import Segment
from .model import TempoModel
from .video import SamplingPlan, open_video
from .video.patches import fit_long_edge

SEGMENT_FRAME_EDGE = 320  # long edge of the frames shown for one segment


def usable(answer: str) -> bool:
    """Whether an answer says anything: some letters or digits, and no word repeated three times in a row, apart
    or run together (the loops a decoder falls into when it is given too few tokens)."""
    words = re.findall(r"\w+", answer.lower())
    looping = any(words[i] == words[i + 1] == words[i + 2] for i in range(len(words) - 2)) or \
        any(re.fullmatch(r"(\w{2,}?)\1{2,}", word) for word in words)
    return bool(words) and not looping


def token_changes(before: list[int], after: list[int]) -> list[int]:
    """Tokens each segment gained (positive) or lost going from one allocation to another."""
    return [b - a for a, b in zip(before, after)]


def most_changed(before: list[int], after: list[int], count: int = 5) -> list[int]:
    """The segments whose token count changed most, largest change first (ties: earlier segment first)."""
    changes = token_changes(before, after)
    ranked = sorted((i for i, change in enumerate(changes) if change), key=lambda i: (-abs(changes[i]), i))
    return ranked[:count]


def allocation_shape(tokens: list[int], k_min: int, k_max: int) -> dict[str, float]:
    """How peaked an allocation is: the share of segments at the floor (k_min or less) and near the ceiling
    (3/4 of k_max or more), and the entropy of the tokens' spread over segments, normalised to 1 for an even
    spread."""
    total = sum(tokens)
    shares = [k / total for k in tokens if k > 0] if total else []
    entropy = -sum(p * math.log(p) for p in shares) / math.log(len(tokens)) if len(tokens) > 1 else 1.0
    return {"at_k_min": sum(k <= k_min for k in tokens) / len(tokens),
            "near_k_max": sum(k >= 0.75 * k_max for k in tokens) / len(tokens),
            "entropy": entropy}


def most_relevant(segments: Sequence[Segment], count: int = 3) -> list[Segment]:
    """Where the compressor looked: the `count` segments it scored most relevant, most relevant first (ties go to
    the earlier segment). This is its own localisation, independent of what the decoder then says."""
    scored = [s for s in segments if s.relevance is not None]
    return sorted(scored, key=lambda s: (-(s.relevance or 0.0), s.index))[:count]  # scored: not None


def relevance_ranks(relevance: list[float]) -> list[int]:
    """1 for the most relevant segment, then 2, ... (ties share the better rank)."""
    order = sorted(relevance, reverse=True)
    return [order.index(value) + 1 for value in relevance]


@dataclass(frozen=True)
class SegmentFrames:
    """One segment's frames for the page, with the segment as a run saw it (its span, relevance and the tokens it kept
    under the run's allocation), its relevance's rank (1 = most relevant) among `num_segments`."""

    segment: Segment
    scaled: float  # the relevance as ATA reads it: 0 for the video's least relevant segment, 1 for its most
    rank: int
    num_segments: int
    frames: list[np.ndarray] = field(repr=False)  # its sampled frames, long edge <= SEGMENT_FRAME_EDGE
    times: list[float]  # when each was taken


def segment_frames(model: TempoModel, video: str | os.PathLike, plan: SamplingPlan, relevance: list[float],
                   config: RunConfig, index: int) -> SegmentFrames:
    """Segment `index` of a compression (its `relevance`, from the cache): the tokens `config` gives it, computed as
    the run computes them, and its frames decoded again."""
    if not 0 <= index < len(relevance):
        raise InputError(f"This video has segments 0 to {len(relevance) - 1} (got {index}).")
    tokens = allocate_tokens(model, relevance, config)
    frames, times = decode_segment(video, plan, index, limits=config.limits)
    segment = Segment(index, *plan.span(index), relevance[index], tokens[index])
    return SegmentFrames(segment, scaled_relevance(relevance)[index], relevance_ranks(relevance)[index],
                         len(relevance), frames, times)


def decode_segment(video: str | os.PathLike, plan: SamplingPlan, index: int, long_edge: int = SEGMENT_FRAME_EDGE,
                   limits: Limits = Limits()) -> tuple[list[np.ndarray], list[float]]:
    """The frames `plan` sampled for segment `index`, decoded again at display size, and the time each shows (a
    fast-seek plan reads the codec's intra frames). Where `limits` isolate decoding, the file already went through
    PyAV in a child process; PyAV alone reads it here, the same way, not decord."""
    if not 0 <= index < len(plan.segments):
        raise InputError(f"This video has segments 0 to {len(plan.segments) - 1} (got {index}).")
    positions = plan.segments[index]  # the segment's frames, as positions in the plan
    reader = open_video(video, fast_seek=plan.fast_seek, long_edge=long_edge,
                        decord=not limits.isolate_decoding, max_pixels=limits.max_frame_pixels)
    try:
        decoded = list(reader.read([plan.frame_indices[i] for i in positions]))
    finally:
        reader.close()
    frames = fit_long_edge(np.stack(decoded), long_edge)  # [T, H, W, 3]
    return list(frames), [plan.frame_times[i] for i in positions]
