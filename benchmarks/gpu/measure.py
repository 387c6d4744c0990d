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
import platform
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks.gpu import aoti_env, aoti_probe, ceilings, cold_call, compiled, fast_paths, runs
from benchmarks.gpu.checkpoint import TEMPLATE, TEMPO_6B, TINY, Shapes, parameter_count, write_checkpoint
from benchmarks.gpu.report import HEADLINE, headline, verdicts
from tempo.config import SamplingConfig
from tempo.conformance import check_set
from tempo.conformance.report import BF16_RTOL
from tempo.model import TempoModel, from_pretrained
from tempo.model.int8 import packed_kernel, quantize_model

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
VIDEOS = {"hour": 3600.0, "ten_minutes": 600.0}
NEEDED_BY_EVERY_PART = frozenset({"environment", "load", "videos", "warm_up", "hour"})
NEEDED_BY = {"compiled": frozenset({"loader"})}  # the compiled part loads its packages as the loader part chose
INT8_RTOL = 2 * BF16_RTOL  # bf16's own rounding and int8's, each within BF16_RTOL on the conformance set


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


def scratch_parent(sizes: Sizes) -> str | None:
    """Memory-backed /dev/shm when it can hold the checkpoint twice over, else the default temporary directory."""
    with contextlib.suppress(OSError):
        if shutil.disk_usage("/dev/shm").free > 2.5 * sum(parameter_count(sizes.shapes).values()):
            return "/dev/shm"
    return None


def environment(device: torch.device) -> dict:
    import transformers

    figures = {"python": platform.python_version(), "torch": torch.__version__,
               "transformers": transformers.__version__, "cpus": os.cpu_count()}
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        figures.update(gpu=properties.name, gpu_memory_gb=round(properties.total_memory / 1e9, 1),
                       multiprocessors=properties.multi_processor_count, cuda=torch.version.cuda)
    figures.update(ceilings.device_ceilings(device))
    return figures


def conformance(sizes: Sizes, device: torch.device) -> dict:
    """The fixture set on this device in float32 (must match as on a CPU) and in bfloat16 (within BF16_RTOL)."""
    figures = {}
    for dtype in (torch.float32, torch.bfloat16):
        report = check_set(str(TEMPLATE), str(device), dtype, list(sizes.conformance_cases or []) or None)
        name = "float32" if dtype == torch.float32 else "bfloat16"
        figures[name] = {"passed": len(report.lines) - report.failures, "checks": len(report.lines),
                         "failures": [line for line in report.lines if line.startswith("FAIL")],
                         "discrete_flipped": report.flipped, "discrete": report.discrete, "summary": report.summary()}
    return figures


def load_model(sizes: Sizes, device: torch.device, directory: Path) -> tuple[TempoModel, dict]:
    """Write the random checkpoint in the released format, then load it as users do (`from_pretrained`)."""
    started = time.perf_counter()
    checkpoint, base = write_checkpoint(directory, sizes.shapes, device)
    written = time.perf_counter() - started
    shards = sorted(p.name for p in checkpoint.glob("model-*.safetensors"))
    runs.synchronize(device)
    started = time.perf_counter()
    model = from_pretrained(str(checkpoint), base=str(base), device=str(device))
    runs.synchronize(device)
    loaded = time.perf_counter() - started
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    runs.without_stops(model)
    return model, {"parameters": parameter_count(sizes.shapes), "weights_gb": round(weights / 1e9, 3),
                   "shards": shards, "write_s": round(written, 2), "load_s": round(loaded, 2),
                   "dtype": str(model.dtype)}


