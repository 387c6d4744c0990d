"""Decode and preprocess segments on worker threads, delivered in order through bounded queues.

Each worker owns a reader and takes every `workers`-th chunk of consecutive segments, so decoding runs on
several cores while the compressor works, and no worker gets more than one chunk ahead: memory stays flat
however long the video is. The first segment comes first: the other workers start once it is out, so that its
decoder (and that decoder's own threads) has the cores to itself. Decoders and image resizing release the GIL,
so threads are enough.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from ..errors import TempoError, VideoError
from ..times import length
from .readers import FrameReader
from .sampling import SamplingPlan

log = logging.getLogger(__name__)
Item = TypeVar("Item")
POLL_S = 0.1


@dataclass
class _Failure:
    error: BaseException


def damaged(plan: SamplingPlan, segment: int) -> VideoError:
    """The one sentence for a file that decodes up to some point and no further."""
    return VideoError(f"The video is damaged: decoding failed {length(plan.span(segment)[0])} into it "
                      f"(segment {segment + 1} of {len(plan.segments)}).")


class _Decoding:
    """The workers of one `segment_stream`: each decodes its chunks of segments and hands them over through its own
    bounded queue, until the stream stops."""

    def __init__(self, plan: SamplingPlan, readers: list[Callable[[], FrameReader]],
                 prepare: Callable[[int, list[np.ndarray]], object],
                 timed: Callable[[str], contextlib.AbstractContextManager], chunk: int,
                 reduce: Callable[[np.ndarray], np.ndarray] | None) -> None:
        self.plan, self.readers, self.prepare, self.timed, self.reduce = plan, readers, prepare, timed, reduce
        self.chunks = [range(start, min(start + chunk, len(plan.segments)))
                       for start in range(0, len(plan.segments), chunk)]
        self.workers = max(1, min(len(readers), len(self.chunks)))
        self.queues: list[queue.Queue] = [queue.Queue(maxsize=chunk) for _ in range(self.workers)]
        self.stop = threading.Event()
        self.first_out = threading.Event()  # the first segment was handed over (or its worker stopped)

    def put(self, worker: int, item: object) -> bool:
        """`item` into the worker's queue, waiting for room; False when the stream stopped first."""
        while not self.stop.is_set():
            try:
                self.queues[worker].put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def work(self, worker: int) -> None:
        """One worker's chunks, in order; a failure is handed over in its place, for the consumer to raise."""
        reader, segment = None, self.chunks[worker][0] if worker < len(self.chunks) else 0
        try:
            while worker and not self.first_out.wait(POLL_S):
                if self.stop.is_set():
                    return
            reader = self.readers[worker]()
            for number in range(worker, len(self.chunks), self.workers):
                segments = self.chunks[number]
                frames = iter(reader.read([self.plan.frame_indices[i] for s in segments
                                           for i in self.plan.segments[s]]))
                for segment in segments:
                    if not self.put(worker, self.prepare(segment, self.decoded(frames, segment))):
                        return
                    self.first_out.set()
        except (TempoError, MemoryError, torch.OutOfMemoryError) as error:  # re-raised by the consumer, in order
            self.put(worker, _Failure(error))
        except Exception as error:  # a decoder failing part-way through the file: said plainly, detail logged
            log.debug("decoding failed at segment %d: %s: %s", segment, type(error).__name__, error)
            self.put(worker, _Failure(damaged(self.plan, segment)))
        finally:
            self.first_out.set()
            if reader is not None:
                reader.close()

    def decoded(self, frames: Iterator[np.ndarray], segment: int) -> list[np.ndarray]:
        """One segment's frames, taken from the reader's and each reduced as it comes."""
        decoded = []
        for _ in self.plan.segments[segment]:
            with self.timed("decode"):
                frame = next(frames, None)
            if frame is None:
                raise EOFError("the reader ran out of frames")
            if self.reduce is not None:
                with self.timed("preprocess"):
                    frame = self.reduce(frame)
            decoded.append(frame)
        return decoded


def segment_stream(plan: SamplingPlan, readers: list[Callable[[], FrameReader]],
                   prepare: Callable[[int, list[np.ndarray]], Item],
                   timed: Callable[[str], contextlib.AbstractContextManager] = lambda name: contextlib.nullcontext(),
                   chunk: int = 4, reduce: Callable[[np.ndarray], np.ndarray] | None = None) -> Iterator[Item]:
    """`prepare(segment_index, frames)` for every segment in order, using one worker per reader factory;
    decoding is timed under `timed("decode")`. `reduce` takes each frame as it is decoded (timed under
    `timed("preprocess")`), so that a worker holds one decoded frame at a time, not a segment's."""
    decoding = _Decoding(plan, readers, prepare, timed, chunk, reduce)
    threads = [threading.Thread(target=decoding.work, args=(w,), name=f"tempo-decode-{w}", daemon=True)
               for w in range(decoding.workers)]
    for thread in threads:
        thread.start()
    try:
        for number, segments in enumerate(decoding.chunks):
            for _ in segments:
                item = decoding.queues[number % decoding.workers].get()
                if isinstance(item, _Failure):
                    raise item.error
                yield item
    finally:
        decoding.stop.set()
        for thread in threads:
            thread.join()
