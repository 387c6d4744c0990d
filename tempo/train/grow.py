"""Growing the decoder deeper without changing what it computes (LLaMA Pro's block expansion): every new layer
starts as a copy of the layer before it with its attention and MLP output projections zeroed, so it adds nothing
to the residual stream. The grown decoder answers exactly as the one it grew from, and training goes on from there
instead of from stage 2 again."""

from __future__ import annotations

import re

import torch

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
