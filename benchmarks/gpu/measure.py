"""The GPU check's measurements, in one process: conformance on the device, Tempo-6B at its real sizes loaded from
the released format, a 1-hour and a 10-minute video end to end with every stage timed, follow-ups, the compressor
against the released single batch, and each speed-up against its baseline in the same run.

    python -m benchmarks.gpu.measure --out DIR        # on a CUDA GPU (benchmarks/gpu/check runs this)
    python -m benchmarks.gpu.measure --dry-run --out DIR   # the same sequence on the CPU with tiny sizes

Every phase is written to DIR/gpu_check.json as soon as it ends, so a run cut short still leaves what it measured;
a phase that fails is recorded with its error and the next one runs. DIR/gpu_check.log is the log.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

from benchmarks.gpu.checkpoint import TEMPLATE, TEMPO_6B, TINY, Shapes, parameter_count, write_checkpoint
from benchmarks.gpu import fast_paths, runs
from tempo.conformance import BF16_RTOL, check_set
from tempo.config import SamplingConfig
from tempo.model import TempoModel, from_pretrained

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
    budget_s: float  # phases that would start after this are skipped


GPU = Sizes(TEMPO_6B, "cuda", 1024, (640, 360), 64, 3, (1, 4, 8, 16, 32), None, 330.0)
DRY_RUN = Sizes(TINY, "cpu", 64, (160, 90), 8, 1, (1, 4), ("shapes_red_circle",), 600.0)
VIDEOS = {"hour": 3600.0, "ten_minutes": 600.0}


class Check:
    """The figures so far, saved after every phase; phases run in order until the time budget is spent."""

    def __init__(self, sizes: Sizes, out: Path):
        self.sizes, self.out = sizes, out
        self.started = time.perf_counter()
        self.figures: dict = {"device": None, "dry_run": sizes is DRY_RUN, "phases": {}, "errors": {}}

    def save(self) -> None:
        self.figures["elapsed_s"] = round(time.perf_counter() - self.started, 1)
        (self.out / "gpu_check.json").write_text(json.dumps(self.figures, indent=2, default=str) + "\n")

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[dict]:
        """A phase's figures go under phases[name]; its failure is recorded, not raised."""
        elapsed = time.perf_counter() - self.started
        figures: dict = {}
        if elapsed > self.sizes.budget_s:
            log.warning("skipping %s: %.0f s of the %.0f s budget spent", name, elapsed, self.sizes.budget_s)
            self.figures["errors"][name] = "skipped: out of time"
            self.save()
            yield figures
            return
        log.info("phase %s (at %.1f s)", name, elapsed)
        begun = time.perf_counter()
        try:
            yield figures
        except Exception as exc:  # the next phase still runs; the record says what broke
            log.error("phase %s failed: %s", name, exc)
            self.figures["errors"][name] = "".join(traceback.format_exception(exc))[-3000:]
        figures["phase_s"] = round(time.perf_counter() - begun, 2)
        self.figures["phases"][name] = figures
        self.save()


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
        figures.update(device_ceilings(device))
    return figures


def device_ceilings(device: torch.device) -> dict:
    """The two rates the GPU figures are measured against: a large bf16 matrix product, and host-to-device copies
    (pinned and pageable; how weights and pixels reach the GPU)."""
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ a
    runs.synchronize(device)
    started = time.perf_counter()
    for _ in range(10):
        a @ a
    runs.synchronize(device)
    tflops = 10 * 2 * 8192**3 / (time.perf_counter() - started) / 1e12
    figures = {"bf16_matmul_tflops": round(tflops, 1)}
    for kind, host in (("pinned", torch.empty(2**30, dtype=torch.uint8).pin_memory()),
                       ("pageable", torch.empty(2**30, dtype=torch.uint8))):
        host.to(device)
        runs.synchronize(device)
        started = time.perf_counter()
        host.to(device)
        runs.synchronize(device)
        figures[f"host_to_device_{kind}_gb_s"] = round(2**30 / (time.perf_counter() - started) / 1e9, 1)
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
    for name, video in videos.items():
        with check.phase(name) as figures:
            results = [runs.request(model, video, runs.QUESTION, config, keep_vision=True)
                       for _ in range(sizes.repeats if name == "hour" else 1)]
            run = kept[name] = median_run(results)
            figures.update(run.figures())
            figures["totals_s"] = [round(r.total_s, 4) for r in results]
            figures["segments"] = len(video.segments)
            compressing = run.stages["vision"] + run.stages["compress"]
            figures["segments_per_s"] = round(len(video.segments) / compressing, 2)
            figures["memory_tokens_kept"] = run.finished.tokens_used
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


