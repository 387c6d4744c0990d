"""The released sampling rule (2 fps, uniform, capped) as a plan: which frames, their times, their segments."""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

from ..config import SamplingConfig
from ..errors import InputError
from ..times import clock, clock_said


@dataclass(frozen=True)
class VideoInfo:
    """What the container says about the video stream."""

    path: str
    total_frames: int
    native_fps: float
    width: int
    height: int
    backend: str

    @property
    def duration(self) -> float:
        return self.total_frames / self.native_fps


def sample_frame_indices(total_frames: int, native_fps: float, fps: float = 2.0,
                         min_frames: int = 4, max_frames: int = 1024) -> list[int]:
    """Released rule: n = clamp(round(duration * fps), min_frames, max_frames) evenly spaced indices.

    Python's and numpy's half-to-even rounding are both part of the rule. Very short videos are
    *up*-sampled to `min_frames` with repeated indices (3 frames -> [0, 1, 1, 2]).
    """
    if total_frames <= 1:
        return [0]
    duration = total_frames / native_fps
    n = min(max(max(1, round(duration * fps)), min_frames), max_frames)
    if n == 1:
        return [total_frames - 1]
    indices = np.round(np.linspace(0, total_frames - 1, n)).astype(int)
    return np.clip(indices, 0, total_frames - 1).tolist()


def sampled_fps(num_sampled: int, info: VideoInfo) -> float:
    """The frame rate the sampled frames really have (n / duration, not exactly the requested fps)."""
    return num_sampled / info.duration


def segment_ranges(num_frames: int, segment_frames: int = 8) -> list[range]:
    """Consecutive runs of `segment_frames` sampled frames, one per segment; the last one may be shorter."""
    return [range(start, min(start + segment_frames, num_frames)) for start in range(0, num_frames, segment_frames)]


@dataclass(frozen=True)
class SamplingPlan:
    """Which frames are read, the times the model is told about them, and how they group into segments."""

    frame_indices: list[int]  # decoded frames in order (short videos repeat some)
    frame_times: list[float]  # their presentation times in the video (seconds)
    real_fps: float  # sampled frames per second of video
    segments: list[range]  # each segment's positions among the sampled frames
    segment_frames: int
    duration: float  # where the sampled part ends (the video's end unless a range was asked for)
    fast_seek: bool = False  # fast seek: true intra frame times instead of the released uniform clock
    offset: float = 0.0  # where the sampled part starts: the released clock counts from here

    def segment_frame_times(self, index: int) -> list[float]:
        return [self.frame_times[i] for i in self.segments[index]]

    def model_times(self, index: int, length: int) -> list[float]:
        """The times the compressor's prompt states for a segment padded to `length` frames.

        Released rule: sampled position / real_fps, counted on past the segment for padding frames. Fast seek
        states each intra frame's true time and repeats the last one for padding.
        """
        positions = self.segments[index]
        if self.fast_seek:
            return [self.frame_times[positions[min(k, len(positions) - 1)]] for k in range(length)]
        return [self.offset + (positions.start + k) / self.real_fps for k in range(length)]

    def tag_time(self, index: int) -> float:
        """The decoder's `<t seconds>`: the centre of a full segment even for a short last one (released),
        or the midpoint of the segment's first and last intra frames."""
        if self.fast_seek:
            times = self.segment_frame_times(index)
            return (times[0] + times[-1]) / 2
        return self.offset + (index * self.segment_frames + self.segment_frames / 2) / self.real_fps

    def tag_times(self) -> list[float]:
        """`tag_time` of every segment."""
        return [self.tag_time(i) for i in range(len(self.segments))]

    def span(self, index: int) -> tuple[float, float]:
        """The stretch of video a segment stands for, in seconds."""
        positions = self.segments[index]
        if self.fast_seek:
            end = self.frame_times[positions.stop] if positions.stop < len(self.frame_times) else self.duration
            return self.frame_times[positions.start], end
        return (self.offset + positions.start / self.real_fps,
                min(self.offset + positions.stop / self.real_fps, self.duration))


def frame_window(info: VideoInfo, sampling: SamplingConfig) -> tuple[int, int, float]:
    """The part of the video to sample (SamplingConfig.start / end): its first frame, its frame count and where
    it ends in seconds; the whole video when no range is asked for."""
    if sampling.start is None and sampling.end is None:
        return 0, info.total_frames, info.duration
    start = sampling.start or 0.0
    end = info.duration if sampling.end is None else min(sampling.end, info.duration)
    if start >= info.duration:
        raise InputError(f"The range starts at {clock_said(start)}, after the video ends ({clock(info.duration, 1)}).")
    if end <= start:
        raise InputError(f"The range ends ({clock_said(end)}) before it starts ({clock_said(start)}).")
    first = min(info.total_frames - 1, math.ceil(start * info.native_fps - 1e-6))
    last = min(info.total_frames, max(first + 1, math.floor(end * info.native_fps + 1e-6)))
    return first, last - first, end


def uniform_plan(info: VideoInfo, sampling: SamplingConfig) -> SamplingPlan:
    """The released plan: `sample_frame_indices`, timed by position at `real_fps`, in 8-frame segments; over the
    asked-for range only, its times still the video's own."""
    first, count, end = frame_window(info, sampling)
    indices = [first + i for i in sample_frame_indices(count, info.native_fps, sampling.fps, sampling.min_frames,
                                                        sampling.max_frames)]
    real_fps = (sampled_fps(len(indices), info) if count == info.total_frames
                else len(indices) / (count / info.native_fps))
    return SamplingPlan(indices, [i / info.native_fps for i in indices], real_fps,
                        segment_ranges(len(indices), sampling.segment_frames), sampling.segment_frames, end,
                        offset=first / info.native_fps)


def long_edge_size(width: int, height: int, long_edge: int = 512) -> tuple[int, int]:
    """(width, height) with the long edge shrunk to <= `long_edge`, each side rounded to a multiple of 16
    (released rule); unchanged when it already fits."""
    if max(width, height) <= long_edge:
        return width, height
    ratio = long_edge / max(width, height)
    return max(16, int(round(width * ratio / 16) * 16)), max(16, int(round(height * ratio / 16) * 16))


def fast_seek_plan(intra_frame_times: list[float], info: VideoInfo, sampling: SamplingConfig) -> SamplingPlan:
    """Fast seek: for each time the released rule would sample, the nearest intra frame (each used once)."""
    def nearest(t: float) -> int:
        k = bisect.bisect_left(intra_frame_times, t)
        near = (j for j in (k - 1, k) if 0 <= j < len(intra_frame_times))
        return min(near, key=lambda j: abs(intra_frame_times[j] - t))

    first, count, end = frame_window(info, sampling)
    targets = [(first + i) / info.native_fps for i in sample_frame_indices(count, info.native_fps, sampling.fps,
                                                                           sampling.min_frames, sampling.max_frames)]
    begin = first / info.native_fps
    chosen = sorted({nearest(t) for t in targets})
    chosen = [k for k in chosen if begin <= intra_frame_times[k] < end] or chosen[:1]  # intra frames in the range
    return SamplingPlan(chosen, [intra_frame_times[k] for k in chosen], len(chosen) / max(end - begin, 1e-6),
                        segment_ranges(len(chosen), sampling.segment_frames), sampling.segment_frames,
                        end, fast_seek=True, offset=begin)


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
