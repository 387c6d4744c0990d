"""The benchmark's instruments: peak memory above where measuring started, and a stopwatch."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import torch

from ..engine.steps import give_back_freed_memory


class PeakMemory:
    """Peak memory above the level when measuring started: resident memory of this process (sampled every
    5 ms), or the CUDA allocator's peak when the model is on a GPU."""

    def __init__(self, device: torch.device):
        self.device, self.process, self.peak = device, psutil.Process(), 0

    def _now(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device)
        return self.process.memory_info().rss

    @contextmanager
    def measure(self) -> Iterator[PeakMemory]:
        release_memory()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        baseline = self._now()
        self.peak, done = baseline, threading.Event()

        def sample() -> None:
            while not done.wait(0.005):
                self.peak = max(self.peak, self._now())

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            done.set()
            thread.join()
            self.peak = max(self.peak, self._now()) - baseline


def release_memory() -> None:
    """Give freed memory back to the OS, so one measurement does not start on another's leftovers."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    give_back_freed_memory()


@contextmanager
def stopwatch() -> Iterator[dict]:
    elapsed: dict[str, float] = {}
    start = time.perf_counter()
    try:
        yield elapsed
    finally:
        elapsed["s"] = time.perf_counter() - start
