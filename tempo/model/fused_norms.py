"""RMSNorm as one fused call, for the compressor's and the decoder's language models on a GPU.

transformers' Qwen3 and Qwen3-VL text norms run eight operations each (cast, square, mean, add, rsqrt, multiply,
cast, multiply), every one a pass over the activations. In the compressor's prefill (some 700 tokens a segment, 16
segments a micro-batch) those passes are memory-bound work beside the products: 28 layers times four norms. PyTorch's
`F.rms_norm` does the same in one kernel on CUDA. The swap keeps each norm's weight as the same parameter, so
checkpoints load and save as before.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class FusedRMSNorm(nn.Module):
    """An RMSNorm computed by `F.rms_norm` over the last dimension, holding the replaced norm's own weight."""

    def __init__(self, weight: nn.Parameter, eps: float):
        super().__init__()
        self.weight = weight
        self.variance_epsilon = eps

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(hidden, (hidden.shape[-1],), self.weight, self.variance_epsilon)

    def extra_repr(self) -> str:
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}"


def is_rms_norm(module: nn.Module) -> bool:
    """transformers' RMSNorm of a Qwen3 or Qwen3-VL text model (a weight over the last dimension)."""
    return type(module).__name__ in ("Qwen3RMSNorm", "Qwen3VLTextRMSNorm")


def fuse_norms(module: nn.Module) -> int:
    """Every Qwen3 RMSNorm under `module` replaced in place by a `FusedRMSNorm` with the same weight; returns how
    many."""
    swapped = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            weight, eps = getattr(child, "weight", None), getattr(child, "variance_epsilon", None)
            if is_rms_norm(child) and isinstance(weight, nn.Parameter) and isinstance(eps, float):
                setattr(parent, name, FusedRMSNorm(weight, eps))
                swapped += 1
    return swapped
