"""Operations a decoding step runs per decoder layer, counted with PyTorch's profiler on the CPU.

A layer's count is the difference between a step of a two-layer and of a one-layer decoder at the given shapes, so
what a step does once (embedding, rotation angles, final norm, LM head) is not counted. An operation is one
top-level ATen call that computes something: views (reshape, transpose, slicing) and casts to the dtype a tensor
already has launch no kernel and are left out. On a GPU each counted operation is about one kernel (`F.rms_norm`
is one fused kernel there, a composite of several on the CPU); the GPU check counts the kernels themselves
(`fast_paths.step_profile`).

    python -m benchmarks.gpu.operations [--dtype bfloat16|float32] [--json benchmarks/results/step-operations-cpu.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from tempo.model.fused_step import FusedLayers
from tempo.model.static_decoding import StaticDecoding

# ATen calls that only describe a view of memory (no kernel), and casts that are free when nothing changes.
VIEWS = frozenset({"aten::view", "aten::reshape", "aten::transpose", "aten::t", "aten::slice", "aten::select",
                   "aten::split", "aten::split_with_sizes", "aten::chunk", "aten::unsqueeze", "aten::squeeze",
                   "aten::expand", "aten::as_strided", "aten::permute", "aten::alias", "aten::detach",
                   "aten::_unsafe_view", "aten::narrow", "aten::unbind", "aten::result_type"})
CASTS = frozenset({"aten::to", "aten::contiguous", "aten::type_as"})


@dataclass(frozen=True)
class LayerShapes:
    """A Qwen3 decoder layer's sizes (Tempo-6B's decoder, Qwen3-4B, by default)."""

    hidden: int = 2560
    intermediate: int = 9728
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128


def decoder(shapes: LayerShapes, layers: int, dtype: torch.dtype) -> Qwen3ForCausalLM:
    """A random Qwen3 decoder of `layers` layers at `shapes` (a small vocabulary: the LM head runs once a step)."""
    config = Qwen3Config(hidden_size=shapes.hidden, intermediate_size=shapes.intermediate, num_hidden_layers=layers,
                         num_attention_heads=shapes.heads, num_key_value_heads=shapes.kv_heads,
                         head_dim=shapes.head_dim, vocab_size=256, tie_word_embeddings=True)
    torch.manual_seed(0)
    return Qwen3ForCausalLM(config).to(dtype).eval()


def counted(events: list) -> Counter:
    """Top-level ATen calls that compute, by name: views are left out, and casts that copied nothing."""
    top = [e for e in events if e.name.startswith("aten::")
           and (e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::"))]
    children = Counter(e.cpu_parent.id for e in events if e.cpu_parent is not None)
    return Counter(e.name for e in top if e.name not in VIEWS and not (e.name in CASTS and not children[e.id]))


@torch.inference_mode()
def step_operations(lm: Qwen3ForCausalLM, fused: bool, cache_length: int = 700) -> Counter:
    """The counted operations of one decoding step of `lm` (eager `layer_step` layers, or fused ones)."""
    config = lm.config
    cache = (1, config.num_key_value_heads, cache_length, config.head_dim)
    dtype = lm.model.embed_tokens.weight.dtype
    keys = [torch.zeros(cache, dtype=dtype) for _ in lm.model.layers]
    values = [torch.zeros(cache, dtype=dtype) for _ in lm.model.layers]
    steps = StaticDecoding(lm, keys, values, 8, graph=False, layers=FusedLayers(lm) if fused else None)
    steps.step(5)  # the first step runs once outside the count: lazy set-up is not a step's work
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        steps.step(6)
    return counted(list(profiler.events()))


def per_layer(shapes: LayerShapes = LayerShapes(), dtype: torch.dtype = torch.bfloat16) -> dict:
    """Operations per layer of the eager and the fused step: a two-layer step's count less a one-layer step's."""
    figures: dict = {"shapes": shapes.__dict__, "dtype": str(dtype).removeprefix("torch.")}
    for name, fused in (("eager", False), ("fused", True)):
        one, two = (step_operations(decoder(shapes, layers, dtype), fused) for layers in (1, 2))
        layer = two - one
        figures[name] = {"operations": sum(layer.values()), "by_name": dict(layer.most_common())}
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    figures = per_layer(dtype=getattr(torch, args.dtype))
    for name in ("eager", "fused"):
        print(f"{name}: {figures[name]['operations']} operations a layer  {figures[name]['by_name']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"torch": torch.__version__, **figures}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
