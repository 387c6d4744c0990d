"""The GPU check's measurements: conformance on the device, Tempo-6B at its real sizes loaded from the released
format, a 1-hour and a 10-minute video end to end with every part timed, follow-ups, each decoding path (CUDA
graphs, split-KV attention, the layer step compiled ahead of time) against the others, the parts' share of the
device's ceilings, the compressor against the released single batch, each speed-up against its baseline in the same
run, a cold call: a fresh process given the model in host memory, as a ZeroGPU worker is, and the hour with int8
weights. First of all, the `loader` part tries each way of building and loading the compiled layer step in a
process of its own (benchmarks/gpu/aoti_probe.py) and hands the compiled part the first that ran.

    python -m benchmarks.gpu.measure --out DIR        # on a CUDA GPU (benchmarks/gpu/check runs this)
    python -m benchmarks.gpu.measure --dry-run --out DIR   # the same sequence on the CPU with tiny sizes

Every part is written to DIR/gpu_check.json as soon as it ends, so a run cut short still leaves what it measured;
a part that fails is recorded with its error and the next one runs. DIR/gpu_check.log is the log.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.gpu import fast_paths, runs
from benchmarks.gpu.checkpoint import parameter_count
from benchmarks.gpu.parts import (
    cold,
    compiled_part,
    conformance,
    end_to_end,
    environment,
    follow_ups,
    int8_part,
    load_model,
    loader_part,
    utilisation,
)
from benchmarks.gpu.record import DRY_RUN, GPU, Check, Sizes
from benchmarks.gpu.report import HEADLINE, headline, verdicts
from tempo.config import SamplingConfig
from tempo.model import TempoModel

VIDEOS = {"hour": 3600.0, "ten_minutes": 600.0}


def scratch_parent(sizes: Sizes) -> str | None:
    """Memory-backed /dev/shm when it can hold the checkpoint twice over, else the default temporary directory."""
    with contextlib.suppress(OSError):
        if shutil.disk_usage("/dev/shm").free > 2.5 * sum(parameter_count(sizes.shapes).values()):
            return "/dev/shm"
    return None


def run_parts(check: Check, sizes: Sizes, device: torch.device, scratch: Path) -> None:
    """Every part in order, each recorded by `check`; without a model or its videos the rest cannot run."""
    found = check.run("environment", lambda: environment(device))
    check.figures["device"] = (found or {}).get("gpu", "cpu")
    check.run("loader", lambda: loader_part(sizes, device, scratch / "probe"))
    check.run("conformance", lambda: conformance(sizes, device))
    loaded: dict[str, TempoModel] = {}

    def load() -> dict:
        loaded["model"], figures = load_model(sizes, device, scratch / "checkpoint")
        return figures

    check.run("load", load)
    shutil.rmtree(scratch / "checkpoint", ignore_errors=True)
    if "model" not in loaded:
        return
    model = loaded["model"]
    sampling = SamplingConfig(max_frames=sizes.max_frames)
    videos: dict[str, runs.Video] = {}

    def make_videos() -> dict:
        videos.update({name: runs.make_video(name, seconds, sampling, sizes.frame_size, model)
                       for name, seconds in VIDEOS.items()})
        return {"segments": {name: len(video.segments) for name, video in videos.items()},
                "patches_per_segment": videos["hour"].segments[0].pixel_rows.shape[0]}

    check.run("videos", make_videos)
    if len(videos) == len(VIDEOS):
        model_parts(model, videos, sizes, check, scratch)


def model_parts(model: TempoModel, videos: dict[str, runs.Video], sizes: Sizes, check: Check, scratch: Path
                ) -> None:
    """The parts that time the loaded model on the videos, the compiled and int8 ones last."""
    check.run("warm_up", lambda: {"total_s": runs.request(model, videos["ten_minutes"], runs.QUESTION,
                                                            runs.answer_config(4)).total_s})
    first = end_to_end(model, videos, sizes, check)
    hour = videos["hour"]
    if "hour" in first:
        check.run("follow_ups", lambda: follow_ups(model, hour, first["hour"], sizes))
        check.run("decoding", lambda: fast_paths.decoding(model, hour, first["hour"], sizes.answer_tokens))
        check.run("mfu", lambda: utilisation(model, hour, first["hour"], check))
    check.run("compressor", lambda: fast_paths.compressor_batches(model, hour, sizes.micro_batches))
    check.run("pixels", lambda: fast_paths.pixels_on_device(model, hour))
    if "hour" in first:
        check.run("cold_call", lambda: cold(model, hour, first["hour"], sizes))
        # Last: building and loading AOT packages crashed the process once on an H100 (2026-11-26), and a
        # crash here must not take the parts above with it.
        check.run("compiled", lambda: compiled_part(model, hour, first["hour"], sizes, check,
                                                     scratch / "packages"))
        check.run("int8", lambda: int8_part(model, hour, first["hour"], sizes))  # rounds the model in place


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu.measure", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="on the CPU with tiny sizes")
    parser.add_argument("--out", default=os.environ.get("OUT", "outputs/gpu-check"), help="default: $OUT")
    parser.add_argument("--only", default=os.environ.get("GPU_CHECK_ONLY", ""),
                        help="comma-separated parts to run (with the ones every part needs); default: all")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S",
                        handlers=[logging.StreamHandler(), logging.FileHandler(out / "gpu_check.log", mode="w")],
                        force=True)
    sizes = DRY_RUN if args.dry_run else GPU
    if sizes.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA GPU here: run with --dry-run, or on a GPU machine")
    device = torch.device(sizes.device)
    check = Check(sizes, out, frozenset(filter(None, args.only.split(","))))
    scratch = Path(tempfile.mkdtemp(prefix="tempo-gpu-check-", dir=scratch_parent(sizes)))
    os.environ.setdefault("TEMPO_CACHE", str(scratch / "cache"))
    try:
        run_parts(check, sizes, device, scratch)
    finally:
        headline(check.figures)
        check.figures["failed"] = verdicts(check.figures)
        check.save()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({key: check.figures.get(key) for key in HEADLINE}, indent=1))
    errors, failed = check.figures["errors"], check.figures["failed"]
    if errors:
        print(f"{len(errors)} part(s) failed or were skipped: {', '.join(errors)}", file=sys.stderr)
    for line in failed:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if errors or failed else 0


if __name__ == "__main__":
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without native exit handlers: with decord loaded (RTLD_GLOBAL) before AOTInductor packages, its copy of
    # the C++ thread-exit handler double-freed or hung at exit (torch 2.13, CPU) after every figure was saved.
    os._exit(code)
