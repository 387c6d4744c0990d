"""Video file -> decoded RGB frames: decord as released, PyAV where decord cannot, and the sparse and key-frame
readers for long videos."""

from __future__ import annotations

import functools
import logging
import math
import os
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ..config import SamplingConfig
from ..errors import VideoError
from .frame_times import FrameTimes, WrongReader
from .probe import oversized_frame
from .sampling import SamplingPlan, VideoInfo, keyframe_plan, long_edge_size, uniform_plan

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


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _decode_threads() -> int:
    return min(max(1, _available_cores() - 1), 16)


@functools.cache
def _one_conversion_thread() -> dict[str, Any]:
    """PyAV 17 and later convert each frame on a thread per core unless told otherwise: readers run one per core
    already, and a conversion's threads cost more than they saved (docs/speed.md)."""
    import av

    return {"threads": 1} if int(av.__version__.split(".")[0]) >= 17 else {}


def _rgb(frame: av.VideoFrame, max_pixels: float, **resize: Any) -> np.ndarray:
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
                rgb = _rgb(frame, self.max_pixels)
                while position < len(wanted) and wanted[position] == frame_index:
                    yield rgb
                    position += 1
                if position == len(wanted):
                    return
            # Containers can over-report their frame count: repeat the last decoded frame.
            if position < len(wanted) and last is not None:
                log.warning("%s: only %d frames decodable; repeating the last one", self._path, frame_index + 1)
                rgb = _rgb(last, self.max_pixels)
                while position < len(wanted):
                    yield rgb
                    position += 1

    def close(self) -> None:
        pass


