"""From a source's frames, at whatever rate it sends them, to the 2 frames per second the compressor reads: the
sampler, and the feed that reads a source on a thread of its own, at the pace its times say, while the watch
compresses. A source is any iterable of (seconds, frame): a frame is an RGB array or a PyAV frame, converted
only when it is sampled."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from ..errors import TempoError
from ..video.patches import fit_long_edge
from .errors import StreamError

log = logging.getLogger(__name__)

Frame = Any  # np.ndarray (RGB, [H, W, 3] uint8) or anything with PyAV's `to_ndarray(format="rgb24")`
QUEUE_FRAMES = 64  # sampled frames waiting for the compressor (32 s at 2 fps); the oldest leave when it is full
JOIN_S = 5.0
POLL_S = 0.25  # how often a waiting watch looks at its stop signal


def rgb(frame: Frame, long_edge: int, max_pixels: float) -> np.ndarray:
    """`frame` as an RGB array with its long edge fitted (the released first resize, frame by frame), refused
    before conversion when it is larger than `max_pixels`."""
    if isinstance(frame, np.ndarray):
        array = frame
    else:
        if frame.width * frame.height > max_pixels:
            raise StreamError(f"The stream's frames are {frame.width}×{frame.height}, over this server's "
                              f"{max_pixels / 1e6:.1f} megapixels a frame.")
        array = frame.to_ndarray(format="rgb24")
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise StreamError(f"A frame must be RGB, [height, width, 3] uint8 (got {array.dtype} {array.shape}).")
    if array.shape[0] * array.shape[1] > max_pixels:
        raise StreamError(f"The stream's frames are {array.shape[1]}×{array.shape[0]}, over this server's "
                          f"{max_pixels / 1e6:.1f} megapixels a frame.")
    return fit_long_edge(array[None], long_edge)[0]


class Sampler:
    """The 2-fps clock over frames at any rate: each tick (from the first frame's time) takes the frame nearest to
    it, so a camera's jittery 0.49 s and 0.51 s both land on their ticks. A frame is held over a silence of up to
    `hold_s`; after a longer one the clock restarts at the next frame, and the ticks in between are skipped."""

    def __init__(self, fps: float, hold_s: float = 2.0) -> None:
        self.step, self.hold_s = 1 / fps, hold_s
        self.origin: float | None = None
        self.ticks = 0
        self.previous: tuple[float, Frame] | None = None

    def add(self, t: float, frame: Frame) -> list[tuple[float, Frame]]:
        """The (tick time, frame) pairs that `frame`, taken at `t` seconds, completes."""
        previous = self.previous
        if previous is not None and t <= previous[0]:
            return []  # not after the frame before it: a repeated or reordered timestamp
        if self.origin is None or previous is not None and t - previous[0] > self.hold_s:
            self.origin, self.ticks = t, 0
        sampled = []
        origin = self.origin
        while (tick := origin + self.ticks * self.step) <= t + 1e-9:
            if previous is not None and tick - previous[0] < t - tick and previous[0] >= origin:
                sampled.append((tick, previous[1]))  # the frame before the tick is the nearer
            else:
                sampled.append((tick, frame))
            self.ticks += 1
        self.previous = (t, frame)
        return sampled


END = object()


class Feed:
    """A source read on its own thread: paced to its times (`speed` times real time; not paced: as fast as it
    decodes), sampled, fitted, and queued for the watch. Iterating gives (stream seconds, RGB frame); a source
    that fails, or sends nothing for `stall_s`, raises `StreamError` with its sentence."""

    def __init__(self, frames: Iterable[tuple[float, Frame]], fps: float, long_edge: int, max_pixels: float,
                 stall_s: float, paced: bool = True, speed: float = 1.0,
                 clock: Callable[[], float] = time.monotonic, halt: threading.Event | None = None) -> None:
        self.frames, self.paced, self.speed, self.clock, self.stall_s = frames, paced, speed, clock, stall_s
        self.halt = halt or threading.Event()  # set by the caller: iterating ends at once, however quiet the source
        self.sampler = Sampler(fps)
        self.convert = lambda frame: rgb(frame, long_edge, max_pixels)
        self.queue: queue.Queue = queue.Queue(maxsize=QUEUE_FRAMES)
        self.stop = threading.Event()
        self.origin: float | None = None  # the clock's reading at stream time 0 (set by the first frame)
        self.dropped = 0
        self.thread = threading.Thread(target=self._read, name="tempo-live-feed", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        first = None
        try:
            for t, frame in self.frames:
                if self.stop.is_set() or self.halt.is_set():
                    return
                if first is None:
                    first, origin = t, self.clock()
                    self.origin = origin
                at = (t - first) / self.speed
                if self.paced and self.stop.wait(max(0.0, origin + at - self.clock())):
                    return
                for tick, chosen in self.sampler.add(at, frame):
                    self._put((tick, self.convert(chosen)))
            self._put(END)
        except Exception as exc:  # the watch says what happened, in its own words where the source has them
            if not isinstance(exc, StreamError):
                log.info("live source failed", exc_info=True)
            self._put(exc)
        finally:
            close = getattr(self.frames, "close", None)
            if close is not None:
                close()  # this thread is the one iterating it, so it is the one that may close it

    def _put(self, item: object) -> None:
        """Queue `item`. A paced source never waits for the watch: when the watch is far behind, the oldest frame
        leaves. One that is not paced waits for room (nothing is lost, and nothing is late)."""
        while not self.stop.is_set() and not self.halt.is_set():
            try:
                self.queue.put(item, timeout=POLL_S) if not self.paced else self.queue.put_nowait(item)
                return
            except queue.Full:
                if not self.paced:
                    continue
                try:
                    self.queue.get_nowait()  # the watch is far behind: the oldest frame goes
                    self.dropped += 1
                except queue.Empty:
                    pass

    def __iter__(self) -> Iterator[tuple[float, np.ndarray]]:
        quiet_since = time.monotonic()
        while not self.halt.is_set():
            try:
                item = self.queue.get(timeout=POLL_S)
            except queue.Empty:
                if time.monotonic() - quiet_since > self.stall_s:
                    raise StreamError(f"The stream sent nothing for {self.stall_s:g} s, so the watch ended here; "
                                      "what was seen is kept.") from None
                continue
            quiet_since = time.monotonic()
            if item is END:
                return
            if isinstance(item, StreamError):
                raise item
            if isinstance(item, TempoError):  # a refusal with its own sentence (a redirect elsewhere, a bad file)
                raise StreamError(str(item)) from item
            if isinstance(item, Exception):
                raise StreamError(f"Reading the stream failed ({type(item).__name__}), so the watch ended here; "
                                  "what was seen is kept.") from item
            yield item

    def close(self) -> None:
        """Stop reading; the thread closes the source on its way out."""
        self.stop.set()
        self.thread.join(JOIN_S)
        if self.thread.is_alive():
            log.warning("the live source did not stop within %.0f s; its thread is left to end on its own", JOIN_S)
        while not self.queue.empty():
            self.queue.get_nowait()
