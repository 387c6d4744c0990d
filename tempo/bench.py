"""`tempo bench`: how fast a video file becomes Tempo's answer, ours against the released pipeline's steps.

Both modes run in this process on the same videos (generated once with the ffmpeg that imageio-ffmpeg ships,
kept under $TEMPO_CACHE/bench). The reference mode follows the released pipeline: every sampled frame decoded at
full size in one batch, resized one by one, each segment preprocessed on its own, then all segments through the
compressor in a single batch. Ours streams: decoding, preprocessing and compression overlap, frames are reduced
as they are decoded, and the question-independent work is cached for follow-up questions. Ours is also measured
decoding in a child process, as the app does (`Limits.isolate_decoding`), beside decoding in this one.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import psutil
import torch
from PIL import Image

from .command_line import run_alone
from .config import GenerationConfig, RunConfig, SamplingConfig, Zoom
from .engine import VideoCache, run
from .engine.steps import compress_batch, give_back_freed_memory, open_decoder, respond
from .events import AllocationDone, Compression, Finished, SegmentCompressed
from .model import TempoModel, from_pretrained
from .paths import cache_folder
from .timing import Timer
from .video import SamplingPlan, VideoInfo, long_edge_size, open_video, sandbox, uniform_plan
from .video.patches import PatchGeometry, clip_size, frame_size, normalize, patchify, resize_frames
from .video.segments import PreparedSegment, video_plan

log = logging.getLogger(__name__)

QUESTION = "When does the clock show ten seconds?"
FOLLOW_UP = "What colour is the moving circle?"
PEAK_RUNS = 3  # compressor peaks measured per size (the median is reported)
VIDEOS = {"1-hour": 3600, "10-minute": 600}
NO_THUMBNAIL = np.zeros((1, 1, 3), np.uint8)


# ------------------------------------------------------------------------------------------------ measuring

class PeakMemory:
    """Peak memory above the level when measuring started: resident memory of this process (sampled every
    5 ms), or the CUDA allocator's peak when the model is on a GPU."""

    def __init__(self, device: torch.device):
        self.device, self.process, self.peak = device, psutil.Process(), 0

    def _now(self) -> int:
        if self.device.type == "cuda":
            return torch.cuda.max_memory_allocated(self.device)
        return self.process.memory_info().rss

    @contextmanager
    def measure(self) -> Iterator[PeakMemory]:
        release_memory()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        baseline = self._now()
        self.peak, done = baseline, threading.Event()

        def sample() -> None:
            while not done.wait(0.005):
                self.peak = max(self.peak, self._now())

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            done.set()
            thread.join()
            self.peak = max(self.peak, self._now()) - baseline


