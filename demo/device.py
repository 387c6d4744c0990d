"""What runs on the accelerator, and how long it asks for.

One function does the model's work for every kind of request (an answer, a comparison, a budget sweep, a
compression alone): the accelerator's half of a `tempo.engine.Job`. On a ZeroGPU Space it runs under `spaces.GPU`
in a forked worker, which gets the job's pixels and gives back CPU data only, so the per-video cache stays in the
serving process and is reused by every request. Elsewhere `spaces.GPU` hands the function back as it is and it runs
in this process, on the decoding stream itself.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import gradio as gr
import spaces
from spaces.config import Config as SpacesConfig

from tempo.engine import Job, execute
from tempo.events import Event
from tempo.model import TempoModel

from .refusals import refusal

# Dense bf16 TFLOP/s and memory TB/s from data sheets, to carry figures measured on one GPU to another. ZeroGPU's
# default size is half an RTX Pro 6000 Blackwell: half of its 504 TFLOP/s (the workstation card's, as published by
# resellers; NVIDIA's sheet gives only sparse FP4) and of its 1.792 TB/s. An estimate until a Space measures itself.
DATA_SHEETS = {"NVIDIA H200": (989.0, 4.8), "NVIDIA H100 80GB HBM3": (989.0, 3.35)}
ZEROGPU_HALF_RTX_PRO_6000 = (504.0 / 2, 1.792 / 2)
MARGIN = 1.25  # the factors are estimates: a reservation that falls short ends the visitor's request
# How far a decoding step's fixed cost (kernel launches and their minimum time, not bytes) may move on another
# architecture: the two Hopper cards agree within 5 %, but nothing measured says how Blackwell's half card does.
FIXED_UNCERTAINTY = 0.5
RENAMED_KEYS = {"phases": "parts", "phase_s": "part_s", "stages": "timings"}  # GPU check JSON: old key -> key now


def current_keys(figures: object) -> Any:
    """GPU check figures with a file's keys from before the rename (`RENAMED_KEYS`) read as they are now."""
    if isinstance(figures, dict):
        return {RENAMED_KEYS.get(key, key): current_keys(value) for key, value in figures.items()}
    return figures


@dataclass(frozen=True)
class StepFit:
    """A generated token's time as a fixed cost per step plus the bytes it reads (the decoder's weights and the
    hour's KV cache) over the memory bandwidth it reaches, fitted on the GPU check's figures from several cards."""

    fixed_s: tuple[float, ...]  # each card's step time less its bytes' time
    bytes: float  # read per step
    efficiency: float  # measured bandwidth over the data sheet's (where a check measured it)

    @classmethod
    def fitted(cls, runs: Sequence[dict]) -> StepFit:
        """From GPU check figures (each from a GPU in `DATA_SHEETS`); the bytes and the bandwidth's efficiency from
        the runs that measured them (the compiled part's floor, the environment's bandwidth)."""
        runs = [current_keys(run) for run in runs]
        floors = [run["parts"].get("compiled", {}).get("floor") for run in runs]
        floor = next(f for f in floors if f)
        read = 1e9 * (floor["decoder_weights_gb"] + floor["kv_cache_gb"])
        measured = [(run["parts"]["environment"]["memory_gb_s"] / 1e3, DATA_SHEETS[run["device"]][1])
                    for run in runs if run["parts"]["environment"].get("memory_gb_s")]
        efficiency = min(got / sheet for got, sheet in measured)
        fixed = tuple(run["parts"]["hour"]["timings"]["per_token"] - read / (
            DATA_SHEETS[run["device"]][1] * 1e12 * efficiency) for run in runs)
        return cls(tuple(round(f, 5) for f in fixed), read, round(efficiency, 3))

    def seconds(self, bandwidth_tb_s: float) -> tuple[float, float, float]:
        """(low, central, high) seconds per token at `bandwidth_tb_s` (a data sheet's): the fixed cost's mean moved
        by `FIXED_UNCERTAINTY` either way, the bytes at the fitted efficiency."""
        streamed = self.bytes / (bandwidth_tb_s * 1e12 * self.efficiency)
        fixed = sum(self.fixed_s) / len(self.fixed_s)
        return (streamed + fixed * (1 - FIXED_UNCERTAINTY), streamed + fixed,
                streamed + max(self.fixed_s) * (1 + FIXED_UNCERTAINTY))