def headline(check: Check) -> None:
    """The keys every run of the check has at its top, so that runs can be compared."""
    phases, figures = check.figures["phases"], check.figures
    conformance_figures = phases.get("conformance", {})
    if "float32" in conformance_figures:
        f32, b16 = conformance_figures["float32"], conformance_figures["bfloat16"]
        figures["conformance"] = (f"{f32['passed']}/{f32['checks']} float32, {b16['passed']}/{b16['checks']} bf16 "
                                  f"within {BF16_RTOL:.0e} ({b16['discrete_flipped']} of {b16['discrete']} "
                                  "discrete results flipped)")
    hour = phases.get("hour", {})
    figures["hour_seconds"] = hour.get("total_s")
    figures["followup_seconds"] = phases.get("follow_ups", {}).get("asked_again", {}).get("total_s")
    peaks = [p.get("peak_memory_gb") for p in (hour, phases.get("ten_minutes", {})) if p.get("peak_memory_gb")]
    figures["peak_memory_gb"] = max(peaks) if peaks else None
    figures["compressor_speedup"] = phases.get("compressor", {}).get("speedup_fastest")


def verdicts(figures: dict) -> list[str]:
    """What the run shows to be wrong: conformance failures, and fast paths whose outputs left their tolerance."""
    phases, failed = figures["phases"], []
    for dtype, result in phases.get("conformance", {}).items():
        if isinstance(result, dict) and result.get("failures"):
            failed.append(f"conformance in {dtype}: {len(result['failures'])} checks failed")
    decoding = phases.get("decoding", {})
    if decoding and not decoding.get("within_tolerance"):
        failed.append(f"graphed decoding's logits off by {decoding.get('logits_max_relative')} relative")
    split = decoding.get("step_attention", {}).get("split_vs_fused_relative")
    if split is not None and split > BF16_RTOL:
        failed.append(f"split attention off the fused kernel by {split:.2e} relative")
    if phases.get("follow_ups", {}).get("same_answer_from_cache") is False:
        failed.append("the answer from the cached compression differs from the first answer")
    stacked = phases.get("compressor", {}).get("stacked_vs_per_pair_relative")
    if stacked is not None and stacked > BF16_RTOL:
        failed.append(f"stacked vision attention off the per-pair path by {stacked:.2e} relative")
    if phases.get("pixels", {}).get("identical") is False:
        failed.append("pixels normalised on the device differ from the host's")
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu.measure", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="on the CPU with tiny sizes")
    parser.add_argument("--out", default=os.environ.get("OUT", "outputs/gpu-check"), help="default: $OUT")
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
    check = Check(sizes, out)
    scratch = Path(tempfile.mkdtemp(prefix="tempo-gpu-check-", dir=scratch_parent(sizes)))
    os.environ.setdefault("TEMPO_CACHE", str(scratch / "cache"))
    try:
        with check.phase("environment") as figures:
            figures.update(environment(device))
            check.figures["device"] = figures.get("gpu", "cpu")
        with check.phase("conformance") as figures:
            figures.update(conformance(sizes, device))
        model = None
        with check.phase("load") as figures:
            model, loaded = load_model(sizes, device, scratch / "checkpoint")
            figures.update(loaded)
        shutil.rmtree(scratch / "checkpoint", ignore_errors=True)
        if model is None:
            return 1
        sampling = SamplingConfig(max_frames=sizes.max_frames)
        videos: dict[str, runs.Video] = {}
        with check.phase("videos") as figures:
            videos.update({name: runs.make_video(name, seconds, sampling, sizes.frame_size, model)
                           for name, seconds in VIDEOS.items()})
            figures["segments"] = {name: len(video.segments) for name, video in videos.items()}
            figures["patches_per_segment"] = videos["hour"].segments[0].pixel_rows.shape[0]
        if len(videos) != len(VIDEOS):
            return 1
        with check.phase("warm_up") as figures:
            figures["total_s"] = runs.request(model, videos["ten_minutes"], runs.QUESTION,
                                              runs.answer_config(4)).total_s
        first = end_to_end(model, videos, sizes, check)
        hour = videos["hour"]
        if "hour" in first:
            with check.phase("follow_ups") as figures:
                figures.update(follow_ups(model, hour, first["hour"], sizes))
            with check.phase("decoding") as figures:
                figures.update(fast_paths.decoding(model, hour, first["hour"], sizes.answer_tokens))
        with check.phase("compressor") as figures:
            figures.update(fast_paths.compressor_batches(model, hour, sizes.micro_batches))
        with check.phase("pixels") as figures:
            figures.update(fast_paths.pixels_on_device(model, hour))
    finally:
        headline(check)
        check.figures["failed"] = verdicts(check.figures)
        check.save()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({key: check.figures.get(key) for key in ("device", "hour_seconds", "followup_seconds",
                                                              "peak_memory_gb", "compressor_speedup", "conformance")},
                     indent=1))
    errors, failed = check.figures["errors"], check.figures["failed"]
    if errors:
        print(f"{len(errors)} phase(s) failed or were skipped: {', '.join(errors)}", file=sys.stderr)
    for line in failed:
        print(f"FAILED: {line}", file=sys.stderr)
    return 1 if errors or failed else 0


if __name__ == "__main__":
    sys.exit(main())
