"""What the device could do at best, and how close the run's parts come: the matrix-product and memory-bandwidth
ceilings measured on the device, the FLOPs of the vision tower, the compressor and the prefill counted from their
operations' shapes (torch's FLOP formulas over the hour's real work), their share of the ceiling (`*_mfu`), and
the bandwidth floor of one decoding step (its weights and KV cache read once)."""

from __future__ import annotations

import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from benchmarks.gpu import runs
from tempo.engine.steps import compress_batch, encode_batch, micro_batches
from tempo.model import TempoModel
from tempo.timing import Timer


class CountedFlops(TorchDispatchMode):
    """FLOPs of every operation run inside, by torch's formulas from its shapes (FlopCounterMode's, without its module
    tracking, which needs autograd and so fails under inference mode). On a CPU the attention kernel has no formula
    and counts nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        formula = flop_registry.get(func._overloadpacket)
        if formula is None:  # under inference mode composite operations (matmul) arrive whole: count their parts
            with self:  # the mode is off inside its own handler
                parts = func.decompose(*args, **kwargs)
            return func(*args, **kwargs) if parts is NotImplemented else parts
        out = func(*args, **kwargs)
        self.total += formula(*grouped_as_full(func, args), **kwargs, out_val=out)
        return out


def grouped_as_full(func, args: tuple) -> tuple:
    """Attention with fewer key/value heads than query heads (grouped-query) as torch's formulas expect it: key and
    value viewed (not copied) at the query's head count, which is the work the kernel does."""
    if "scaled_dot_product" not in str(func) or len(args) < 3 or not all(isinstance(a, torch.Tensor) for a in args[:3]):
        return args
    query, key, value = args[:3]  # (batch, heads, tokens, head_dim)
    if key.dim() != 4 or key.shape[1] == query.shape[1]:
        return args
    heads = query.shape[1]
    key = key[:, :1].expand(key.shape[0], heads, *key.shape[2:])
    value = value[:, :1].expand(value.shape[0], heads, *value.shape[2:])
    return (query, key, value, *args[3:])


def matmul_tflops(device: torch.device, dtype: torch.dtype, size: int, repeats: int = 10) -> float:
    """TFLOP/s of a square `size` product in `dtype`, after three to warm up."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):
        a @ a
    runs.synchronize(device)
    started = time.perf_counter()
    for _ in range(repeats):
        a @ a
    runs.synchronize(device)
    return repeats * 2 * size**3 / (time.perf_counter() - started) / 1e12


def memory_gb_s(device: torch.device, nbytes: int, repeats: int = 10) -> float:
    """Device memory bandwidth: a copy of `nbytes` reads and writes each byte once."""
    source = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    target = torch.empty_like(source)
    target.copy_(source)
    runs.synchronize(device)
    started = time.perf_counter()
    for _ in range(repeats):
        target.copy_(source)
    runs.synchronize(device)
    return repeats * 2 * nbytes / (time.perf_counter() - started) / 1e9


def device_ceilings(device: torch.device) -> dict:
    """The rates the figures are measured against: a large product in the model's dtype (bf16 on a GPU), device
    memory bandwidth, and on a GPU host-to-device copies (pinned and pageable: how weights and pixels arrive)."""
    if device.type != "cuda":  # the dry run: small sizes, float32 as the CPU model runs
        return {"matmul_tflops": round(matmul_tflops(device, torch.float32, 512), 4),
                "memory_gb_s": round(memory_gb_s(device, 2**26, 3), 1)}
    tflops = round(matmul_tflops(device, torch.bfloat16, 8192), 1)
    figures = {"bf16_matmul_tflops": tflops, "matmul_tflops": tflops,
               "memory_gb_s": round(memory_gb_s(device, 2**31), 1)}
    for kind, host in (("pinned", torch.empty(2**30, dtype=torch.uint8).pin_memory()),
                       ("pageable", torch.empty(2**30, dtype=torch.uint8))):
        host.to(device)
        runs.synchronize(device)
        started = time.perf_counter()
        host.to(device)
        runs.synchronize(device)
        figures[f"host_to_device_{kind}_gb_s"] = round(2**30 / (time.perf_counter() - started) / 1e9, 1)
    return figures


def decoding_floor(model: TempoModel, length: int, memory_gb_s: float) -> dict:
    """The least time a decoding step can take at a cache of `length` positions: every decoder weight (the tied
    embedding once: it is the LM head) and every cached key and value read once, at the measured bandwidth."""
    lm = model.decoder.lm
    weights = sum(p.numel() * p.element_size() for p in lm.parameters())  # parameters() lists a tied one once
    config = lm.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    element = next(lm.parameters()).element_size()
    kv = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * length * element
    return {"decoder_weights_gb": round(weights / 1e9, 3), "kv_cache_gb": round(kv / 1e9, 3), "kv_length": length,
            "memory_gb_s": memory_gb_s, "floor_ms": round(1000 * (weights + kv) / (memory_gb_s * 1e9), 4)}


@torch.inference_mode()
def counted_flops(model: TempoModel, video: runs.Video, embeds: torch.Tensor, micro_batch: int = 4) -> dict:
    """FLOPs of the vision tower and the compressor over every segment of `video` (in micro-batches, as a request
    runs them) and of the prefill of `embeds`, counted from each operation's shapes (`CountedFlops`; attention
    kernels counted whole, as they are shaped, causal or not)."""
    vision, compress, prefill = CountedFlops(), CountedFlops(), CountedFlops()
    for batch in micro_batches(video.segments, micro_batch):
        with vision:
            encoded = encode_batch(model, batch, Timer())
        with compress:
            compress_batch(model, encoded, runs.QUESTION, video.plan, Timer())
    with prefill:
        model.decoder.prefill(embeds)
    return {"vision": vision.total, "compress": compress.total, "prefill": prefill.total,
            "prefill_tokens": len(embeds)}


def utilisation(flops: dict, timings: dict, tflops: float) -> dict:
    """Achieved TFLOP/s per part over the measured product ceiling (`timings`: a request's seconds per part)."""
    figures = {}
    for name, part in (("vision", "vision"), ("compressor", "compress"), ("prefill", "prefill")):
        count = flops["prefill" if name == "prefill" else part]
        achieved = count / timings[part] / 1e12
        figures[f"{name}_tflop"] = float(f"{count / 1e12:.4g}")
        figures[f"{name}_tflops"] = float(f"{achieved:.4g}")
        figures[f"{name}_mfu"] = float(f"{achieved / tflops:.4g}")
    return figures
