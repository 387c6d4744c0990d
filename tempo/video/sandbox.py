"""Decoding a video in a child process that a server can kill, so that no file can take the server down.

The child opens the file with PyAV (deterministic on damaged files, where decord's threads are not; the same pixels
on sound ones), plans the sampling, decodes and preprocesses segment after segment (the same `prepare_segments` as
in-process decoding) and hands each segment's pixel rows over through a ring of shared-memory slots; the parent
copies a slot out and gives it back. The child runs under a data-memory limit (RLIMIT_DATA), and the parent kills
it when nothing comes out for `Limits.decode_stall_s` seconds, when its consumer stops (a cancelled request), or at
the end. A decoder that crashes, hangs or runs out of its memory becomes one plain sentence; the detail goes to the
log. Children come from a fork server that has imported the decoding code once, so each starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import logging
import multiprocessing
import os
import queue
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing import queues, resource_tracker, shared_memory

import numpy as np
import torch

from ..config import Limits, SamplingConfig
from ..errors import TempoError, VideoError
from ..timing import Timer
from .patches import PatchGeometry
from .reader_choice import open_video
from .sampling import SamplingPlan, VideoProbed
from .segments import PreparedSegment, prepare_segments, video_plan

log = logging.getLogger(__name__)
SLOTS = 4  # segments the child may decode ahead of the compressor
POLL_S = 0.05


# ------------------------------------------------------------------------------------------------ messages
# What the child tells the parent on the pipe, in order: Started, Planned, then SlotsMade (once) and PixelsSent for each
# segment, then Done; or, at any point, why it stopped. The parent adds Exited and Stalled for a child that stops
# talking.

@dataclass(frozen=True)
class Started:
    """Sent before the child's memory is limited, so that the queue's sending thread is made while it can be: a
    thread whose stack the limit refuses would lose every later message, and the parent would see a stall."""


@dataclass(frozen=True)
class Planned:
    probed: VideoProbed
    plan: SamplingPlan


@dataclass(frozen=True)
class SlotsMade:
    """The shared-memory ring the segments' pixels come through."""

    name: str
    slot_bytes: int


@dataclass(frozen=True)
class PixelsSent:
    """A segment's pixels are sent: in ring slot `slot` (`rows` is their shape), or in `rows` itself when slot is
    None; the rest of its `PreparedSegment` with them."""

    index: int
    slot: int | None
    rows: np.ndarray | tuple[int, ...]  # the pixels, or their shape when they are in a slot
    grid: tuple[int, int, int]
    thumbnail: np.ndarray
    shown: int


@dataclass(frozen=True)
class Done:
    totals: dict[str, float]  # the child's timings


@dataclass(frozen=True)
class Refused:
    error: TempoError  # what the user is told, as the readers put it


@dataclass(frozen=True)
class Failed:
    detail: str  # what the decoder raised, for the log
    memory: bool = False  # it ran out of its memory


@dataclass(frozen=True)
class Exited:
    code: int | None


@dataclass(frozen=True)
class Stalled:
    pass


Message = Started | Planned | SlotsMade | PixelsSent | Done | Refused | Failed | Exited | Stalled


def context() -> multiprocessing.context.ForkServerContext:
    """Multiprocessing through a fork server that has imported this module (so the decoders) and PyAV once: a child
    that loaded PyAV's libraries under its memory limit could be refused them, and would call the file unreadable."""
    ctx: multiprocessing.context.ForkServerContext = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__, "av"])
    return ctx


@contextlib.contextmanager
def without_main_script() -> Iterator[None]:
    """Start children that do not run the caller's main script again, as multiprocessing otherwise does in each
    (for app.py that is importing gradio anew: 2.5 s a video; for a script without a `__main__` guard, its whole
    work). The child's target lives in this module, so it needs nothing of `__main__`; a main module named
    `__main__` is one multiprocessing leaves alone."""
    main = sys.modules["__main__"]
    spec = main.__dict__.get("__spec__")
    main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)
    try:
        yield
    finally:
        main.__spec__ = spec


def start(process: multiprocessing.process.BaseProcess) -> None:
    with without_main_script():
        process.start()


def warm_up() -> None:
    """Start the fork server now (a server does at start-up), not at the first request."""
    child = context().Process(target=os.getpid)
    start(child)
    child.join()


class Ring:
    """The child's side of the shared slots: made at the first segment, sized by it; the parent unlinks it."""

    def __init__(self, results: queues.Queue[Message], free: queues.Queue[int], slot_bytes: int) -> None:
        self.memory = shared_memory.SharedMemory(create=True, size=SLOTS * slot_bytes)
        resource_tracker.unregister(self.memory._name, "shared_memory")  # type: ignore[attr-defined]  # the parent unlinks it, at once
        self.slots = np.ndarray((SLOTS, slot_bytes), np.uint8, self.memory.buf)
        self.free = free
        results.put(SlotsMade(self.memory.name, slot_bytes))

    def send(self, results: queues.Queue[Message], segment: PreparedSegment) -> None:
        assert segment.pixel_rows is not None  # a segment just decoded holds its pixels
        rows = segment.pixel_rows.numpy()
        if rows.nbytes > self.slots.shape[1]:  # a segment bigger than the first: by pipe
            results.put(PixelsSent(segment.index, None, rows, segment.grid, segment.thumbnail, segment.shown))
            return
        slot = self.free.get()
        self.slots[slot, :rows.nbytes] = rows.reshape(-1)
        results.put(PixelsSent(segment.index, slot, rows.shape, segment.grid, segment.thumbnail, segment.shown))


