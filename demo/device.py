"""What runs on the accelerator, and how long it asks for.

One function does the model's work for every kind of request (an answer, a comparison, a budget sweep, a
compression alone): the accelerator's half of a `tempo.pipeline.Job`. On a ZeroGPU Space it runs under `spaces.GPU`
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

from tempo.model import TempoModel
from tempo.pipeline import Job, execute
from tempo.stages import out_of_memory_as_error

from .refusals import refusal


@dataclass(frozen=True)
class GpuCost:
    """Estimated GPU seconds for Tempo-6B on ZeroGPU's default size (half an RTX Pro 6000 Blackwell): estimates
    from its FLOPs per segment and per token, until measured on one."""

    start: float = 4.0  # a worker starts and the weights land on the GPU
    segment: float = 0.06  # the vision tower and the compressor over one 8-frame segment
    answer: float = 1.0  # the allocation and the decoder's prefill of one answer (up to 16k positions)
    token: float = 0.03  # one generated token
    cap: float = 80.0  # the most one request reserves: x1.5 on this GPU (spaces' duration factor) is 2 minutes,
    #                    an anonymous visitor's daily quota


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


@dataclass(frozen=True)
class Device:
    """How a request reaches the model: `accelerate` runs a job; `remote` says it runs in another process (a
    ZeroGPU worker), so the video is read before it is called and the cache keeps pixels."""

    accelerate: Callable[[Job], Iterator[object]]
    remote: bool


def on_device(model: TempoModel) -> Device:
    """`model`'s one GPU entry, decorated at start-up as ZeroGPU requires (inert off ZeroGPU)."""
    accelerate = spaces.GPU(duration=gpu_seconds)(functools.partial(on_accelerator, model))
    return Device(accelerate, remote=SpacesConfig.zero_gpu)

