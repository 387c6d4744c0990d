"""Video file -> decoded RGB frames, every frame in order: decord as released, and PyAV where decord cannot; the
`FrameReader` every reader is, each refusing frames over the size limit."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..errors import VideoError
from .frame_times import WrongReader
from .probe import oversized_frame
from .sampling import VideoInfo

if TYPE_CHECKING:
    import av

log = logging.getLogger(__name__)
UNLIMITED = float("inf")


class FrameReader(Protocol):
    info: VideoInfo
    shareable: bool  # one instance may serve several decoding threads at once
    max_pixels: float  # a decoded frame larger than this is refused (a stream that grows past its headers)

    def read(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        """Yield the requested frames (sorted indices, repeats allowed) as HxWx3 uint8 RGB arrays."""
        ...

    def close(self) -> None: ...


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _decode_threads() -> int:
    return min(max(1, available_cores() - 1), 16)


@functools.cache
def _one_conversion_thread() -> dict[str, Any]:
    """PyAV 17 and later convert each frame on a thread per core unless told otherwise: readers run one per core
    already, and a conversion's threads cost more than they saved (docs/speed.md)."""
    import av

    return {"threads": 1} if int(av.__version__.split(".")[0]) >= 17 else {}


def rgb_frame(frame: av.VideoFrame, max_pixels: float, **resize: Any) -> np.ndarray:
    """A PyAV frame as an RGB array, refused before conversion if it is larger than `max_pixels`."""
    if frame.width * frame.height > max_pixels:
        raise oversized_frame(frame.width, frame.height, max_pixels)
    return frame.to_ndarray(format="rgb24", **resize, **_one_conversion_thread())


class DecordReader:
    """decord: what the released pipeline uses; its frames are the reference pixels."""

    batch = 8
    shareable = False  # a decord reader keeps its decoding position

    def __init__(self, path: str, max_pixels: float = UNLIMITED):
        import decord

        self._reader = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=_decode_threads())
        total = len(self._reader)
        if total < 1:
            raise VideoError(f"{os.path.basename(path)} contains no video frames.")
        first = self._reader[0].shape
        if len(first) != 3 or first[2] != 3:
            # decord mis-strides very narrow frames (widths 1-3, 8, ...: "(2000, 1, 96)"); PyAV reads them.
            raise WrongReader(f"decord decodes {first} instead of height x width x 3 RGB frames")
        height, width = first[:2]
        self.max_pixels = max_pixels
        self._reader.seek(0)
        self.info = VideoInfo(path, total, float(self._reader.get_avg_fps()), width, height, "decord")

    def read(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        for start in range(0, len(indices), self.batch):
            frames = self._reader.get_batch(list(indices[start:start + self.batch])).asnumpy()  # [B, H, W, 3]
            if frames.shape[1] * frames.shape[2] > self.max_pixels:
                raise oversized_frame(frames.shape[2], frames.shape[1], self.max_pixels)
            yield from frames

    def close(self) -> None:
        self._reader = None


class PyAVReader:
    """PyAV fallback, used when decord is not installed or cannot open the file."""

    shareable = True  # every read opens its own container

    def __init__(self, path: str, max_pixels: float = UNLIMITED):
        import av

        self._path, self.max_pixels = path, max_pixels
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
            frame_index, last = -1, None
            for frame in container.decode(stream):
                frame_index, last = frame_index + 1, frame
                if frame_index < wanted[position]:
                    continue
                rgb = rgb_frame(frame, self.max_pixels)
                while position < len(wanted) and wanted[position] == frame_index:
                    yield rgb
                    position += 1
                if position == len(wanted):
                    return
            # Containers can over-report their frame count: repeat the last decoded frame.
            if position < len(wanted) and last is not None:
                log.warning("%s: only %d frames decodable; repeating the last one", self._path, frame_index + 1)
                rgb = rgb_frame(last, self.max_pixels)
                while position < len(wanted):
                    yield rgb
                    position += 1

    def close(self) -> None:
        pass
