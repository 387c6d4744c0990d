"""The GPU check's decoding paths, side by side in one run: the model's own layers in a CUDA graph ('split' products
over pieces of the cache, PyTorch's fused attention kernel, split-KV (flash-decoding) attention), the fused layer
step that ships (`tempo.model.fused_step`), and the model's layer step
compiled ahead of time (`tempo.model.compiled_decoding`: torch.export + AOTInductor) with each way of attending,
FlexAttention included. Every path is teacher-forced on the same tokens against the eager forward: its logits must
stay within tolerance and its greedy choice must be the eager one at every step. Each is timed cold (package loaded,
graph captured, first step) and warm (milliseconds per step), against the bandwidth floor."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from benchmarks.gpu import aoti_env, runs
from benchmarks.gpu.aoti_probe import Variant
from benchmarks.gpu.fast_paths import static_steps
from tempo.conformance.report import BF16_RTOL
from tempo.model import TempoModel
from tempo.model.compiled_decoding import CompiledLayers, build
from tempo.model.fused_step import FusedLayers

log = logging.getLogger("gpu-check")
# Built in this order while the check has time: the quickest to build first (8-10 s on an H200; flash took 75 s).
COMPILED = ("split", "flex", "flash")
UNCOMPILED = ("split", "fused", "flash")  # eager layers in a CUDA graph, each way of attending
FUSED = "fused_step"  # the fused layer step (`tempo.model.fused_step`) in a CUDA graph: the shipped default
# Compiled FlexAttention is the GPU's (a Triton template). Inductor's CPU template does not compile with a free cache
# length (torch 2.13: "'ks2' was not declared"), and built for one length, a process that had loaded decord (the
# conformance part's reader) double-freed or hung at exit in decord's copy of the C++ thread-exit handler.
NOT_ON_CPU = {"flex": "compiled FlexAttention is for a GPU (Inductor's CPU template fails with a free length)"}


def tolerance(model: TempoModel) -> float:
    return BF16_RTOL if model.dtype != torch.float32 else 1e-5


def build_packages(model: TempoModel, directory: Path, deadline: float, settings: str = "weightless") -> dict:
    """Each COMPILED attention's package under `directory` while time.perf_counter() < `deadline`, built with
    `settings` (`compiled_decoding.BUILDS`): its path, build seconds and size, or why it is missing."""
    figures = {}
    for attention in COMPILED:
        if time.perf_counter() > deadline:
            figures[attention] = {"error": "skipped: out of time"}
            continue
        if model.device.type == "cpu" and attention in NOT_ON_CPU:
            figures[attention] = {"skipped": NOT_ON_CPU[attention]}
            continue
        path = directory / f"decoder-layer-{attention}.pt2"
        try:
            seconds = build(model.decoder.lm, path, attention, settings)
            aoti_env.after_build(path)  # as the loader part's diagnosis asked
        except Exception as exc:  # recorded; the other packages are still built
            log.error("building the %s package failed: %s", attention, exc)
            figures[attention] = {"error": f"{type(exc).__name__}: {str(exc)[-1500:]}"}
            continue
        figures[attention] = {"path": str(path), "build_s": round(seconds, 2),
                              "package_mb": round(os.path.getsize(path) / 1e6, 2)}
    return figures


@torch.inference_mode()
def eager_logits(model: TempoModel, embeds: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """The eager forward's logits [T, V] after each of `tokens`, from the prefill of `embeds`."""
    decoder = model.decoder
    _, cache = decoder.prefill(embeds)
    out = [decoder.lm(input_ids=torch.tensor([[token]], device=model.device), use_cache=True,
                      **{decoder.cache_argument: cache}).logits[0, -1].float() for token in tokens]
    return torch.stack(out)


