"""The GPU check's parts, each a function returning its figures, that `measure` runs in order."""

from __future__ import annotations

import logging
import os
import platform
import time
from pathlib import Path

import torch

from benchmarks.gpu import aoti_env, aoti_probe, ceilings, cold_call, compiled, fast_paths, runs
from benchmarks.gpu.checkpoint import TEMPLATE, parameter_count, write_checkpoint
from benchmarks.gpu.record import Check, Sizes
from tempo.conformance import check_set
from tempo.conformance.report import BF16_RTOL
from tempo.model import TempoModel, from_pretrained
from tempo.model.int8 import packed_kernel, quantize_model

log = logging.getLogger("gpu-check")

INT8_RTOL = 2 * BF16_RTOL  # bf16's own rounding and int8's, each within BF16_RTOL on the conformance set


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
