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
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch

from benchmarks.gpu.checkpoint import TEMPLATE, TEMPO_6B, TINY, Shapes, parameter_count, write_checkpoint
from benchmarks.gpu import runs
from tempo.conformance import BF16_RTOL, check_set
from tempo.config import SamplingConfig
from tempo.model import TempoModel, from_pretrained
from tempo.model.static_decoding import StaticDecoding
from tempo.video.patches import normalize

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
    cached = [runs.request(model, video, runs.QUESTION, config, known=runs.known_compression(first))
              for _ in range(sizes.repeats)]
    encoded = first.compressed.encoded
    vision_cached = runs.request(model, video, runs.FOLLOW_UP, config, segments=encoded)
    pixels_cached = runs.request(model, video, runs.FOLLOW_UP, config)
    return {"asked_again": median_run(cached).figures(), "asked_again_totals_s": [round(r.total_s, 4) for r in cached],
            "new_question_vision_cached": vision_cached.figures(),
            "new_question_pixels_cached": pixels_cached.figures(),
            "keeping_vision_saves_s": round(pixels_cached.total_s - vision_cached.total_s, 4)}


def compressor_batches(model: TempoModel, video: runs.Video, sizes: Sizes) -> dict:
    """Vision tower + compressor over every segment, per micro-batch size and as one batch, as the released code
    compresses (its flash-attention kernel attends every frame pair in one call, as stacked attention does here);
    then with transformers' frame pair by frame pair attention, the baseline of stacking. Each is measured after one
    pass at its size, which warms its kernels."""
    figures = {}
    chunks = model.compressor.vision_chunks
    for micro_batch, stack in [(m, True) for m in (*sizes.micro_batches, None)] + [(4, False), (None, False)]:
        chunks.stack = stack
        try:
            runs.compressor_pass(model, video, micro_batch)
            name = "single_batch" if micro_batch is None else f"micro_batch_{micro_batch}"
            figures[name + ("" if stack else "_per_pair_attention")] = runs.compressor_pass(model, video, micro_batch)
        finally:
            chunks.stack = True
    ours = {name: f for name, f in figures.items() if name.startswith("micro_batch") and "per_pair" not in name}
    best = min(ours, key=lambda name: ours[name]["seconds"])
    figures["fastest"] = best
    figures["speedup_fastest"] = round(figures["single_batch"]["seconds"] / ours[best]["seconds"], 3)
    figures["speedup_default"] = round(figures["single_batch"]["seconds"] / ours["micro_batch_4"]["seconds"], 3)
    figures["stacking_speedup_micro_batch_4"] = round(figures["micro_batch_4_per_pair_attention"]["seconds"] /
                                                      figures["micro_batch_4"]["seconds"], 3)
    figures.update(stacking_agreement(model, video))
    return figures


@torch.inference_mode()
def stacking_agreement(model: TempoModel, video: runs.Video) -> dict:
    """Vision features of one micro-batch with stacked and with per-pair attention: largest relative difference."""
    segments = video.segments[:4]
    rows = normalize(torch.cat([s.pixel_rows for s in segments]).to(model.device), model.geometry)
    grids = [s.grid for s in segments]
    stacked = model.compressor.encode_vision(rows, grids)
    model.compressor.vision_chunks.stack = False
    try:
        per_pair = model.compressor.encode_vision(rows, grids)
    finally:
        model.compressor.vision_chunks.stack = True
    worst = max(((a.embeds.float() - b.embeds.float()).norm() / b.embeds.float().norm()).item()
                for a, b in zip(stacked, per_pair))
    return {"stacked_vs_per_pair_relative": worst,
            "stacked_identical": all(torch.equal(a.embeds, b.embeds) for a, b in zip(stacked, per_pair))}


def decoding(model: TempoModel, video: runs.Video, first: runs.Request, sizes: Sizes) -> dict:
    """Answers from the cached compression with each token a CUDA graph replay against the eager forward, and the
    graph's logits against the eager ones, teacher-forced on the eager answer."""
    decoder, config = model.decoder, runs.answer_config(sizes.answer_tokens)
    known = runs.known_compression(first)
    figures = {}
    for graphs in (False, True):
        decoder.cuda_graphs = graphs
        run = runs.request(model, video, runs.QUESTION, config, known=known)
        figures["graphs" if graphs else "eager"] = {"prefill_s": round(run.prefill_s, 4),
                                                    "per_token_s": round(run.per_token_s, 5),
                                                    "total_s": round(run.total_s, 4),
                                                    "token_ids": run.finished.token_ids}
    decoder.cuda_graphs = True
    figures["same_tokens"] = figures["eager"]["token_ids"] == figures["graphs"]["token_ids"]
    figures["per_token_speedup"] = round(figures["eager"]["per_token_s"] / figures["graphs"]["per_token_s"], 2)
    embeds = hour_decoder_inputs(model, known, video)
    figures.update(graph_agreement(model, embeds, figures["eager"]["token_ids"]))
    figures["step_attention"] = step_attention(model, embeds, 4 * sizes.answer_tokens)
    with contextlib.suppress(Exception):  # a profiler that cannot see the device costs only this figure
        figures["step_profile"] = step_profile(model, embeds)
    return figures


def hour_decoder_inputs(model: TempoModel, known, video: runs.Video) -> torch.Tensor:
    """The decoder's input embeddings [S, d] for the hour's compression under the default allocation."""
    from tempo.allocation import allocate

    allocation = allocate(known.relevance, model.spec.visual_token_budget, 4, model.spec.num_memory_tokens, "ata")
    embeds, _ = model.decoder_inputs(known.memories, allocation, "head", runs.QUESTION, video.plan.tag_times(),
                                     model.spec.context_length)
    return embeds


