"""The benchmark's measured runs: ours (streamed, cached, decoding in a child) and each video's figures."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import numpy as np

from ..config import GenerationConfig, RunConfig, SamplingConfig, Zoom
from ..engine import VideoCache, run
from ..engine.steps import open_decoder
from ..events import AllocationDone, Finished, SegmentCompressed
from ..model import TempoModel
from ..timing import Timer
from ..video.patches import PatchGeometry
from .measuring import PeakMemory, stopwatch
from .reference import reference_answer, reference_tensors

QUESTION = "When does the clock show ten seconds?"
FOLLOW_UP = "What colour is the moving circle?"
PEAK_RUNS = 3  # compressor peaks measured per size (the median is reported)


def ours_tensors(path: str, config: RunConfig, geometry: PatchGeometry) -> int:
    """Our file -> compressor-ready tensors: the streamed segments, drained (count returned)."""
    decoder = open_decoder(path, config, geometry, Timer())
    try:
        return sum(1 for _ in decoder.segments())
    finally:
        decoder.close()


def ours_answer(model: TempoModel, path: str, question: str, config: RunConfig, cache: VideoCache) -> dict:
    started, first = time.perf_counter(), None
    for event in run(model, path, question, config, cache):
        if isinstance(event, SegmentCompressed) and first is None:
            first = time.perf_counter() - started
        if isinstance(event, Finished):
            return {"first_segment_s": first, "total_s": time.perf_counter() - started, "answer": event.answer,
                    "tokens": [s.tokens for s in event.segments], "segments": len(event.segments)}
    raise RuntimeError("the pipeline ended without an answer")


def decoding_in_a_child(config: RunConfig) -> RunConfig:
    """`config` with decoding in a child process, as the app decodes every visitor's file."""
    return replace(config, limits=replace(config.limits, isolate_decoding=True))


def first_segment(model: TempoModel, path: str, config: RunConfig) -> float:
    """Seconds from the call to the first compressed segment of an uncached question (the rest is not run)."""
    started = time.perf_counter()
    events = run(model, path, QUESTION, config, cache=VideoCache(max_bytes=0))
    try:
        for event in events:
            if isinstance(event, SegmentCompressed):
                return time.perf_counter() - started
    finally:
        events.close()  # type: ignore[attr-defined]  # run returns a generator
    raise RuntimeError("the pipeline ended before its first segment")


def first_segments(model: TempoModel, path: str, runs: int) -> dict:
    """The first segment's result `runs` times, in-process and with decoding in a child process (as the app)."""
    config = RunConfig(generation=GenerationConfig(max_new_tokens=1), zoom=Zoom.OFF.value)
    isolated = decoding_in_a_child(config)
    figures: dict = {"video": path, "load_average": [os.getloadavg()[0]], "in_process_s": [], "isolated_s": []}
    figures["first_call_s"] = first_segment(model, path, config)  # with the model's first forward: not repeated
    first_segment(model, path, isolated)  # the decoding workers' first start, likewise
    for _ in range(runs):
        figures["in_process_s"].append(first_segment(model, path, config))
        figures["isolated_s"].append(first_segment(model, path, isolated))
    figures["load_average"].append(os.getloadavg()[0])
    seconds = {key: " ".join(f"{t:.2f}" for t in sorted(figures[key])) for key in ("in_process_s", "isolated_s")}
    print(f"{os.path.basename(path)}: first segment in-process {seconds['in_process_s']} s, in a child process (as "
          f"the app) {seconds['isolated_s']} s; the process's first call {figures['first_call_s']:.2f} s; load "
          f"average {figures['load_average'][0]:.1f}-{figures['load_average'][1]:.1f}", flush=True)
    return figures


def compressor_peak(model: TempoModel, path: str, max_frames: int, memory: PeakMemory) -> int:
    """Peak memory of one uncached question over `max_frames` sampled frames, from opening the file until every
    segment is compressed and allocated (the decoder's prefill, which grows with the kept tokens, comes after)."""
    config = RunConfig(sampling=SamplingConfig(max_frames=max_frames), generation=GenerationConfig(max_new_tokens=1))
    with memory.measure():
        events = run(model, path, QUESTION, config, cache=VideoCache(max_bytes=0))
        for event in events:
            if isinstance(event, AllocationDone):
                break
        events.close()  # type: ignore[attr-defined]  # run returns a generator
    return memory.peak


def bench_video(model: TempoModel, path: str, memory: PeakMemory) -> dict:
    """Every figure for one video, ours and the reference's, measured one after the other."""
    config = RunConfig(generation=GenerationConfig(max_new_tokens=16), zoom=Zoom.OFF.value)  # one pass, as before
    isolated = decoding_in_a_child(config)
    sampling, geometry = config.sampling, model.geometry
    figures: dict = {"video": path, "load_average": [os.getloadavg()[0]]}  # other work on the machine slows both

    with memory.measure(), stopwatch() as clock:
        segments = ours_tensors(path, config, geometry)
    figures["ours"] = {"tensors_s": clock["s"], "tensors_peak_mb": memory.peak / 2**20}
    with stopwatch() as clock:
        ours_tensors(path, isolated, geometry)
    figures["isolated"] = {"tensors_s": clock["s"]}
    with memory.measure(), stopwatch() as clock:
        reference = reference_tensors(path, sampling, geometry)
    figures["reference"] = {"tensors_s": clock["s"], "tensors_peak_mb": memory.peak / 2**20}
    del reference
    figures["segments"] = segments

    cache = VideoCache()
    figures["ours"]["first"] = ours_answer(model, path, QUESTION, config, cache)
    figures["isolated"]["first"] = ours_answer(model, path, QUESTION, isolated, VideoCache())
    figures["ours"]["follow_up"] = ours_answer(model, path, FOLLOW_UP, config, cache)
    figures["ours"]["follow_up_uncached"] = ours_answer(model, path, FOLLOW_UP, config, VideoCache())
    figures["reference"]["first"] = reference_answer(model, path, QUESTION, config)
    fast = replace(config, sampling=replace(sampling, fast_seek=True))
    figures["ours"]["fast_seek"] = ours_answer(model, path, QUESTION, fast, VideoCache())
    # A resident-memory peak moves by tens of MB from run to run (heaps, the sampling thread's timing): the median
    # of PEAK_RUNS runs each, alternating the two sizes, and every run kept.
    runs: dict[int, list[float]] = {16: [], 128: []}
    for _ in range(PEAK_RUNS):
        for n in (128, 1024):
            runs[n // 8].append(round(compressor_peak(model, path, n, memory) / 2**20, 1))
    figures["ours"]["compressor_peak_mb"] = {segments: float(np.median(mb)) for segments, mb in runs.items()}
    figures["ours"]["compressor_peak_runs_mb"] = runs
    figures["load_average"].append(os.getloadavg()[0])
    return figures