@torch.inference_mode()
def one_path(model: TempoModel, embeds: torch.Tensor, tokens: list[int], reference: torch.Tensor, steps_timed: int,
             attention: str, package: str | None, variant: Variant = Variant()) -> dict:
    """One path: cold (its layers loaded, the graph captured, the first step), its logits against `reference`,
    then warm milliseconds per step. `package`: a compiled layer step's file, `FUSED` for the fused step, or None
    for the eager layers."""
    device, graph = model.device, model.device.type == "cuda"
    runs.synchronize(device)
    started = time.perf_counter()
    layers: Sequence | None = None
    if package == FUSED:
        layers = FusedLayers(model.decoder.lm)
    elif package:
        layers = CompiledLayers(package, model.decoder.lm, variant.loader, variant.single_threaded)
    loaded = time.perf_counter() - started
    room, captured = len(tokens) + steps_timed + 8, {}
    try:
        steps, _ = static_steps(model, embeds, room, graph, attention=attention, layers=layers)
    except RuntimeError as exc:  # a step that cannot be captured is still timed, launched kernel by kernel
        if not graph:
            raise
        log.error("capturing %s %s failed: %s", attention, "compiled" if package else "", exc)
        captured = {"graph_error": str(exc)[-800:]}
        steps, _ = static_steps(model, embeds, room, False, attention=attention, layers=layers)
    first = steps.step(tokens[0]).float()
    runs.synchronize(device)
    cold = time.perf_counter() - started
    logits = torch.stack([first] + [steps.step(token).float() for token in tokens[1:]])
    relative = ((reference - logits).norm(dim=-1) / reference.norm(dim=-1)).max().item()
    same = torch.equal(reference.argmax(-1), logits.argmax(-1))
    runs.synchronize(device)
    started = time.perf_counter()
    for i in range(steps_timed):
        steps.step(tokens[i % len(tokens)])
    runs.synchronize(device)
    ms = 1000 * (time.perf_counter() - started) / steps_timed
    return {"ms_per_token": round(ms, 4), "cold_s": round(cold, 4), "load_s": round(loaded, 4),
            "logits_max_relative": relative, "same_tokens": same, "capacity": steps.capacity,
            "graph": steps.graph is not None, **captured, "within_tolerance": relative <= tolerance(model) and same}


def decoding_paths(model: TempoModel, embeds: torch.Tensor, tokens: list[int], steps_timed: int, directory: Path,
                   deadline: float, variant: Variant = Variant()) -> dict:
    """Every path over the hour's decoder inputs, teacher-forced on `tokens` (the eager answer); packages are built
    first (`build_packages`) and loaded as `variant` says. `fastest_compiled` is the quickest compiled path within
    tolerance."""
    reference = eager_logits(model, embeds, tokens)
    figures: dict = {"packages": build_packages(model, directory, deadline, variant.build), "paths": {}}
    paths = [(f"graphs_{a}", a, None) for a in UNCOMPILED] + [("graphs_fused_step", "split", FUSED)]
    paths += [(f"compiled_{a}", a, built["path"]) for a, built in figures["packages"].items() if "path" in built]
    for name, attention, layers in paths:
        try:
            figures["paths"][name] = one_path(model, embeds, tokens, reference, steps_timed, attention, layers,
                                              variant)
        except Exception as exc:  # a path that cannot run is recorded; the verdict fails it
            log.error("decoding path %s failed: %s", name, exc)
            figures["paths"][name] = {"error": f"{type(exc).__name__}: {str(exc)[-1500:]}"}
    baseline = figures["paths"].get("graphs_split", {}).get("ms_per_token")
    for path in figures["paths"].values():
        if baseline and path.get("ms_per_token"):
            path["speedup_vs_graphs_split"] = round(baseline / path["ms_per_token"], 3)
    good = {name: path for name, path in figures["paths"].items()
            if name.startswith("compiled_") and path.get("within_tolerance")}
    figures["fastest_compiled"] = min(good, key=lambda name: good[name]["ms_per_token"]) if good else None
    return figures


def compiled_requests(model: TempoModel, video: runs.Video, first: runs.Request, package: str,
                      answer_tokens: int, variant: Variant = Variant()) -> dict:
    """The app's own path with the compiled layers attached to the decoder: the hour from its pixels and asked
    again from its compression, each against the first answer's tokens."""
    decoder, config = model.decoder, runs.answer_config(answer_tokens)
    decoder.compiled = CompiledLayers(package, decoder.lm, variant.loader, variant.single_threaded)
    try:
        hour = runs.request(model, video, runs.QUESTION, config)
        again = runs.request(model, video, runs.QUESTION, config, compression=runs.compression_of(first))
    finally:
        decoder.compiled = None
    return {"hour": hour.figures(), "asked_again": again.figures(), "package": package,
            "compiled_used": model.device.type == "cuda",  # elsewhere `generate` decodes eagerly
            "same_tokens": hour.finished.token_ids == first.finished.token_ids == again.finished.token_ids}