def static_steps(model: TempoModel, embeds: torch.Tensor, room: int, graph: bool,
                 attention: str = "fused") -> tuple[StaticDecoding, object]:
    """A static decoding after the prefill of `embeds`, and a second (dynamic) cache of that prefill."""
    decoder = model.decoder
    _, cache = decoder.prefill(embeds)
    _, fresh = decoder.prefill(embeds)
    steps = StaticDecoding(decoder.lm, [layer.keys for layer in fresh.layers], [layer.values for layer in fresh.layers],
                           room, graph=graph, attention=attention)
    return steps, cache


@torch.inference_mode()
def graph_agreement(model: TempoModel, embeds: torch.Tensor, tokens: list[int]) -> dict:
    """Largest relative difference (in norm) between the eager and the graphed logits over the answer's steps."""
    decoder = model.decoder
    steps, cache = static_steps(model, embeds, len(tokens), graph=model.device.type == "cuda")
    worst, same = 0.0, 0
    for token in tokens[:-1]:
        eager = decoder.lm(input_ids=torch.tensor([[token]], device=model.device), use_cache=True,
                           **{decoder.cache_argument: cache}).logits[0, -1].float()
        graphed = steps.step(token).float()
        worst = max(worst, ((eager - graphed).norm() / eager.norm()).item())
        same += int(eager.argmax() == graphed.argmax())
    return {"logits_max_relative": worst, "argmax_agree": f"{same}/{len(tokens) - 1}",
            "within_tolerance": worst <= BF16_RTOL if model.dtype != torch.float32 else worst <= 1e-5}


@torch.inference_mode()
def step_attention(model: TempoModel, embeds: torch.Tensor, steps_timed: int) -> dict:
    """One graphed step per way of attending over the hour's cache: milliseconds per step, and the split products'
    logits against the fused kernel's."""
    figures, logits = {}, {}
    graph = model.device.type == "cuda"
    for attention in ("fused", "split"):
        steps, _ = static_steps(model, embeds, steps_timed + 8, graph, attention)
        logits[attention] = torch.stack([steps.step(11 + i) for i in range(8)]).float()  # also warms it up
        runs.synchronize(model.device)
        started = time.perf_counter()
        for i in range(steps_timed):
            steps.step(19 + i)
        runs.synchronize(model.device)
        figures[f"{attention}_ms"] = round(1000 * (time.perf_counter() - started) / steps_timed, 3)
    difference = (logits["fused"] - logits["split"]).norm(dim=-1) / logits["fused"].norm(dim=-1)
    figures["split_vs_fused_relative"] = difference.max().item()
    return figures


@torch.inference_mode()
def step_profile(model: TempoModel, embeds: torch.Tensor) -> dict:
    """Where one eager decoding step spends device time, kernel by kernel (inside a graph the kernels are the
    same; only the launching between them goes)."""
    from torch.profiler import ProfilerActivity, profile

    steps, _ = static_steps(model, embeds, 4, graph=False)
    steps.step(5)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if model.device.type == "cuda" else [])
    with profile(activities=activities) as profiler:
        steps.step(6)
        runs.synchronize(model.device)
    events = profiler.key_averages()

    def device_us(event) -> float:
        return getattr(event, "device_time_total", getattr(event, "cuda_time_total", 0.0))

    kernels = sorted((e for e in events if device_us(e) > 0 and e.key.startswith(("void", "ampere", "sm", "nvjet",
                                                                                   "cutlass", "Memcpy", "Memset"))
                      or (device_us(e) > 0 and "kernel" in e.key.lower())), key=device_us, reverse=True)
    return {"kernel_us": round(sum(device_us(e) for e in kernels), 1), "kernels": sum(e.count for e in kernels),
            "top": [{"name": e.key[:90], "calls": e.count, "us": round(device_us(e), 1)} for e in kernels[:12]]}


def pixels_on_device(model: TempoModel, video: runs.Video) -> dict:
    """Normalising the patch rows on the host and sending floats (before) against sending uint8 and normalising
    on the device (now): time for every segment, and whether the values are the same."""
    device, rows = model.device, [s.pixel_rows for s in video.segments]
    timings, values = {}, {}
    for where in ("host", "device", "host", "device"):  # each twice; the second is kept
        runs.synchronize(device)
        started = time.perf_counter()
        if where == "host":
            out = [normalize(r, model.geometry).to(device) for r in rows]
        else:
            out = [normalize(r.to(device), model.geometry) for r in rows]
        runs.synchronize(device)
        timings[where] = round(time.perf_counter() - started, 4)
        values[where] = out
    same = all(torch.equal(a, b) for a, b in zip(values["host"], values["device"]))
    return {"normalise_on_host_s": timings["host"], "normalise_on_device_s": timings["device"], "identical": same}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu.measure", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="on the CPU with tiny sizes")
    parser.add_argument("--out", default=os.environ.get("OUT", "outputs/gpu-check"), help="default: $OUT")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S",
                        handlers=[logging.StreamHandler(), logging.FileHandler(out / "gpu_check.log", mode="w")])
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
                figures.update(decoding(model, hour, first["hour"], sizes))
        with check.phase("compressor") as figures:
            figures.update(compressor_batches(model, hour, sizes))
        with check.phase("pixels") as figures:
            figures.update(pixels_on_device(model, hour))
    finally:
        headline(check)
        check.save()
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({key: check.figures.get(key) for key in ("device", "hour_seconds", "followup_seconds",
                                                              "peak_memory_gb", "compressor_speedup", "conformance")},
                     indent=1))
    errors = check.figures["errors"]
    if errors:
        print(f"{len(errors)} phase(s) failed or were skipped: {', '.join(errors)}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
