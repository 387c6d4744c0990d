"""Time per part of a run (open, decode, preprocess, vision, compress, allocate, generate), added up across
threads and processes."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import defaultdict
from collections.abc import Iterator


class Timer:
    """Accumulates time per part of a run. Parts overlap when segments stream: decoding and preprocessing run on
    worker threads or in a decoding process (`alongside`: their totals add up those workers' time), while the
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
    def time(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[name] += time.perf_counter() - start
            if threading.get_ident() != self.owner:
                self.alongside.add(name)

    def add(self, totals: dict[str, float]) -> None:
        """Times measured elsewhere (a decoding process), alongside this one."""
        for name, seconds in totals.items():
            self.totals[name] += seconds
            self.alongside.add(name)

    def timings(self) -> dict[str, float]:
        """Seconds per part, then "other" (the caller's time in none: waiting for frames, hand-overs) and "total":
        the parts not `alongside` plus "other" add up to "total"."""
        total = time.perf_counter() - self.started
        timings = {part: round(seconds, 4) for part, seconds in self.totals.items()}
        serial = sum(seconds for part, seconds in self.totals.items() if part not in self.alongside)
        timings["other"] = round(max(0.0, total - serial), 4)
        timings["total"] = round(total, 4)
        return timings
