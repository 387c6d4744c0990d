"""Weight-only int8: a model's linear layers keep int8 weights with one scale per output channel, and compute in the
model's dtype. It halves the bf16 weights' memory (Tempo-6B's 12.3 GB towards a 16 GB card) for a small deviation
(benchmarks/int8_deviation.py measures it on the conformance set).

The layer is the project's own rather than torchao's: torchao 0.18 loads its compiled kernels only from torch 2.11
on, while ZeroGPU runs 2.8 to 2.11, and its quantized weights are tensor subclasses that `torch.export` and
`spaces`' AoT helpers must unwrap first. A plain module with an int8 buffer and a scale exports as it is.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import nn

LEVELS = 127  # symmetric: -127..127, so that a weight and its negation round alike
# At most this many rows of activations (a decoding step has one) multiply the int8 matrix as it is, in PyTorch's
# weight-only int8 kernel: reading one byte a weight instead of widening the matrix to two first, which made int8
# decoding 2.2x slower than bf16 on an H200. More rows (a prefill) are bound by arithmetic, and widen.
PACKED_ROWS = 16


class Int8Linear(nn.Module):
    """y = (x @ q.T) * scale + bias, with q [out, in] int8 and scale [out] in the model's dtype: the matrix is
    widened to x's dtype as it is read (weight-only: activations stay in the model's dtype)."""

    weight: torch.Tensor
    scale: torch.Tensor

    def __init__(self, weight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.register_buffer("weight", weight)  # [out, in] int8
        self.register_buffer("scale", scale)  # [out]
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> Int8Linear:
        """`linear` rounded to int8 per output channel (each row's largest magnitude maps to `LEVELS`)."""
        weight = linear.weight.detach()
        largest = weight.abs().amax(dim=1).float().clamp(min=1e-12)  # [out]
        scale = largest / LEVELS  # [out]
        quantized = torch.round(weight.float() / scale[:, None]).clamp(-LEVELS, LEVELS).to(torch.int8)  # [out, in]
        bias = None if linear.bias is None else linear.bias.detach()
        return cls(quantized, scale.to(weight.dtype), bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if uses_packed_kernel(x, self.in_features):
            flat = x.reshape(-1, self.in_features)  # [rows, in]
            out = torch._weight_int8pack_mm(flat, self.weight, self.scale.to(x.dtype)).view(*x.shape[:-1], -1)
        else:
            out = F.linear(x, self.weight.to(x.dtype)) * self.scale.to(x.dtype)  # [..., out]
        return out if self.bias is None else out + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per-channel"


def uses_packed_kernel(x: torch.Tensor, in_features: int) -> bool:
    """Whether `x` (bf16 on CUDA, at most `PACKED_ROWS` rows) is multiplied by the int8 matrix as it is."""
    return (x.is_cuda and x.dtype == torch.bfloat16 and x.numel() // in_features <= PACKED_ROWS
            and packed_kernel())


@functools.cache
def packed_kernel() -> bool:
    """Whether this torch multiplies bf16 activations by int8 weights on CUDA (`_weight_int8pack_mm`); asked once."""
    try:
        x = torch.ones(1, 64, dtype=torch.bfloat16, device="cuda")
        weight = torch.ones(8, 64, dtype=torch.int8, device="cuda")
        out = torch._weight_int8pack_mm(x, weight, torch.ones(8, dtype=torch.bfloat16, device="cuda"))
        return bool((out == 64).all())
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


# What `from_pretrained(int8=True)` rounds: every linear layer of the decoder's transformer and of the compressor
# (its vision tower and language model). The decoder's LM head stays as it is: it is the embedding table (tied).
PARTS = ("decoder.lm.model", "compressor.vlm")


def quantize(module: nn.Module, skip: Iterable[str] = ()) -> int:
    """Every nn.Linear under `module` replaced in place by an `Int8Linear`, except those whose qualified name starts
    with one of `skip`; returns the bytes of weight memory saved."""
    skipped = tuple(skip)
    saved = 0
    for name, parent in list(module.named_modules()):
        for child_name, linear in list(parent.named_children()):
            qualified = f"{name}.{child_name}" if name else child_name
            if not isinstance(linear, nn.Linear) or (skipped and qualified.startswith(skipped)):
                continue
            replacement = Int8Linear.from_linear(linear)
            scale = replacement.scale
            saved += linear.weight.numel() * linear.weight.element_size() - replacement.weight.numel() \
                - scale.numel() * scale.element_size()
            setattr(parent, child_name, replacement)
    return saved


def quantize_model(model: nn.Module, parts: Iterable[str] = PARTS) -> int:
    """`quantize` over each of `parts` (qualified submodule names) of `model`; returns the bytes saved."""
    return sum(quantize(model.get_submodule(part)) for part in parts)