@dataclass(frozen=True)
class ZeroGpu:
    """ZeroGPU as the hub's page (https://huggingface.co/docs/hub/spaces-zerogpu) described it when `read`: its
    sizes (name, what it is, GB of GPU memory, how many times its seconds count against a visitor's day), the daily
    GPU minutes per kind of visitor, and the torch and Python versions it runs."""

    read: str = "2026-11-26"
    sizes: tuple[tuple[str, str, int, float], ...] = (
        ("large", "half an RTX Pro 6000 Blackwell (the default)", 48, 1.0),
        ("xlarge", "a whole RTX Pro 6000 Blackwell", 96, 2.0))
    daily_minutes: tuple[tuple[str, float], ...] = (("anonymous", 2.0), ("free", 5.0), ("pro", 40.0))
    torch: tuple[str, ...] = ("2.8.0", "2.9.1", "2.10.0", "2.11.0")
    python: tuple[str, ...] = ("3.10.13", "3.12.12")

    def counted(self, size: str) -> float:
        """How many times a second on `size` counts against a visitor's daily minutes."""
        return next(factor for name, _, _, factor in self.sizes if name == size)

    def daily_seconds(self, visitor: str) -> float:
        return 60 * dict(self.daily_minutes)[visitor]


ZEROGPU = ZeroGpu()


@dataclass(frozen=True)
class GpuCost:
    """GPU seconds for Tempo-6B on ZeroGPU's default size, fitted (`fitted`) from the GPU check's figures on two
    cards (benchmarks/results/gpu_check-h100.json, gpu_check-h200-4223d31.json): compute-bound parts scaled by bf16
    throughput from the slower card, each generated token by `StepFit` (a fixed cost per step plus bytes over
    bandwidth), with `MARGIN` on top. `reserved` is what a request asks for; `used`, what it is expected to be
    charged (the fit without the margin, for the tokens the answers really take)."""

    # A call's start: its inputs unpickled, the weights onto the GPU and the first request's warm-up: the larger
    # cold call's excess over a warm one (H100 5.14 s, H200 4.62 s), rounded up to a tenth.
    start: float = 5.2
    segment: float = 0.09  # the vision tower and the compressor over one 8-frame segment
    answer: float = 1.638  # the allocation and the decoder's prefill of one answer (~7k memory tokens)
    token: float = 0.0225  # one generated token
    size: str = "large"  # the ZeroGPU size asked for: Tempo-6B peaks at 20 GB, inside its 48

    @property
    def cap(self) -> float:
        """The most one request reserves: an anonymous visitor's whole day at this size (ZeroGPU starts a call only
        when the seconds left cover its reservation)."""
        return ZEROGPU.daily_seconds("anonymous") / ZEROGPU.counted(self.size)

    def reserved(self, segments: int, answers: int, max_new_tokens: int) -> int:
        """The reservation for compressing `segments` and `answers` answers of up to `max_new_tokens` in all."""
        estimate = self.start + self.segment * segments + self.answer * answers + self.token * max_new_tokens
        return math.ceil(min(self.cap, estimate))

    def used(self, segments: int, answers: int, tokens: int) -> float:
        """The GPU seconds such a request is expected to take when its answers are `tokens` long in all."""
        return self.start + (self.segment * segments + self.answer * answers + self.token * tokens) / MARGIN

    def questions_a_day(self, visitor: str = "anonymous", segments: int = 128, answer_tokens: int = 64,
                        max_new_tokens: int = 512) -> int:
        """First questions about a video of `segments` (an hour: 128) that a `visitor` ("anonymous", "free" or
        "pro") can ask in a day, each answered in `answer_tokens` under a `max_new_tokens` reservation: a call
        starts while the seconds left cover its reservation, and is charged what it uses, both counted at this
        size's rate."""
        left, asked, rate = ZEROGPU.daily_seconds(visitor), 0, ZEROGPU.counted(self.size)
        if self.used(segments, 1, answer_tokens) > self.reserved(segments, 1, max_new_tokens):
            return 0  # each call would be ended before its answer
        while left >= self.reserved(segments, 1, max_new_tokens) * rate:
            left -= self.used(segments, 1, answer_tokens) * rate
            asked += 1
        return asked

    @classmethod
    def fitted(cls, runs: Sequence[dict]) -> GpuCost:
        """The costs GPU checks' figures give (`runs`: their JSONs, each from a GPU in `DATA_SHEETS`)."""
        half_flops, half_bandwidth = ZEROGPU_HALF_RTX_PRO_6000
        runs = [current_keys(run) for run in runs]

        def compute(run: dict, seconds: float) -> float:
            return seconds * DATA_SHEETS[run["device"]][0] / half_flops * MARGIN

        hours = [(run, run["parts"]["hour"]) for run in runs]
        segment = max(compute(run, (hour["timings"]["vision"] + hour["timings"]["compress"]) / hour["segments"])
                      for run, hour in hours)
        answer = max(compute(run, hour["timings"]["allocate"] + hour["timings"]["prefill"]) for run, hour in hours)
        _, central, _ = StepFit.fitted(runs).seconds(half_bandwidth)
        # The start is not carried to the half card: it is mostly host work and the copy over PCIe, not bf16 compute.
        excess = max(run["parts"]["cold_call"]["cold_minus_warm_s"] for run in runs if "cold_call" in run["parts"])
        return cls(start=math.ceil(round(10 * excess, 6)) / 10, segment=round(segment, 3), answer=round(answer, 3),
                   token=round(central * MARGIN, 4))


