"""Growing the decoder deeper without changing what it computes (LLaMA Pro's block expansion): every new layer
starts as a copy of the layer before it with its attention and MLP output projections zeroed, so it adds nothing
to the residual stream. The grown decoder answers exactly as the one it grew from, and training goes on from there
instead of from stage 2 again."""

from __future__ import annotations

import re

import torch

from .recipe import DecoderSize

LAYER_KEY = re.compile(r"decoder\.lm\.model\.layers\.(\d+)\.(.+)")
ZEROED = ("self_attn.o_proj.weight", "mlp.down_proj.weight")  # what a layer writes to the residual stream


def decoder_layers(tensors: dict[str, torch.Tensor]) -> int:
    """How many layers the decoder in a state dict has."""
    return 1 + max(int(match[1]) for match in map(LAYER_KEY.fullmatch, tensors) if match)


def layer_sources(old: int, new: int) -> list[tuple[int, bool]]:
    """For each layer of a decoder grown from `old` to `new` layers: the old layer it starts from, and whether it
    is a new (identity) copy. New layers are spread evenly, each right after the old layer it copies."""
    if new < old:
        raise ValueError(f"a decoder grows, it does not shrink ({old} -> {new} layers)")
    sources = []
    for layer in range(old):
        copies = (new - old) * (layer + 1) // old - (new - old) * layer // old
        sources += [(layer, False)] + [(layer, True)] * copies
    return sources


def grown(tensors: dict[str, torch.Tensor], layers: int) -> dict[str, torch.Tensor]:
    """The same state dict with a decoder of `layers` layers that computes what the old one did."""
    by_layer: dict[int, dict[str, torch.Tensor]] = {}
    rest = {}
    for name, tensor in tensors.items():
        match = LAYER_KEY.fullmatch(name)
        if match:
            by_layer.setdefault(int(match[1]), {})[match[2]] = tensor
        else:
            rest[name] = tensor
    for index, (source, new) in enumerate(layer_sources(len(by_layer), layers)):
        for part, tensor in by_layer[source].items():
            copy = torch.zeros_like(tensor) if new and part in ZEROED else tensor.clone()
            rest[f"decoder.lm.model.layers.{index}.{part}"] = copy
    return rest


HEAD_WIDTH = 32  # the tiny decoder's attention head width; widening adds heads, never widens one
NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight")
INIT_STD = 0.02  # the Qwen3 config's initializer_range: what a new head's or unit's input weights start as


def decoder_size(tensors: dict[str, torch.Tensor]) -> DecoderSize:
    """The size of the decoder in a state dict."""
    prefix = "decoder.lm.model.layers.0."
    return DecoderSize(layers=decoder_layers(tensors), width=tensors["decoder.lm.model.embed_tokens.weight"].shape[1],
                       heads=tensors[prefix + "self_attn.q_proj.weight"].shape[0] // HEAD_WIDTH,
                       kv_heads=tensors[prefix + "self_attn.k_proj.weight"].shape[0] // HEAD_WIDTH,
                       mlp_width=tensors[prefix + "mlp.gate_proj.weight"].shape[0])


def padded(tensor: torch.Tensor, shape: tuple[int, ...], fill: str, generator: torch.Generator) -> torch.Tensor:
    """`tensor` in the top-left corner of a tensor of `shape`, the rest zeros or drawn at the init scale."""
    if fill == "zeros":
        out = torch.zeros(shape, dtype=tensor.dtype)
    else:
        out = (torch.randn(shape, generator=generator) * INIT_STD).to(tensor.dtype)
    out[tuple(slice(0, n) for n in tensor.shape)] = tensor
    return out


def widened(tensors: dict[str, torch.Tensor], size: DecoderSize, seed: int = 0) -> dict[str, torch.Tensor]:
    """The same state dict with a decoder `size.width` wide, with `size.heads` query and `size.kv_heads`
    key-value heads and `size.mlp_width` MLP units, that gives the old one's answers (its logits move by the norms'
    epsilon, which does not scale with their weights: ~3e-4 of ~5).

    The residual stream's new dimensions stay zero: every weight that writes to them (token embeddings, the
    projector, attention and MLP outputs) starts at zero there, and the RMS norms' old weights are scaled by
    sqrt(old / new width), since a norm over the wider stream divides by a smaller RMS. New heads and MLP units
    read at the init scale and write nothing (their output columns are zero), so they change no answer but get
    gradients. New heads come after the old ones, so every old query head keeps its key-value head."""
    old = decoder_size(tensors)
    if size.width < old.width or size.heads < old.heads or size.kv_heads < old.kv_heads or \
            size.mlp_width < old.mlp_width:
        raise ValueError(f"a decoder grows, it does not shrink ({old} -> {size})")
    if size.heads * old.kv_heads != old.heads * size.kv_heads:
        raise ValueError(f"{size.heads} heads over {size.kv_heads} key-value heads regroup the old "
                         f"{old.heads} over {old.kv_heads}")
    generator = torch.Generator().manual_seed(seed)
    width, queries, keys = size.width, size.heads * HEAD_WIDTH, size.kv_heads * HEAD_WIDTH
    norm_scale = (old.width / width) ** 0.5
    shapes = {"self_attn.q_proj.weight": ((queries, width), "init"), "self_attn.k_proj.weight": ((keys, width), "init"),
              "self_attn.v_proj.weight": ((keys, width), "init"),
              "self_attn.o_proj.weight": ((width, queries), "zeros"),
              "mlp.gate_proj.weight": ((size.mlp_width, width), "init"),
              "mlp.up_proj.weight": ((size.mlp_width, width), "init"),
              "mlp.down_proj.weight": ((width, size.mlp_width), "zeros")}
    out = {}
    for name, tensor in tensors.items():
        match = LAYER_KEY.fullmatch(name)
        part = match[2] if match else None
        if part in shapes:
            shape, fill = shapes[part]
            out[name] = padded(tensor, shape, fill, generator)
        elif part in NORMS or name == "decoder.lm.model.norm.weight":
            scaled = tensor.float() * norm_scale  # in float32: a half-precision state would round the scale off
            out[name] = torch.cat([scaled, scaled.mean().expand(width - old.width)])
        elif name in ("decoder.lm.model.embed_tokens.weight", "decoder.lm.lm_head.weight"):
            out[name] = padded(tensor, (tensor.shape[0], width), "zeros", generator)
        elif name in ("decoder.mm_projector.weight", "decoder.mm_projector.bias"):
            out[name] = padded(tensor, (width, *tensor.shape[1:]), "zeros", generator)
        else:  # the compressor, the base head, and the per-head query and key norms
            out[name] = tensor
    return grown(out, size.layers)


def decoder_parameters(size: DecoderSize, vocabulary: int, memory_width: int) -> int:
    """Weights in a decoder of `size` (tied embeddings, a linear projector from `memory_width`)."""
    queries, keys = size.heads * HEAD_WIDTH, size.kv_heads * HEAD_WIDTH
    layer = size.width * (2 * queries + 2 * keys) + 3 * size.width * size.mlp_width + 2 * size.width + 2 * HEAD_WIDTH
    return vocabulary * size.width + size.layers * layer + size.width + (memory_width + 1) * size.width
