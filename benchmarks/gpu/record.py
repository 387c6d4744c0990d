"""The GPU check's sizes (on the GPU, or a CPU dry run) and its record: parts run in order within the budget."""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.gpu import aoti_probe
from benchmarks.gpu.checkpoint import TEMPO_6B, TINY, Shapes

log = logging.getLogger("gpu-check")


@dataclass(frozen=True)
class Sizes:
    """How big a check is: the model's shapes, the videos, the answers and how often each is repeated."""

    shapes: Shapes
    device: str
    max_frames: int
    frame_size: tuple[int, int]  # the synthetic videos' frames (w, h), before the released resizes
    answer_tokens: int
    repeats: int
    micro_batches: tuple[int, ...]
    conformance_cases: tuple[str, ...] | None  # None: every case
    budget_s: float  # parts that would start after this are skipped
    build_until_s: float  # compiled packages that would start building after this are skipped
    loader: tuple[str, int, tuple[str, ...], int]  # the loader part's sizes, layers, variants, processes at once


# On a GPU the loader part builds 3 packages at Tempo-6B's layer sizes (about 8 s each on an H200) and runs its 6
# variants 4 at a time (2-3 minutes, most of it processes starting); the parts after it took 4-5 minutes before.
# No part starts after 8 minutes and no package is built after 7, so that a call of 10 minutes ends with its JSON.
GPU = Sizes(TEMPO_6B, "cuda", 1024, (640, 360), 64, 3, (1, 4, 8, 16, 32), None, 480.0, 420.0,
            ("6b", 36, tuple(aoti_probe.VARIANTS), 4))
DRY_RUN = Sizes(TINY, "cpu", 64, (160, 90), 8, 1, (1, 4), ("shapes_red_circle",), 900.0, 900.0,
                ("tiny", 2, ("plain", "once"), 2))
NEEDED_BY_EVERY_PART = frozenset({"environment", "load", "videos", "warm_up", "hour"})
NEEDED_BY = {"compiled": frozenset({"loader"})}  # the compiled part loads its packages as the loader part chose


class Check:
    """The figures so far, saved after every part; parts run in order until the time budget is spent."""

    def __init__(self, sizes: Sizes, out: Path, only: frozenset[str] = frozenset()):
        self.sizes, self.out, self.only = sizes, out, only
        self.started = time.perf_counter()
        self.figures: dict = {"device": None, "dry_run": sizes is DRY_RUN, "parts": {}, "errors": {}}

    def save(self) -> None:
        self.figures["elapsed_s"] = round(time.perf_counter() - self.started, 1)
        (self.out / "gpu_check.json").write_text(json.dumps(self.figures, indent=2, default=str) + "\n")

    def skips(self, name: str) -> str | None:
        """Why a part does not run, or None when it runs."""
        needed = set(NEEDED_BY_EVERY_PART).union(*(NEEDED_BY.get(part, ()) for part in self.only))
        if self.only and name not in self.only | needed:
            return "skipped: not in --only"
        elapsed = time.perf_counter() - self.started
        if elapsed > self.sizes.budget_s:
            return f"skipped: out of time ({elapsed:.0f} s of the {self.sizes.budget_s:.0f} s budget spent)"
        return None

    def run(self, name: str, work: Callable[[], dict]) -> dict | None:
        """A part's figures go under parts[name] and are saved; a skip or failure is recorded, not raised."""
        skipped = self.skips(name)
        if skipped:
            log.warning("%s: %s", name, skipped)
            self.figures["errors"][name] = skipped
            self.save()
            return None
        log.info("part %s (at %.1f s)", name, time.perf_counter() - self.started)
        begun = time.perf_counter()
        try:
            figures = work()
        except Exception as exc:  # the next part still runs; the record says what broke
            log.error("part %s failed: %s", name, exc)
            self.figures["errors"][name] = "".join(traceback.format_exception(exc))[-3000:]
            figures = None
        self.figures["parts"][name] = {**(figures or {}), "part_s": round(time.perf_counter() - begun, 2)}
        self.save()
        return figures