class KeyframeReader(PyAVReader):
    """Fast seek: the decoder skips every frame that is not a key frame. `read` takes key-frame ordinals.

    With `long_edge`, frames come out already shrunk to `long_edge_size` by FFmpeg's bicubic scaler, in the same
    pass as the colour conversion: converting full-size frames and then resizing them with PIL took over half of
    a fast seek. Its pixels differ slightly from PIL's, which fast seek's approximate sampling can afford."""

    def __init__(self, path: str, long_edge: int | None = None, max_pixels: float = UNLIMITED):
        super().__init__(path, max_pixels)
        import av

        self.frame_size = long_edge_size(self.info.width, self.info.height, long_edge) if long_edge else None

        with av.open(path) as container:
            stream = container.streams.video[0]
            start = stream.start_time or 0
            self.pts = sorted(p.pts for p in container.demux(stream) if p.is_keyframe and p.pts is not None)
            self.keyframe_times = [float((pts - start) * stream.time_base) for pts in self.pts]
        if not self.pts:
            raise VideoError(f"{os.path.basename(path)} has no key frames to seek to.")

    def read(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        import av

        ordinal: dict[int | None, int] = {pts: i for i, pts in enumerate(self.pts)}  # looked up by a frame's pts
        with av.open(self._path) as container:
            stream = container.streams.video[0]
            stream.codec_context.skip_frame = "NONKEY"
            frames: Iterator[av.VideoFrame] = iter(())
            last = None
            for index in indices:
                if index != last:
                    # Seeking costs one key frame; reading on through a whole GOP of skipped packets costs more,
                    # unless the wanted key frame is the very next one.
                    if last is None or index != last + 1:
                        container.seek(self.pts[index], stream=stream)
                        frames = container.decode(stream)
                    rgb = self._next_keyframe(frames, ordinal, index)
                    last = index
                yield rgb

    def _next_keyframe(self, frames: Iterator[av.VideoFrame], ordinal: dict[int | None, int],
                        index: int) -> np.ndarray:
        for frame in frames:
            found = ordinal.get(frame.pts)
            if found == index:
                if self.frame_size is None:
                    return _rgb(frame, self.max_pixels)
                width, height = self.frame_size
                return _rgb(frame, self.max_pixels, width=width, height=height, interpolation="BICUBIC")
            if found is not None and found > index:
                break
        raise VideoError(f"{os.path.basename(self._path)}: key frame {index} could not be decoded.")


class SparseReader(PyAVReader):
    """For long videos: decodes each wanted frame plus only the frames others depend on. Frames nothing refers
    to (most B-frames) are skipped between samples, and where a key frame lies between two samples the decoder
    seeks to it rather than decoding on to it (nothing after a key frame refers to what came before). The frames
    it returns are the ones the exact reader returns, matched by presentation time (`FrameTimes`)."""

    def __init__(self, path: str, max_pixels: float = UNLIMITED):
        super().__init__(path, max_pixels)
        self.times = FrameTimes.open(path, self.info.total_frames)
        self.threads = 0  # decoding threads per read: 0 lets FFmpeg choose; 1 where a read runs on every core

    def read(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        import av

        times = self.times.upto(indices[-1])
        wanted = [times[i] for i in indices]
        position = 0
        with av.open(self._path) as container:
            stream = container.streams.video[0]
            if self.threads == 1:
                stream.thread_type = "NONE"
            else:
                stream.thread_type, stream.thread_count = "AUTO", self.threads
            while position < len(wanted):
                container.seek(wanted[position], stream=stream)
                position, sought = yield from self._run(container, stream, wanted, position)
                if not sought and position < len(wanted):
                    raise VideoError(f"{os.path.basename(self._path)}: frame {indices[position]} could not be "
                                     f"decoded.")

    def _run(self, container: av.container.InputContainer, stream: av.VideoStream, wanted: list[int],
             position: int) -> Generator[np.ndarray, None, tuple[int, bool]]:
        """Wanted frames from `position` on, decoding from where the container was sought to, until the end of the
        file or until seeking to a key frame reaches the next wanted frame sooner; returns how far it got and
        whether it stopped to seek."""
        codec = stream.codec_context
        pending = set(wanted[position:])
        decoded: dict[int, np.ndarray] = {}
        for packet in container.demux(stream):
            # Set per packet: the decoder threads take it with the packet they decode.
            codec.skip_frame = "DEFAULT" if packet.pts in pending else "NONREF"
            for frame in packet.decode():
                if frame.pts in pending:
                    pending.discard(frame.pts)
                    decoded[frame.pts] = _rgb(frame, self.max_pixels)
            delivered = False
            while position < len(wanted) and wanted[position] in decoded:
                pts = wanted[position]
                position += 1
                last_use = position == len(wanted) or wanted[position] != pts  # a frame can be asked twice
                yield decoded.pop(pts) if last_use else decoded[pts]
                delivered = True
            if position == len(wanted):
                return position, False
            if delivered and self._seek_ahead(wanted[position - 1], wanted[position], packet.dts):
                return position, True
        return position, False

    def _seek_ahead(self, done: int, following: int, decoding: int | None) -> bool:
        """Whether a key frame lies after the frame just returned (`done`) and at or before the `following` one,
        not yet reached by the decoder (at `decoding`, a decoding time): seeking to it skips what lies between."""
        key = self.times.keyframe_at_or_before(following)
        return key is not None and key > done and decoding is not None and decoding < key

    def close(self) -> None:
        pass  # the workers share this reader; its FrameTimes closes its file at the end of the packets


PARALLEL_MIN_SECONDS = 100.0  # below this much video, one decoder is quicker than starting several
MAX_DECODE_WORKERS = 4


def is_long(plan: SamplingPlan) -> bool:
    """Long enough that sparse decoding and several decoders pay for their start-up."""
    return plan.duration >= PARALLEL_MIN_SECONDS


def decode_workers(plan: SamplingPlan) -> int:
    """Decoders to run side by side: one per core for long videos, a single one for short videos."""
    if not is_long(plan):
        return 1
    return max(1, min(_available_cores(), MAX_DECODE_WORKERS))


def threads_per_worker(workers: int) -> int:
    """Decoding threads for each of `workers` side-by-side readers: the cores shared out, since more threads than
    cores only contend, and frame threads restart at every seek (docs/speed.md)."""
    return max(1, _available_cores() // workers)


def open_sparse(path: str | os.PathLike[str], max_pixels: float = UNLIMITED) -> SparseReader | None:
    """A SparseReader where the file's frame times identify its frames, else None (decode every frame)."""
    try:
        return SparseReader(os.fspath(path), max_pixels)
    except Exception as exc:  # unusual timestamps or a PyAV failure: the exact reader still works
        log.info("sparse decoding unavailable for %s (%s); decoding every frame", path, exc)
        return None


def open_long(path: str, max_pixels: float = UNLIMITED) -> SparseReader | None:
    """A SparseReader for a file whose header says it lasts PARALLEL_MIN_SECONDS or more, where its frame times
    identify its frames; else None. Its first segment then waits for no reading of the whole file (decord's index
    of an hour takes 0.35 s, all its frame times 0.4 s), and its frame count and rate are decord's: the header's
    count, checked against the packets, and the same average rate."""
    try:
        import av
    except ImportError:  # PyAV is optional where decord reads (the GPU check's machine has no room for it)
        return None
    try:
        with av.open(path) as container:
            stream = container.streams.video[0]
            frames, rate = stream.frames, stream.average_rate
    except Exception:  # not a video PyAV can open: the other readers say why
        return None
    if not frames or not rate or frames / float(rate) < PARALLEL_MIN_SECONDS:
        return None
    return open_sparse(path, max_pixels)


def plan_sampling(reader: FrameReader, sampling: SamplingConfig) -> SamplingPlan:
    if isinstance(reader, KeyframeReader):
        return keyframe_plan(reader.keyframe_times, reader.info, sampling)
    return uniform_plan(reader.info, sampling)


def open_video(path: str | os.PathLike[str], keyframes_only: bool = False, long_edge: int | None = None,
               decord: bool = True, max_pixels: float = UNLIMITED) -> FrameReader:
    """Open with decord, falling back to PyAV (or key frames only, with PyAV, shrunk to `long_edge` as they are
    decoded); raise VideoError with a readable reason when neither can read it. Reading a frame larger than
    `max_pixels` raises InputError. A long file opens with the SparseReader where it can (`open_long`).

    `decord=False` opens with PyAV alone: the same pixels on every file the tests hold, and, unlike decord's
    threaded decoder, the same outcome every time on a damaged one (what a server needs)."""
    path = os.fspath(path)
    name = os.path.basename(path) or path
    if not os.path.exists(path):
        raise VideoError(f"Video file not found: {path}")
    if os.path.isdir(path):
        raise VideoError(f"{path} is a directory, not a video file.")
    if os.path.getsize(path) == 0:
        raise VideoError(f"{name} is empty (0 bytes).")
    if not keyframes_only:
        sparse = open_long(path, max_pixels)
        if sparse is not None:
            return sparse
    errors = []
    openers: dict[str, Callable[[], FrameReader]]
    if keyframes_only:
        openers = {"KeyframeReader": lambda: KeyframeReader(path, long_edge, max_pixels)}
    else:
        openers = {"DecordReader": lambda: DecordReader(path, max_pixels),
                   "PyAVReader": lambda: PyAVReader(path, max_pixels)}
    if not decord:
        openers.pop("DecordReader", None)
    for reader_name, opener in openers.items():
        try:
            reader = opener()
        except VideoError:
            raise
        except ImportError as exc:
            errors.append(f"{reader_name}: not installed ({exc})")
            continue
        except Exception as exc:  # decoders raise many unrelated types for broken files
            errors.append(f"{reader_name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        if not (math.isfinite(reader.info.native_fps) and reader.info.native_fps > 0):
            raise VideoError(f"{name} does not declare a usable frame rate, so frames cannot be placed in time.")
        return reader
    log.info("could not open %s: %s", path, "; ".join(errors))
    raise VideoError(f"{name} is not a readable video (unknown format or damaged file).")
