"""What runs on the accelerator, and how long it asks for.

On a ZeroGPU Space each function runs under `spaces.GPU`, decorated at start-up as ZeroGPU requires, with a
reservation from `gpu_seconds`; what it returns is a picklable CPU object. Elsewhere `spaces.GPU` hands the
functions back as they are, and they run in the serving process.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Iterator

import spaces

from tempo import analysis
from tempo.cache import VideoCache
from tempo.config import RunConfig
from tempo.events import Event, Finished
from tempo.model import TempoModel
from tempo.pipeline import run


def gpu_seconds(video: str, question: str, config: RunConfig, *other: object, answers: int = 1) -> int:
    """ZeroGPU reservation for one request: start-up plus time per sampled frame (Tempo-6B on one GPU), plus a
    few seconds per answer beyond the first (a comparison's second, a budget sweep's)."""
    return int(20 + 0.08 * config.sampling.max_frames + 8 * (answers - 1))


def run_on_device(model: TempoModel, cache: VideoCache, video: str, question: str,
                  config: RunConfig) -> Iterator[Event]:
    """One request's events."""
    yield from run(model, video, question, config, cache)


def compare_on_device(model: TempoModel, cache: VideoCache, video: str, question: str, config: RunConfig,
                      other: RunConfig) -> tuple[Finished, Finished]:
    """Both allocations of one compression, answered."""
    compressed = analysis.compression(model, video, question, config, cache)
    return analysis.reanswer(model, compressed, config), analysis.reanswer(model, compressed, other)


def sweep_on_device(model: TempoModel, cache: VideoCache, video: str, question: str,
                    config: RunConfig) -> list[Finished]:
    """`config`'s strategy at a range of budgets, each answered."""
    return analysis.budget_sweep(model, analysis.compression(model, video, question, config, cache), config)


def relevance_on_device(model: TempoModel, cache: VideoCache, video: str, question: str,
                        config: RunConfig) -> list[float]:
    """The compressor's relevance per segment (from the cache when the question was asked before)."""
    return analysis.compression(model, video, question, config, cache).relevance


@dataclass(frozen=True)
class Device:
    """The model's work, each function taking (video, question, config[, other config])."""

    run: Callable[..., Iterator[Event]]
    compare: Callable[..., tuple[Finished, Finished]]
    sweep: Callable[..., list[Finished]]
    relevance: Callable[..., list[float]]


def on_device(model: TempoModel, cache: VideoCache) -> Device:
    """`model`'s work with `cache`, each function under `spaces.GPU` (inert off ZeroGPU)."""
    def gpu(work: Callable, answers: int = 1) -> Callable:
        duration = functools.partial(gpu_seconds, answers=answers)
        return spaces.GPU(duration=duration)(functools.partial(work, model, cache))

    return Device(gpu(run_on_device), gpu(compare_on_device, answers=2),
                  gpu(sweep_on_device, answers=analysis.SWEEP_BUDGETS), gpu(relevance_on_device))
