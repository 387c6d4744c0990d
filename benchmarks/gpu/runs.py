"""The pieces the GPU check times: videos of prepared segments, one request through the accelerator's half of the
pipeline with every part synchronised, and the compressor alone at several micro-batch sizes."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch

from tempo.config import GenerationConfig, RunConfig, SamplingConfig, Zoom
from tempo.engine import Job, execute
from tempo.engine.steps import compress_batch, encode_batch, micro_batches
from tempo.events import AllocationDone, AnswerToken, Compressed, Compression, Finished, SegmentCompressed, VideoProbed
from tempo.model import TempoModel
from tempo.timing import Timer
from tempo.video import SamplingPlan, VideoInfo, uniform_plan
from tempo.video.segments import PreparedSegment, prepare_segment

QUESTION = "When does the speaker show the chart with the quarterly results?"
FOLLOW_UP = "What colour is the car that parks at the end?"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class SyncedTimer(Timer):
    """Timings that include the GPU work a timed part launched: each part waits for the device before it ends."""

    def __init__(self, device: torch.device):
        super().__init__()
        self.device = device

    @contextlib.contextmanager
    def time(self, name: str) -> Iterator[None]:
        with super().time(name):
            try:
                yield
            finally:
                synchronize(self.device)


@dataclass
class Video:
    """A video as the accelerator receives it: its probe, sampling plan and prepared segments (pixels)."""

    name: str
    probed: VideoProbed
    plan: SamplingPlan
    segments: list[PreparedSegment]


def make_video(name: str, seconds: float, sampling: SamplingConfig, frame_size: tuple[int, int], model: TempoModel,
               seed: int = 0) -> Video:
    """A `seconds`-long 30-fps video of random frames at `frame_size` (w, h), sampled as the release samples it and
    put through the real resize chain and patching (timing does not depend on what the frames show)."""
    width, height = frame_size
    info = VideoInfo(f"synthetic-{name}", round(30 * seconds), 30.0, width, height, "synthetic")
    plan = uniform_plan(info, sampling)
    probed = VideoProbed(info.path, seconds, 30.0, info.total_frames, width, height, len(plan.frame_indices),
                         plan.real_fps, len(plan.segments), "synthetic")
    rng = np.random.default_rng(seed)
    timer = Timer()
    segments = [prepare_segment(i, list(rng.integers(0, 256, (len(window), height, width, 3), dtype=np.uint8)),
                                sampling, model.geometry, timer) for i, window in enumerate(plan.segments)]
    return Video(name, probed, plan, segments)


@dataclass
class Request:
    """One trip to the accelerator, timed from its start (pixels or cached features on the host) to each event."""

    total_s: float
    first_segment_s: float | None
    compressed_s: float | None
    allocated_s: float
    first_token_s: float
    tokens: int
    timings: dict[str, float]  # seconds per part of the run, as `Finished.timings`
    peak_memory_gb: float
    compressed: Compressed | None
    finished: Finished

    @property
    def per_token_s(self) -> float:
        """Each generated token after the first (the first comes with the prefill)."""
        return (self.total_s - self.first_token_s) / max(1, self.tokens - 1)

    @property
    def prefill_s(self) -> float:
        return self.first_token_s - self.allocated_s

    def figures(self) -> dict:
        timings = {name: round(seconds, 4) for name, seconds in self.timings.items()
                   if name in ("vision", "compress", "allocate")}
        timings.update(prefill=round(self.prefill_s, 4), per_token=round(self.per_token_s, 5))
        return {"total_s": round(self.total_s, 4), "first_segment_s": self.first_segment_s and round(
            self.first_segment_s, 4), "tokens": self.tokens, "timings": timings,
            "peak_memory_gb": round(self.peak_memory_gb, 3)}


def answer_config(tokens: int, micro_batch: int | None = None) -> RunConfig:
    """Greedy answers of exactly `tokens` tokens (the model's stop tokens are switched off by the caller), in
    micro-batches of `micro_batch` segments (None: the device's default, as the app runs: 16 on CUDA, 4 on a CPU)."""
    return RunConfig(generation=GenerationConfig(max_new_tokens=tokens, temperature=0.0), micro_batch=micro_batch,
                     zoom=Zoom.OFF.value)  # one pass: the figures are the method's, comparable across checks


def request(model: TempoModel, video: Video, question: str, config: RunConfig,
            segments: list[PreparedSegment] | None = None, compression: Compression | None = None,
            keep_vision: bool = False) -> Request:
    """`execute` one job (as a ZeroGPU worker does), every part synchronised, the device's peak memory tracked."""
    device = model.device
    timer = SyncedTimer(device)
    job = Job(question, video.probed, video.plan, config.micro_batch, (config,), timer,
              segments=video.segments if segments is None else segments, compression=compression,
              keep_vision_bytes=2**40 if keep_vision else 0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    synchronize(device)
    started = time.perf_counter()
    marks: dict[str, float] = {}
    compressed = finished = None
    tokens = 0
    for event in execute(model, job):
        synchronize(device)
        now = time.perf_counter() - started
        if isinstance(event, SegmentCompressed):
            marks.setdefault("first_segment", now)
        elif isinstance(event, Compressed):
            compressed, marks["compressed"] = event, now
        elif isinstance(event, AllocationDone):
            marks["allocated"] = now
        elif isinstance(event, AnswerToken):
            tokens += 1
            marks.setdefault("first_token", now)
        elif isinstance(event, Finished):
            finished = event
    total = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else 0.0
    return Request(total, marks.get("first_segment"), marks.get("compressed"), marks["allocated"],
                   marks["first_token"], tokens, dict(timer.totals), peak, compressed, finished)


def compression_of(run: Request) -> Compression:
    return run.compressed.compression


def compressor_pass(model: TempoModel, video: Video, micro_batch: int | None) -> dict:
    """The vision tower and the compressor over every segment: in micro-batches of `micro_batch` as we stream them,
    or (None) all segments in one batch, as the released code compresses them."""
    device = model.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    synchronize(device)
    started = time.perf_counter()
    batches = micro_batches(video.segments, micro_batch) if micro_batch else [video.segments]
    for batch in batches:
        encoded = encode_batch(model, batch, Timer())
        compress_batch(model, encoded, QUESTION, video.plan, Timer())
    synchronize(device)
    seconds = time.perf_counter() - started
    peak = torch.cuda.max_memory_allocated(device) / 1e9 if device.type == "cuda" else 0.0
    return {"seconds": round(seconds, 4), "segments_per_s": round(len(video.segments) / seconds, 2),
            "peak_memory_gb": round(peak, 3)}


def without_stops(model: TempoModel) -> None:
    """Answers of the length asked for: random weights would otherwise stop anywhere."""
    model.spec = replace(model.spec, stop_ids=frozenset(), repetition_guard=False)
