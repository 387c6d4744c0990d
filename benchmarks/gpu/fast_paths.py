"""The GPU check's comparisons of each fast path with its baseline, in the same run: the vision tower's stacked
attention against transformers' pair-by-pair calls (and micro-batches against the released single batch), decoding
steps replayed as CUDA graphs against the eager forward (the ways a step attends and compiled steps are in
`compiled`), and pixels normalised on the device against on the host."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence

import torch

from benchmarks.gpu import operations, runs
from tempo.conformance.report import BF16_RTOL
from tempo.events import Compression
from tempo.model import TempoModel
from tempo.model.fused_step import FusedLayers
from tempo.model.static_decoding import StaticDecoding
from tempo.video.patches import normalize


def compressor_batches(model: TempoModel, video: runs.Video, micro_batches: tuple[int, ...]) -> dict:
    """Vision tower + compressor over every segment, per micro-batch size and as one batch, as the released code
    compresses (its flash-attention kernel attends every frame pair in one call, as stacked attention does here);
    then with transformers' frame pair by frame pair attention, the baseline of stacking. Each is measured after one
    pass at its size, which warms its kernels."""
    figures = {}
    chunks = model.compressor.vision_chunks
    for micro_batch, stack in [(m, True) for m in (*micro_batches, None)] + [(4, False), (None, False)]:
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


def decoding(model: TempoModel, video: runs.Video, first: runs.Request, answer_tokens: int) -> dict:
    """Answers from the cached compression three ways: the eager forward, CUDA graphs of the model's own layers
    (`graphs`) and of the fused step (`fused`, the default); each graph's logits against the eager ones,
    teacher-forced on the eager answer; each step's kernels, and its operations per layer counted on the CPU."""
    decoder, config = model.decoder, runs.answer_config(answer_tokens)
    compression = runs.compression_of(first)
    figures: dict = {}
    for name, graphs, fused in (("eager", False, False), ("graphs", True, False), ("fused", True, True)):
        decoder.cuda_graphs, decoder.fused_steps = graphs, fused
        run = runs.request(model, video, runs.QUESTION, config, compression=compression)
        figures[name] = {"prefill_s": round(run.prefill_s, 4), "per_token_s": round(run.per_token_s, 5),
                         "total_s": round(run.total_s, 4), "token_ids": run.finished.token_ids}
    decoder.cuda_graphs, decoder.fused_steps = True, True
    figures["same_tokens"] = figures["eager"]["token_ids"] == figures["graphs"]["token_ids"] \
        == figures["fused"]["token_ids"]
    figures["per_token_speedup"] = round(figures["eager"]["per_token_s"] / figures["graphs"]["per_token_s"], 2)
    figures["fused_speedup"] = round(figures["graphs"]["per_token_s"] / figures["fused"]["per_token_s"], 2)
    embeds = hour_decoder_inputs(model, compression, video)
    tokens = figures["eager"]["token_ids"]
    figures.update(graph_agreement(model, embeds, tokens))
    figures["fused"].update(graph_agreement(model, embeds, tokens, FusedLayers(decoder.lm)))
    layers = len(decoder.lm.model.layers)
    for name, fused in (("step_profile", None), ("fused_step_profile", FusedLayers(decoder.lm))):
        with contextlib.suppress(Exception):  # a profiler that cannot see the device costs only this figure
            figures[name] = step_profile(model, embeds, fused)
            figures[name]["kernels_per_layer"] = round(figures[name]["kernels"] / layers, 1)
    lm_config = decoder.lm.config
    shapes = operations.LayerShapes(lm_config.hidden_size, lm_config.intermediate_size, lm_config.num_attention_heads,
                                    lm_config.num_key_value_heads, lm_config.head_dim)
    figures["operations_per_layer"] = {name: counted["operations"] for name, counted in
                                       operations.per_layer(shapes, model.dtype).items() if name in ("eager", "fused")}
    return figures


def hour_decoder_inputs(model: TempoModel, compression: Compression, video: runs.Video) -> torch.Tensor:
    """The decoder's input embeddings [S, d] for the hour's compression under the default allocation."""
    from tempo.allocation import allocate

    allocation = allocate(compression.relevance, model.spec.visual_token_budget, 4, model.spec.num_memory_tokens, "ata")
    embeds, _ = model.decoder_inputs(compression.memories, allocation, "head", runs.QUESTION, video.plan.tag_times(),
                                     model.spec.context_length)
    return embeds


def static_steps(model: TempoModel, embeds: torch.Tensor, room: int, graph: bool,
                 **options) -> tuple[StaticDecoding, object]:
    """A static decoding after the prefill of `embeds` (with StaticDecoding's `options`: how it attends, its
    layers), and a second (dynamic) cache of that prefill."""
    decoder = model.decoder
    _, cache = decoder.prefill(embeds)
    _, fresh = decoder.prefill(embeds)
    steps = StaticDecoding(decoder.lm, [layer.keys for layer in fresh.layers], [layer.values for layer in fresh.layers],
                           room, graph=graph, **options)
    return steps, cache


@torch.inference_mode()
def graph_agreement(model: TempoModel, embeds: torch.Tensor, tokens: list[int], layers: Sequence | None = None
                    ) -> dict:
    """Largest relative difference (in norm) between the eager and the graphed logits over the answer's steps
    (`layers`: the step's, default the model's own)."""
    decoder = model.decoder
    steps, cache = static_steps(model, embeds, len(tokens), graph=model.device.type == "cuda", layers=layers)
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
def step_profile(model: TempoModel, embeds: torch.Tensor, layers: Sequence | None = None) -> dict:
    """Where one decoding step (of `layers`, default the model's own) spends device time, kernel by kernel, run
    without a graph (inside one the kernels are the same; only the launching between them goes)."""
    from torch.profiler import ProfilerActivity, profile

    steps, _ = static_steps(model, embeds, 4, graph=False, layers=layers)
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
