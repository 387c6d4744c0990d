"""A video's segments as the compressor takes them: decoded, resized by the released chain and cut into patch rows,
with a thumbnail each, until the vision tower turns their pixels into features. A `Decoder` opens a file and yields
them in order, in this process (`LocalDecoder`, on worker threads) or in a child process a server can kill
(`sandbox.SandboxedDecoder`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol

import cv2
import numpy as np
import torch

from ..config import Limits, SamplingConfig
from ..timing import Timer
from .patches import PatchGeometry, fit_long_edge, model_frames, patchify
from .reader_choice import decode_workers, is_long, open_sparse, open_video, plan_sampling, threads_per_worker
from .readers import FrameReader
from .resample import resize
from .sampling import SamplingPlan, VideoProbed, long_edge_size
from .skipping_readers import SparseReader
from .stream import segment_stream

THUMBNAIL_EDGE = 320


@dataclass
class VisionFeatures:
    """Vision-tower output for one segment. It does not depend on the question, so it can be reused."""

    embeds: torch.Tensor  # [tokens, d_s], merged 2x2 patch features
    deepstack: list[torch.Tensor]  # one [tokens, d_s] per deepstack layer
    grid: tuple[int, int, int]  # (t, h, w) in patches


@dataclass
class PreparedSegment:
    """One segment as the compressor takes it, plus what the UI shows for it: its sharpest sampled frame (`shown`,
    its position among the segment's frames) as a thumbnail. It holds its pixels until the vision tower has read
    them, then their features instead (`encoded`): never both, so a cached segment costs one of them."""

    index: int
    pixel_rows: torch.Tensor | None  # uint8 [patches, C * temporal_patch * patch * patch]; None once encoded
    grid: tuple[int, int, int]
    thumbnail: np.ndarray
    shown: int = 0
    vision: VisionFeatures | None = None

    def __post_init__(self) -> None:
        if (self.pixel_rows is None) == (self.vision is None):
            raise ValueError("a prepared segment holds either its pixel rows or their vision features")

    def encoded(self, vision: VisionFeatures) -> PreparedSegment:
        """This segment with `vision` in place of its pixels."""
        return replace(self, pixel_rows=None, vision=vision)

    @property
    def nbytes(self) -> int:
        tensors = [] if self.pixel_rows is None else [self.pixel_rows]
        if self.vision is not None:
            tensors += [self.vision.embeds, *self.vision.deepstack]
        return self.thumbnail.nbytes + sum(t.numel() * t.element_size() for t in tensors)


def sharpest(frames: np.ndarray) -> int:
    """The sharpest of a segment's frames [T, H, W, 3]: the largest variance of OpenCV's Laplacian, read on every
    other pixel of the green channel (a stand-in for brightness that costs about 0.05 ms a frame)."""
    scores = [cv2.Laplacian(np.ascontiguousarray(frame[::2, ::2, 1]), cv2.CV_32F).var() for frame in frames]
    return int(np.argmax(scores))


def fit_frame(frame: np.ndarray, long_edge: int) -> np.ndarray:
    """One decoded frame [H, W, 3] with its long edge fitted (the release's first resize, which works frame by
    frame), done as soon as it is decoded: a segment's worth of full-size frames is never held."""
    return fit_long_edge(frame[None], long_edge)[0]


def prepare_segment(index: int, frames: list[np.ndarray], sampling: SamplingConfig, geometry: PatchGeometry,
                    timer: Timer) -> PreparedSegment:
    """Decoded frames of one segment (full size, or already through `fit_frame`) -> patch rows, the whole segment
    at once through the released resize chain (`patches`), plus its sharpest frame as a thumbnail (a frame the
    model sees)."""
    with timer.time("preprocess"):
        fitted = fit_long_edge(np.stack(frames), sampling.long_edge)  # [T, H, W, 3]
        shown = sharpest(fitted)
        width, height = long_edge_size(fitted.shape[2], fitted.shape[1], THUMBNAIL_EDGE)
        rows, grid = patchify(model_frames(fitted, geometry), geometry)
        thumbnail = resize(fitted[shown][None], height, width)[0]
        if np.shares_memory(thumbnail, fitted):  # a frame small enough to be its own thumbnail: not the segment
            thumbnail = thumbnail.copy()
    return PreparedSegment(index, rows, grid, thumbnail, shown)


def prepare_segments(path: str | os.PathLike, reader: FrameReader, plan: SamplingPlan, sampling: SamplingConfig,
                     geometry: PatchGeometry, timer: Timer) -> Iterator[PreparedSegment]:
    """Segments in order, decoded and preprocessed on worker threads while the caller compresses earlier ones.

    `reader` (already open) decodes short videos. Long ones are decoded sparsely where the file allows it, by
    one worker per core, each over a share of the time range; every reader refuses frames as `reader` does."""
    if is_long(plan) and not plan.fast_seek and not isinstance(reader, SparseReader):
        sparse = open_sparse(path, reader.max_pixels)
        if sparse is not None:
            reader.close()
            reader = sparse
    workers = decode_workers(plan)
    if isinstance(reader, SparseReader):
        reader.threads = threads_per_worker(workers)
    if reader.shareable:
        readers = [lambda: reader] * workers
    else:
        readers = [lambda: reader] + [partial(open_video, path, max_pixels=reader.max_pixels)] * (workers - 1)
    prepare = partial(prepare_segment, sampling=sampling, geometry=geometry, timer=timer)
    return segment_stream(plan, readers, prepare, timer.time, reduce=partial(fit_frame, long_edge=sampling.long_edge))


def video_plan(reader: FrameReader, sampling: SamplingConfig) -> tuple[VideoProbed, SamplingPlan]:
    """The sampling plan for an opened video, and what the UI says about it."""
    info = reader.info
    plan = plan_sampling(reader, sampling)
    ranged = sampling.start is not None or sampling.end is not None
    probed = VideoProbed(info.path, info.duration, info.native_fps, info.total_frames, info.width, info.height,
                         len(plan.frame_indices), plan.real_fps, len(plan.segments), info.backend,
                         (plan.offset, plan.duration) if ranged else None)
    return probed, plan


class Decoder(Protocol):
    """An opened video: what it is and how it is sampled, then its segments in order (once)."""

    probed: VideoProbed
    plan: SamplingPlan

    def segments(self) -> Iterator[PreparedSegment]: ...

    def close(self) -> None: ...


class LocalDecoder:
    """Decoding in this process, on worker threads while the caller compresses (the library's default)."""

    def __init__(self, path: str | os.PathLike, sampling: SamplingConfig, geometry: PatchGeometry, limits: Limits,
                 timer: Timer):
        self.path, self.sampling, self.geometry, self.limits, self.timer = path, sampling, geometry, limits, timer
        with timer.time("open"):
            self.reader: FrameReader | None = open_video(path, fast_seek=sampling.fast_seek,
                                                        long_edge=sampling.long_edge,
                                                        max_pixels=limits.max_frame_pixels)
            try:
                self.probed, self.plan = video_plan(self.reader, sampling)
            except BaseException:
                self.close()
                raise

    def segments(self) -> Iterator[PreparedSegment]:
        reader, self.reader = self.reader, None  # the first decoding worker owns it now
        if reader is None:
            raise RuntimeError("a video's segments can be read once")
        return prepare_segments(self.path, reader, self.plan, self.sampling, self.geometry, self.timer)

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None