def median_run(results: list[runs.Request]) -> runs.Request:
    return sorted(results, key=lambda r: r.total_s)[len(results) // 2]


def end_to_end(model: TempoModel, videos: dict[str, runs.Video], sizes: Sizes, check: Check) -> dict:
    """Each video from its pixels to the last answer token, `repeats` times; the median run's figures."""
    config = runs.answer_config(sizes.answer_tokens)
    kept: dict[str, runs.Request] = {}

    def measure(name: str, video: runs.Video) -> dict:
        results = [runs.request(model, video, runs.QUESTION, config, keep_vision=True)
                   for _ in range(sizes.repeats if name == "hour" else 1)]
        run = kept[name] = median_run(results)
        compressing = run.timings["vision"] + run.timings["compress"]
        return {**run.figures(), "totals_s": [round(r.total_s, 4) for r in results], "segments": len(video.segments),
                "segments_per_s": round(len(video.segments) / compressing, 2),
                "memory_tokens_kept": run.finished.tokens_used}

    for name, video in videos.items():
        check.run(name, lambda name=name, video=video: measure(name, video))
    return kept


def follow_ups(model: TempoModel, video: runs.Video, first: runs.Request, sizes: Sizes) -> dict:
    """Asked again (the compression cached), a new question with the vision features cached, and a new question
    with only the pixels cached (what ZeroGPU does today: the serving process keeps pixels)."""
    config = runs.answer_config(sizes.answer_tokens)
    cached = [runs.request(model, video, runs.QUESTION, config, compression=runs.compression_of(first))
              for _ in range(sizes.repeats)]
    encoded = first.compressed.vision
    vision_cached = runs.request(model, video, runs.FOLLOW_UP, config, segments=encoded)
    pixels_cached = runs.request(model, video, runs.FOLLOW_UP, config)
    return {"asked_again": median_run(cached).figures(), "asked_again_totals_s": [round(r.total_s, 4) for r in cached],
            "same_answer_from_cache": all(r.finished.token_ids == first.finished.token_ids for r in cached),
            "new_question_vision_cached": vision_cached.figures(),
            "new_question_pixels_cached": pixels_cached.figures(),
            "keeping_vision_saves_s": round(pixels_cached.total_s - vision_cached.total_s, 4)}


def loader_part(sizes: Sizes, device: torch.device, directory: Path) -> dict:
    """First why a one-layer package would not load here (`aoti_env.diagnose`), whose remedy every later build takes;
    then each way of building and loading the compiled layer step, in a process of its own (a crash names its
    variant); `chosen` is what the compiled part uses."""
    probe_sizes, layers, variants, at_once = sizes.loader
    try:
        diagnosis = aoti_env.diagnose(directory / "trivial", device.type, at_once=at_once)
    except Exception as exc:  # the variants still run, built as before
        log.error("the loader diagnosis failed: %s", exc)
        diagnosis = {"error": f"{type(exc).__name__}: {str(exc)[-1500:]}", "remedy": "none"}
    log.info("loader diagnosis: cause %s, remedy %s", diagnosis.get("cause"), diagnosis["remedy"])
    aoti_env.apply(diagnosis["remedy"])
    figures = aoti_probe.run_all(directory, probe_sizes, layers, list(variants), device.type, at_once=at_once)
    return {"diagnosis": diagnosis, **figures}


def chosen_variant(check: Check) -> aoti_probe.Variant:
    """The loader part's choice; the default way where that part did not run."""
    probe = check.figures["parts"].get("loader", {})
    if "passed" not in probe:
        return aoti_probe.Variant()
    if probe["chosen"] is None:
        raise RuntimeError("no way of building and loading the compiled layer step ran in the loader part")
    return aoti_probe.VARIANTS[probe["chosen"]]


def compiled_part(model: TempoModel, hour: runs.Video, first: runs.Request, sizes: Sizes, check: Check,
                  directory: Path) -> dict:
    """Every decoding path over the hour's inputs, teacher-forced on the first answer's tokens; the bandwidth floor
    at that cache length; the fastest compiled path within tolerance through the app's own requests."""
    variant = chosen_variant(check)
    embeds = fast_paths.hour_decoder_inputs(model, runs.compression_of(first), hour)
    tokens = first.finished.token_ids
    directory.mkdir(parents=True, exist_ok=True)
    figures = compiled.decoding_paths(model, embeds, tokens, 4 * sizes.answer_tokens, directory,
                                      check.started + sizes.build_until_s, variant)
    bandwidth = check.figures["parts"].get("environment", {}).get("memory_gb_s")
    if bandwidth:
        figures["floor"] = ceilings.decoding_floor(model, len(embeds) + len(tokens) // 2, bandwidth)
    best = figures["fastest_compiled"]
    if best is not None:
        attention = best.removeprefix("compiled_")
        figures["requests"] = compiled.compiled_requests(model, hour, first, figures["packages"][attention]["path"],
                                                         sizes.answer_tokens, variant)
    return {**figures, "variant": variant.__dict__}


def int8_part(model: TempoModel, hour: runs.Video, first: runs.Request, sizes: Sizes) -> dict:
    """The model's linear weights rounded to int8 in place (so last): the decoder's logits over the hour's inputs,
    teacher-forced on the first answer, against the same before rounding; then the hour from its pixels, its peak
    memory and its answer against the first one."""
    embeds = fast_paths.hour_decoder_inputs(model, runs.compression_of(first), hour)
    tokens = first.finished.token_ids
    reference = compiled.eager_logits(model, embeds, tokens)
    saved = quantize_model(model)
    if model.device.type == "cuda":
        torch.cuda.empty_cache()
    model.int8 = True
    rounded = compiled.eager_logits(model, embeds, tokens)
    difference = (rounded - reference).abs()
    relative = ((rounded - reference).norm(dim=-1) / reference.norm(dim=-1)).max().item()
    again = runs.request(model, hour, runs.QUESTION, runs.answer_config(sizes.answer_tokens))
    same = sum(a == b for a, b in zip(again.finished.token_ids, first.finished.token_ids))
    weights = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    return {"saved_gb": round(saved / 1e9, 3), "weights_gb": round(weights / 1e9, 3),
            "logits_max_abs": difference.max().item(), "logits_mean_abs": difference.mean().item(),
            "logits_max_relative": relative, "steps": len(tokens),
            "flipped": int((rounded.argmax(-1) != reference.argmax(-1)).sum()),
            "within_tolerance": relative <= INT8_RTOL, "hour": again.figures(),
            "same_tokens": f"{same}/{len(first.finished.token_ids)}",
            "packed_kernel": model.device.type == "cuda" and packed_kernel()}  # decoding steps' int8 product


def utilisation(model: TempoModel, hour: runs.Video, first: runs.Request, check: Check) -> dict:
    """FLOPs counted over the hour's work, against the first answer's timings and the product ceiling."""
    embeds = fast_paths.hour_decoder_inputs(model, runs.compression_of(first), hour)
    flops = ceilings.counted_flops(model, hour, embeds)
    tflops = check.figures["parts"]["environment"]["matmul_tflops"]
    return {"flops": flops, "ceiling_tflops": tflops, **ceilings.utilisation(flops, first.figures()["timings"], tflops)}


def cold(model: TempoModel, hour: runs.Video, first: runs.Request, sizes: Sizes) -> dict:
    """The cold call with the shipped CUDA-graph step (compiled runs last), the weights moved as ZeroGPU moves them;
    its answer against the first one."""
    weights = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
    reserve = max(0, round(first.peak_memory_gb * 1e9) - weights)  # what the warm hour held beyond its weights
    figures = cold_call.cold_call(model, hour, sizes.answer_tokens, None, reserve)
    figures["same_tokens"] = figures.pop("token_ids") == first.finished.token_ids
    return figures


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
