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


def segment_stream(plan: SamplingPlan, readers: list[Callable[[], FrameReader]],
                   prepare: Callable[[int, list[np.ndarray]], Item],
                   timed: Callable[[str], contextlib.AbstractContextManager] = lambda name: contextlib.nullcontext(),
                   chunk: int = 4, reduce: Callable[[np.ndarray], np.ndarray] | None = None) -> Iterator[Item]:
    """`prepare(segment_index, frames)` for every segment in order, using one worker per reader factory;
    decoding is timed under `timed("decode")`. `reduce` takes each frame as it is decoded (timed under
    `timed("preprocess")`), so that a worker holds one decoded frame at a time, not a segment's."""
    chunks = [range(start, min(start + chunk, len(plan.segments))) for start in range(0, len(plan.segments), chunk)]
    workers = max(1, min(len(readers), len(chunks)))
    queues: list[queue.Queue] = [queue.Queue(maxsize=chunk) for _ in range(workers)]
    stop = threading.Event()
    first_out = threading.Event()  # the first segment was handed over (or its worker stopped)

    def put(worker: int, item: object) -> bool:
        while not stop.is_set():
            try:
                queues[worker].put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def work(worker: int) -> None:
        reader, segment = None, chunks[worker][0] if worker < len(chunks) else 0
        try:
            while worker and not first_out.wait(POLL_S):
                if stop.is_set():
                    return
            reader = readers[worker]()
            for number in range(worker, len(chunks), workers):
                segments = chunks[number]
                indices = [plan.frame_indices[i] for s in segments for i in plan.segments[s]]
                frames = iter(reader.read(indices))
                for segment in segments:
                    decoded = []
                    for _ in plan.segments[segment]:
                        with timed("decode"):
                            frame = next(frames, None)
                        if frame is None:
                            raise EOFError("the reader ran out of frames")
                        if reduce is not None:
                            with timed("preprocess"):
                                frame = reduce(frame)
                        decoded.append(frame)
                    item = prepare(segment, decoded)
                    if not put(worker, item):
                        return
                    first_out.set()
        except (TempoError, MemoryError, torch.OutOfMemoryError) as error:  # re-raised by the consumer, in order
            put(worker, _Failure(error))
        except Exception as error:  # a decoder failing part-way through the file: said plainly, detail logged
            log.debug("decoding failed at segment %d: %s: %s", segment, type(error).__name__, error)
            put(worker, _Failure(damaged(plan, segment)))
        finally:
            first_out.set()
            if reader is not None:
                reader.close()

    threads = [threading.Thread(target=work, args=(w,), name=f"tempo-decode-{w}", daemon=True)
               for w in range(workers)]
    for thread in threads:
        thread.start()
    try:
        for number, segments in enumerate(chunks):
            for _ in segments:
                item = queues[number % workers].get()
                if isinstance(item, _Failure):
                    raise item.error
                yield item
    finally:
        stop.set()
        for thread in threads:
            thread.join()
