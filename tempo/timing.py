"""Time per pipeline stage, added up across threads and processes."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from typing import Iterator


class StageTimer:
    """Accumulates time per pipeline stage. Stages overlap when segments stream: decoding and preprocessing run
    on worker threads or in a decoding process (`alongside`: their totals add up those workers' time), while the
    compressor and the decoder run on the thread that made the timer, one after another."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.totals: dict[str, float] = defaultdict(float)
        self.alongside: set[str] = set()
        self.owner = threading.get_ident()

    def __setstate__(self, state: dict) -> None:  # in another process (a GPU worker), its caller owns it
        self.__dict__.update(state)
        self.owner = threading.get_ident()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[name] += time.perf_counter() - start
            if threading.get_ident() != self.owner:
                self.alongside.add(name)

    def add(self, totals: dict[str, float]) -> None:
        """Stage times measured elsewhere (a decoding process), alongside this one."""
        for name, seconds in totals.items():
            self.totals[name] += seconds
            self.alongside.add(name)

    def timings(self) -> dict[str, float]:
        """Seconds per stage, then "other" (the caller's time in no stage: waiting for frames, hand-overs) and
        "total": the stages not `alongside` plus "other" add up to "total"."""
        total = time.perf_counter() - self.started
        timings = {stage: round(seconds, 4) for stage, seconds in self.totals.items()}
        serial = sum(seconds for stage, seconds in self.totals.items() if stage not in self.alongside)
        timings["other"] = round(max(0.0, total - serial), 4)
        timings["total"] = round(total, 4)
        return timings
