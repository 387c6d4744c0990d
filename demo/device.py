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
from dataclasses import dataclass
from typing import Callable, Iterator

import gradio as gr
import spaces
from spaces.config import Config as SpacesConfig

from tempo.engine import Job, execute, out_of_memory_as_error
from tempo.model import TempoModel

from .refusals import refusal


# Dense bf16 TFLOP/s and memory TB/s from data sheets, to carry figures measured on one GPU to another. ZeroGPU's
# default size is half an RTX Pro 6000 Blackwell: half of its 504 TFLOP/s (the workstation card's, as published by
# resellers; NVIDIA's sheet gives only sparse FP4) and of its 1.792 TB/s. An estimate until a Space measures itself.
DATA_SHEETS = {"NVIDIA H200": (989.0, 4.8), "NVIDIA H100 80GB HBM3": (989.0, 3.35)}
ZEROGPU_HALF_RTX_PRO_6000 = (504.0 / 2, 1.792 / 2)
MARGIN = 1.25  # the factors are estimates: a reservation that falls short ends the visitor's request


@dataclass(frozen=True)
class GpuCost:
    """GPU seconds for Tempo-6B on ZeroGPU's default size, fitted (`fitted`) from the GPU check's figures
    (benchmarks/results/gpu_check-h200.json): compute-bound stages scaled by bf16 throughput, each generated token
    by memory bandwidth, with `MARGIN` on top."""

    start: float = 4.0  # a worker starts and the weights land on the GPU: ZeroGPU's own, not measurable here
    segment: float = 0.081  # the vision tower and the compressor over one 8-frame segment
    answer: float = 1.257  # the allocation and the decoder's prefill of one answer (~7k memory tokens)
    token: float = 0.058  # one generated token
    cap: float = 80.0  # the most one request reserves: x1.5 on this GPU (spaces' duration factor) is 2 minutes,
    #                    an anonymous visitor's daily quota

    @classmethod
    def fitted(cls, figures: dict) -> "GpuCost":
        """The costs a GPU check's figures give (`figures`: its JSON, from a GPU in `DATA_SHEETS`)."""
        flops, bandwidth = DATA_SHEETS[figures["device"]]
        compute = flops / ZEROGPU_HALF_RTX_PRO_6000[0] * MARGIN
        memory = bandwidth / ZEROGPU_HALF_RTX_PRO_6000[1] * MARGIN
        hour = figures["phases"]["hour"]
        stages = hour["stages"]
        return cls(segment=round((stages["vision"] + stages["compress"]) / hour["segments"] * compute, 3),
                   answer=round((stages["allocate"] + stages["prefill"]) * compute, 3),
                   token=round(stages["per_token"] * memory, 3))


COST = GpuCost()


def gpu_seconds(job: Job) -> int:
    """The reservation for `job`: what it compresses (nothing when the compression is cached) and what it answers
    (each answer's prefill and up to its max new tokens), within the cap."""
    tokens = sum(config.generation.max_new_tokens for config in job.answers)
    estimate = COST.start + COST.segment * job.to_compress + COST.answer * len(job.answers) + COST.token * tokens
    return math.ceil(min(COST.cap, estimate))


def on_accelerator(model: TempoModel, job: Job) -> Iterator[object]:
    """The accelerator's half of `job`. Refusals become the visitor's message here, where they are raised."""
    try:
        with out_of_memory_as_error():
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

    accelerate: Callable[[Job], Iterator[object]]
    remote: bool
    concurrency: int = 1


def on_device(model: TempoModel) -> Device:
    """`model`'s one GPU entry, decorated at start-up as ZeroGPU requires (inert off ZeroGPU)."""
    accelerate = spaces.GPU(duration=gpu_seconds)(functools.partial(on_accelerator, model))
    zero_gpu = SpacesConfig.zero_gpu
    return Device(accelerate, remote=zero_gpu, concurrency=ZEROGPU_CONCURRENCY if zero_gpu else 1)