COST = GpuCost()


def gpu_seconds(job: Job) -> int:
    """The reservation for `job`: what it compresses (nothing when the compression is cached) and what it answers
    (each answer's prefill and up to its max new tokens, at the measured time per token), within the cap."""
    tokens = sum(config.generation.max_new_tokens for config in job.answer_configs)
    return COST.reserved(job.to_compress, len(job.answer_configs), tokens)


def on_accelerator(model: TempoModel, job: Job) -> Iterator[Event]:
    """The accelerator's half of `job`. Refusals become the visitor's message here, where they are raised."""
    try:
        yield from execute(model, job)
    except gr.Error:
        raise
    except Exception as exc:
        raise refusal(exc) from None


# Requests that use the model at once. On ZeroGPU every GPU call gets a worker and a GPU slice of its own, so
# visitors need not wait for each other; what they share is the serving process, which decodes each video in a
# child process of its own and holds each video's pixels (about 0.4 GB at 1,024 frames) beside its 2 GB cache:
# four at once keep that under 4 GB. Elsewhere one model on one device serves one request at a time, which keeps
# each request's own latency (requests at once would only share the device).
ZEROGPU_CONCURRENCY = 4


@dataclass(frozen=True)
class Device:
    """How a request reaches the model: `accelerate` runs a job; `remote` says it runs in another process (a
    ZeroGPU worker), so the video is read before it is called and the cache keeps pixels; `concurrency` is how many
    requests may use the model at once."""

    accelerate: Callable[[Job], Iterator[Event]]
    remote: bool
    concurrency: int = 1

    @property
    def place(self) -> str | None:
        """Where the model runs, for the settings table's defaults that depend on it (`tempo.settings.PLACES`)."""
        return "zero_gpu" if self.remote else None


def on_device(model: TempoModel) -> Device:
    """`model`'s one GPU entry, decorated at start-up as ZeroGPU requires (inert off ZeroGPU)."""
    accelerate = spaces.GPU(duration=gpu_seconds, size=COST.size)(functools.partial(on_accelerator, model))
    zero_gpu = SpacesConfig.zero_gpu
    return Device(accelerate, remote=zero_gpu, concurrency=ZEROGPU_CONCURRENCY if zero_gpu else 1)