def _decode(path: str, sampling: SamplingConfig, geometry: PatchGeometry, limits: Limits,
            results: queues.Queue[Message], free: queues.Queue[int]) -> None:
    """The child: plan, then every segment, then its timings; or why it could not."""
    # PyAV's log level stays None (FFmpeg's messages dropped in C): any level routes FFmpeg's frame threads
    # through a Python callback that needs the GIL, and a damaged VP9 stream then deadlocks the decoder.
    results.put(Started())
    resource.setrlimit(resource.RLIMIT_DATA, (limits.decode_memory_bytes, limits.decode_memory_bytes))
    timer, ring = Timer(), None
    try:
        with timer.time("open"):
            reader = open_video(path, fast_seek=sampling.fast_seek, long_edge=sampling.long_edge, decord=False,
                                max_pixels=limits.max_frame_pixels)
            probed, plan = video_plan(reader, sampling)
        results.put(Planned(probed, plan))
        for segment in prepare_segments(path, reader, plan, sampling, geometry, timer):
            assert segment.pixel_rows is not None  # a segment just decoded holds its pixels
            ring = ring or Ring(results, free, segment.pixel_rows.numel())
            ring.send(results, segment)
        results.put(Done(dict(timer.totals)))
        free.get()  # the parent reads the last slots while this process lives; it ends it when done
    except TempoError as exc:
        results.put(Refused(exc))
    except MemoryError:
        results.put(Failed("MemoryError", memory=True))
    except BaseException as exc:  # noqa: BLE001 -- whatever the decoder raised, the parent says it plainly
        results.put(Failed(f"{type(exc).__name__}: {exc}"))


class SandboxedDecoder:
    """One video decoded in a child process: `probed` and `plan` once it opened the file, then `segments()`."""

    def __init__(self, path: str | os.PathLike, sampling: SamplingConfig, geometry: PatchGeometry, limits: Limits,
                 timer: Timer):
        self.path, self.limits, self.timer = os.fspath(path), limits, timer
        self.name = os.path.basename(self.path)
        ctx = context()
        self.results, self.free = ctx.Queue(), ctx.Queue()
        for slot in range(SLOTS):
            self.free.put(slot)
        self.ring: shared_memory.SharedMemory | None = None
        self.slots: np.ndarray | None = None
        self.process = ctx.Process(target=_decode, args=(self.path, sampling, geometry, limits, self.results,
                                                         self.free), name="tempo-decode", daemon=True)
        self.reached = "its first frames"
        with timer.time("open"):
            start(self.process)
            message = self._receive()
            if isinstance(message, Started):
                message = self._receive()
        if not isinstance(message, Planned):
            self.close()
            raise self._refusal(message)
        self.probed: VideoProbed = message.probed
        self.plan: SamplingPlan = message.plan

    def segments(self) -> Iterator[PreparedSegment]:
        """Every segment in order; the child is stopped when the consumer stops early."""
        try:
            while True:
                message = self._receive()
                if isinstance(message, SlotsMade):
                    self._attach(message)
                elif isinstance(message, PixelsSent):
                    yield self._segment(message)
                elif isinstance(message, Done):
                    self.timer.add(message.totals)
                    return
                else:
                    raise self._refusal(message)
        finally:
            self.close()

    def _attach(self, made: SlotsMade) -> None:
        self.ring = shared_memory.SharedMemory(name=made.name)
        self.ring.unlink()  # gone from /dev/shm now; its memory goes when both processes let go of it
        self.slots = np.ndarray((SLOTS, made.slot_bytes), np.uint8, self.ring.buf)

    def _segment(self, segment: PixelsSent) -> PreparedSegment:
        rows = segment.rows
        if segment.slot is not None:  # rows is the shape; the pixels are in the slot, copied out before it is reused
            assert self.slots is not None and isinstance(rows, tuple)  # the slots are made before the first segment
            count = int(np.prod(rows))
            rows = self.slots[segment.slot, :count].reshape(rows).copy()
            self.free.put(segment.slot)
        self.reached = f"{segment.index + 1} of {self.probed.num_segments} segments"
        return PreparedSegment(segment.index, torch.from_numpy(rows), segment.grid, segment.thumbnail, segment.shown)

    def _receive(self) -> Message:
        """The child's next message, waiting while it makes progress; a stall or an exit becomes a refusal."""
        started = time.monotonic()
        while True:
            try:
                return self.results.get(timeout=POLL_S)
            except queue.Empty:
                pass
            if not self.process.is_alive():
                try:  # it may have put its last words just before it ended
                    return self.results.get(timeout=POLL_S)
                except queue.Empty:
                    return Exited(self.process.exitcode)
            if time.monotonic() - started > self.limits.decode_stall_s:
                return Stalled()

    def _refusal(self, message: Message) -> TempoError:
        """One plain sentence for what stopped the child; the detail goes to the log."""
        if isinstance(message, Refused):
            return message.error
        log.info("decoding %s stopped (%s) after %s", self.path, message, self.reached)
        killed = isinstance(message, Exited) and message.code is not None and message.code < 0
        if killed or (isinstance(message, Failed) and message.memory):
            return VideoError(f"{self.name} needs more memory to decode than the "
                              f"{self.limits.decode_memory_bytes / 2**20:,.0f} MB a video may take here, "
                              f"or its decoder crashed, after {self.reached}.")
        if isinstance(message, Stalled):
            return VideoError(f"{self.name} stopped decoding after {self.reached}: nothing came out of the "
                              f"decoder for {self.limits.decode_stall_s:g} s.")
        return VideoError(f"{self.name} is damaged: decoding failed after {self.reached}.")

    def close(self) -> None:
        """Stop the child (at once: a cancelled request stops decoding now) and let go of its slots and queues."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.slots = None
        if self.ring is not None:
            self.ring.close()
            self.ring = None
        for channel in (self.results, self.free):
            channel.close()
            channel.join_thread()
