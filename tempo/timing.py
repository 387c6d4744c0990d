"""Time per pipeline stage, added up across threads and processes."""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from typing import Iterator


class StageTimer:
    """Accumulates time per pipeline stage. Stages overlap when segments stream: decoding and preprocessing run
    on worker threads (their totals add up the workers' time), while the compressor runs on the caller's."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.totals: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[name] += time.perf_counter() - start

    def add(self, totals: dict[str, float]) -> None:
        """Stage times measured elsewhere (a decoding process)."""
        for name, seconds in totals.items():
            self.totals[name] += seconds