def release_memory() -> None:
    """Give freed memory back to the OS, so one measurement does not start on another's leftovers."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    give_back_freed_memory()


@contextmanager
def stopwatch() -> Iterator[dict]:
    elapsed: dict[str, float] = {}
    start = time.perf_counter()
    try:
        yield elapsed
    finally:
        elapsed["s"] = time.perf_counter() - start


# ------------------------------------------------------------------------------------------------ test videos

def make_video(path: str, seconds: int) -> str:
    """1280x720 30-fps H.264 of ffmpeg's test pattern, with x264's usual B-frames and intra frames every 250."""
    if os.path.isfile(path):
        return path
    import imageio_ffmpeg

    os.makedirs(os.path.dirname(path), exist_ok=True)
    log.info("generating %s (%d s of 720p30, once; this takes a while)", path, seconds)
    partial = path + ".partial.mp4"
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error", "-f", "lavfi", "-i",
                    f"testsrc2=size=1280x720:rate=30:duration={seconds}", "-c:v", "libx264", "-preset", "veryfast",
                    "-crf", "32", "-pix_fmt", "yuv420p", partial], check=True)
    os.replace(partial, path)
    return path


# ------------------------------------------------------------------------------------------------ the reference

def reference_tensors(path: str, sampling: SamplingConfig, geometry: PatchGeometry
                      ) -> tuple[torch.Tensor, list[tuple[int, int, int]], SamplingPlan, VideoInfo]:
    """The released preprocessing: decord get_batch of every sampled frame at full size (with the decoding
    threads infer.py picks), PIL resizing frame by frame, then every segment on its own through qwen-vl-utils'
    resizes and the processor into float pixel values, concatenated for one compressor batch."""
    import decord

    cores = len(os.sched_getaffinity(0))
    reader = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=min(max(1, cores - 1), 16))
    info = VideoInfo(path, len(reader), reader.get_avg_fps(), 0, 0, "decord")
    plan = uniform_plan(info, sampling)
    frames = reader.get_batch(plan.frame_indices).asnumpy()
    long_edge = long_edge_size(frames.shape[2], frames.shape[1], sampling.long_edge)
    images = [Image.fromarray(frame).resize(long_edge, resample=Image.Resampling.BICUBIC) for frame in frames]
    snapped = frame_size(long_edge[1], long_edge[0], geometry)[::-1]
    pixel_values, grids = [], []
    for window in plan.segments:
        clip = [images[i] for i in window]
        clip = [image.resize(snapped, resample=Image.Resampling.BICUBIC) for image in
                (clip * 2 if len(clip) == 1 else clip)]
        clip += clip[-1:] * (len(clip) % 2)
        video = torch.stack([torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1) for image in clip])
        size = clip_size(video.shape[2], video.shape[3], len(clip), geometry)
        rows, grid = patchify(resize_frames(video, size).float(), geometry)  # the release keeps floats from here
        pixel_values.append(normalize(rows, geometry))
        grids.append(grid)
    return torch.cat(pixel_values), grids, plan, info  # pixel values float32 [rows, 3*tp*p*p]


def reference_answer(model: TempoModel, path: str, question: str, config: RunConfig) -> dict:
    """The released flow end to end: nothing can be shown before every segment went through one batch."""
    started = time.perf_counter()
    pixel_values, grids, plan, info = reference_tensors(path, config.sampling, model.geometry)
    with torch.inference_mode():
        vision = model.compressor.encode_vision(pixel_values, grids)
    del pixel_values
    segments = [PreparedSegment(i, None, features.grid, NO_THUMBNAIL, vision=features)
                for i, features in enumerate(vision)]
    memories, relevance = compress_batch(model, segments, question, plan, Timer())
    first_result = time.perf_counter() - started
    probed, _ = video_plan(open_video(path), config.sampling)
    compression = Compression(question, probed, plan, list(memories), relevance)
    finished = list(respond(model, compression, config, Timer()))[-1]
    assert isinstance(finished, Finished)  # a response ends with its Finished event
    return {"first_segment_s": first_result, "total_s": time.perf_counter() - started, "answer": finished.answer,
            "tokens": [s.tokens for s in finished.segments]}


# ------------------------------------------------------------------------------------------------ ours

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


# ------------------------------------------------------------------------------------------------ report

def ratios(figures: dict) -> dict:
    ours, reference = figures["ours"], figures["reference"]
    peaks = ours["compressor_peak_mb"]
    return {
        "preprocess_speedup": reference["tensors_s"] / ours["tensors_s"],
        "preprocess_rss_reduction": reference["tensors_peak_mb"] / max(ours["tensors_peak_mb"], 1e-9),
        "followup_speedup": ours["follow_up_uncached"]["total_s"] / ours["follow_up"]["total_s"],
        "fast_seek_speedup": ours["first"]["total_s"] / ours["fast_seek"]["total_s"],
        "memory_128_vs_16": peaks[128] / max(peaks[16], 1e-9),
        "isolated_preprocess_cost": figures["isolated"]["tensors_s"] / ours["tensors_s"],
        "isolated_first_segment_cost": (figures["isolated"]["first"]["first_segment_s"]
                                        / ours["first"]["first_segment_s"]),
    }


def table(name: str, figures: dict) -> str:
    ours, reference, r = figures["ours"], figures["reference"], ratios(figures)
    rows = [
        ("file -> compressor-ready tensors (s)", reference["tensors_s"], ours["tensors_s"], r["preprocess_speedup"]),
        ("peak memory of that step (MB)", reference["tensors_peak_mb"], ours["tensors_peak_mb"],
         r["preprocess_rss_reduction"]),
        ("first segment result (s)", reference["first"]["first_segment_s"], ours["first"]["first_segment_s"],
         reference["first"]["first_segment_s"] / ours["first"]["first_segment_s"]),
        ("end to end with the model (s)", reference["first"]["total_s"], ours["first"]["total_s"],
         reference["first"]["total_s"] / ours["first"]["total_s"]),
        ("follow-up question (s)", ours["follow_up_uncached"]["total_s"], ours["follow_up"]["total_s"],
         r["followup_speedup"]),
        ("fast seek instead of exact sampling (s)", ours["first"]["total_s"], ours["fast_seek"]["total_s"],
         r["fast_seek_speedup"]),
    ]
    lines = [f"{name}: {figures['segments']} segments", f"| {'':40} | reference | ours | ratio |", "|---|---|---|---|"]
    lines += [f"| {label:40} | {a:9.2f} | {b:7.2f} | {ratio:5.1f}x |" for label, a, b, ratio in rows]
    isolated = figures["isolated"]
    lines.append(f"decoding in a child process, as the app does: file -> tensors {isolated['tensors_s']:.2f} s "
                 f"({r['isolated_preprocess_cost']:.2f}x in-process), first segment result "
                 f"{isolated['first']['first_segment_s']:.2f} s ({r['isolated_first_segment_cost']:.2f}x)")
    peaks = ours["compressor_peak_mb"]
    lines.append(f"compressor peak memory, median of {PEAK_RUNS}: {peaks[16]:.0f} MB at 16 segments, {peaks[128]:.0f} "
                 f"MB at 128 ({r['memory_128_vs_16']:.2f}x)")
    cached, uncached = ours["follow_up"], ours["follow_up_uncached"]
    same = (cached["answer"], cached["tokens"]) == (uncached["answer"], uncached["tokens"])
    verdict = "the same" if same else "NOT the same"
    lines.append(f"follow-up from the cache: {verdict} allocation and answer as uncached")
    start, end = figures["load_average"]
    lines.append(f"load average (1 min) at the start and the end: {start:.1f}, {end:.1f} on {os.cpu_count()} cores")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="only the 10-minute video (a few minutes)")
    parser.add_argument("--video", help="benchmark this file instead of the generated videos")
    parser.add_argument("--model", default=os.environ.get("TEMPO_MODEL"), help="default: the embedded Tempo-Tiny")
    parser.add_argument("--base", default=os.environ.get("TEMPO_BASE"))
    parser.add_argument("--device", help="cpu or cuda (default: cuda if available)")
    parser.add_argument("--json", dest="json_out", help="write the raw figures and ratios here")
    parser.add_argument("--first-segment", type=int, metavar="RUNS",
                        help="only the first segment's result, RUNS times per video (seconds; no reference)")


def run_bench(args: argparse.Namespace) -> int:
    """`tempo bench`: the table for each video on stdout, and the figures in `--json`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    model = from_pretrained(args.model, base=args.base, device=args.device)
    sandbox.warm_up()  # the decoding processes' fork server starts once, as the app's does at start-up
    memory = PeakMemory(model.device)
    cache = cache_folder("bench")
    if args.video:
        videos = {os.path.basename(args.video): args.video}
    else:
        chosen = {"10-minute": 600} if args.quick else VIDEOS
        videos = {name: make_video(os.path.join(cache, f"testsrc2-720p30-{seconds}s.mp4"), seconds)
                  for name, seconds in chosen.items()}
    report: dict[str, Any] = {"device": str(model.device), "model": model.spec.name,
                              "cores": len(os.sched_getaffinity(0)), "videos": {}}
    if args.first_segment:
        report["videos"] = {name: first_segments(model, path, args.first_segment) for name, path in videos.items()}
    else:
        for name, path in videos.items():
            log.info("benchmarking %s", name)
            figures = bench_video(model, path, memory)
            figures["ratios"] = ratios(figures)
            report["videos"][name] = figures
            print(table(name, figures), flush=True)
        headline = report["videos"][next(iter(videos))]
        report["ratios"] = headline["ratios"]
        report["first_segment_s"] = headline["ours"]["first"]["first_segment_s"]
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2, default=str)
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m tempo.bench`, the old name of `tempo bench`."""
    return run_alone("python -m tempo.bench", __doc__.splitlines()[0], add_arguments, run_bench, argv)


if __name__ == "__main__":
    sys.exit(main())
