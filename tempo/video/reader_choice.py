"""Which reader opens a file (decord, PyAV, intra frames for fast seek, sparse decoding for a long file), the plan it
is sampled by, and how many readers decode side by side."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable

from ..config import SamplingConfig
from ..errors import VideoError
from .readers import UNLIMITED, DecordReader, FrameReader, PyAVReader, available_cores
from .sampling import SamplingPlan, fast_seek_plan, uniform_plan
from .skipping_readers import IntraFrameReader, SparseReader

log = logging.getLogger(__name__)

PARALLEL_MIN_SECONDS = 100.0  # below this much video, one decoder is quicker than starting several
MAX_DECODE_WORKERS = 4


def is_long(plan: SamplingPlan) -> bool:
    """Long enough that sparse decoding and several decoders pay for their start-up."""
    return plan.duration >= PARALLEL_MIN_SECONDS


def decode_workers(plan: SamplingPlan) -> int:
    """Decoders to run side by side: one per core for long videos, a single one for short videos."""
    if not is_long(plan):
        return 1
    return max(1, min(available_cores(), MAX_DECODE_WORKERS))


def threads_per_worker(workers: int) -> int:
    """Decoding threads for each of `workers` side-by-side readers: the cores shared out, since more threads than
    cores only contend, and frame threads restart at every seek (docs/speed.md)."""
    return max(1, available_cores() // workers)


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
    if isinstance(reader, IntraFrameReader):
        return fast_seek_plan(reader.intra_frame_times, reader.info, sampling)
    return uniform_plan(reader.info, sampling)


def open_video(path: str | os.PathLike[str], fast_seek: bool = False, long_edge: int | None = None,
               decord: bool = True, max_pixels: float = UNLIMITED) -> FrameReader:
    """Open with decord, falling back to PyAV (or intra frames only, with PyAV, shrunk to `long_edge` as they are
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
    if not fast_seek:
        sparse = open_long(path, max_pixels)
        if sparse is not None:
            return sparse
    errors = []
    openers: dict[str, Callable[[], FrameReader]]
    if fast_seek:
        openers = {"IntraFrameReader": lambda: IntraFrameReader(path, long_edge, max_pixels)}
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
        except MemoryError:  # PyAV's ENOMEM is one too: the file may be fine, the memory it may take is not
            raise
        except Exception as exc:  # decoders raise many unrelated types for broken files
            errors.append(f"{reader_name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            continue
        if not (math.isfinite(reader.info.native_fps) and reader.info.native_fps > 0):
            raise VideoError(f"{name} does not declare a usable frame rate, so frames cannot be placed in time.")
        return reader
    log.info("could not open %s: %s", path, "; ".join(errors))
    raise VideoError(f"{name} is not a readable video (unknown format or damaged file).")
