"""Video file -> sampled RGB frames, using the released sampling rule (2 fps, uniform, capped)."""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence

import numpy as np
from PIL import Image

from .errors import VideoError

log = logging.getLogger(__name__)


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
    """Non-overlapping windows of `segment_frames` sampled frames; the last one may be shorter."""
    return [range(start, min(start + segment_frames, num_frames)) for start in range(0, num_frames, segment_frames)]


def fit_long_edge(image: Image.Image, long_edge: int = 512) -> Image.Image:
    """Shrink so the long edge is <= `long_edge`, each side rounded to a multiple of 16 (released rule)."""
    w, h = image.size
    if max(w, h) <= long_edge:
        return image
    ratio = long_edge / max(w, h)
    new_w = max(16, int(round(w * ratio / 16) * 16))
    new_h = max(16, int(round(h * ratio / 16) * 16))
    return image.resize((new_w, new_h), resample=Image.Resampling.BICUBIC)


class FrameReader(Protocol):
    info: VideoInfo

    def read(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        """Yield the requested frames (sorted indices, repeats allowed) as HxWx3 uint8 RGB arrays."""
        ...

    def close(self) -> None: ...


def _decode_threads() -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return min(max(1, cores - 1), 16)


class DecordReader:
    """decord: what the released pipeline uses; its frames are the reference pixels."""

    batch = 8

    def __init__(self, path: str):
        import decord

        self._reader = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=_decode_threads())
        total = len(self._reader)
        if total < 1:
            raise VideoError(f"{os.path.basename(path)} contains no video frames.")
        height, width = self._reader[0].shape[:2] if total else (0, 0)
        self._reader.seek(0)
        self.info = VideoInfo(path, total, float(self._reader.get_avg_fps()), width, height, "decord")

    def read(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        for start in range(0, len(indices), self.batch):
            yield from self._reader.get_batch(list(indices[start:start + self.batch])).asnumpy()

    def close(self) -> None:
        self._reader = None


class PyAVReader:
    """PyAV fallback, used when decord is not installed or cannot open the file."""

    def __init__(self, path: str):
        import av

        self._path = path
        with av.open(path) as container:
            if not container.streams.video:
                raise VideoError(f"{os.path.basename(path)} has no video stream (is it an audio file?).")
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate
            total = stream.frames or sum(1 for packet in container.demux(stream) if packet.size)
            width, height = stream.codec_context.width, stream.codec_context.height
        if total < 1:
            raise VideoError(f"{os.path.basename(path)} contains no video frames.")
        self.info = VideoInfo(path, int(total), float(rate) if rate else 0.0, width, height, "pyav")

    def read(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        import av

        wanted = list(indices)
        position = 0
        with av.open(self._path) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            frame_index = -1
            for frame in container.decode(stream):
                frame_index += 1
                if frame_index < wanted[position]:
                    continue
                rgb = frame.to_ndarray(format="rgb24")
                while position < len(wanted) and wanted[position] == frame_index:
                    yield rgb
                    position += 1
                if position == len(wanted):
                    return
            # Containers can over-report their frame count: repeat the last decoded frame.
            if position < len(wanted) and frame_index >= 0:
                log.warning("%s: only %d frames decodable; repeating the last one", self._path, frame_index + 1)
                while position < len(wanted):
                    yield rgb
                    position += 1

    def close(self) -> None:
        pass


def open_video(path: str | os.PathLike) -> FrameReader:
    """Open with decord, falling back to PyAV; raise VideoError with a readable reason otherwise."""
    path = os.fspath(path)
    name = os.path.basename(path) or path
    if not os.path.exists(path):
        raise VideoError(f"Video file not found: {path}")
    if os.path.isdir(path):
        raise VideoError(f"{path} is a directory, not a video file.")
    if os.path.getsize(path) == 0:
        raise VideoError(f"{name} is empty (0 bytes).")
    errors = []
    for reader_class in (DecordReader, PyAVReader):
        try:
            reader = reader_class(path)
        except VideoError:
            raise
        except ImportError as exc:
            errors.append(f"{reader_class.__name__}: not installed ({exc})")
            continue
        except Exception as exc:  # decoders raise many unrelated types for broken files
            errors.append(f"{reader_class.__name__}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        if not (math.isfinite(reader.info.native_fps) and reader.info.native_fps > 0):
            raise VideoError(f"{name} does not declare a usable frame rate, so frames cannot be placed in time.")
        return reader
    log.info("could not open %s: %s", path, "; ".join(errors))
    raise VideoError(f"{name} is not a readable video (unknown format or damaged file).")
