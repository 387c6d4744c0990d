"""The decoder's one-token layer step in about twenty operations, for `StaticDecoding` on a GPU.

`static_decoding.layer_step` runs Qwen3's layer as the model's modules write it: some seventy operations a layer
(each RMSNorm eight, RoPE ten, seven projections, casts and masks), each a kernel of its own, and at batch 1 a step is
bound by those kernels, not by the bytes it reads. Here the same layer is written with what PyTorch fuses:
one `F.rms_norm` per norm, Q, K and V as one projection and gate and up as one (merged once, `merge_projections`:
the modules' own weights become views of the merged ones, so nothing is held twice), q and k normed and rotated in
one pass, the softmax scale folded into q's norm, residual additions inside the output projections (`addmm`), and
attention over the cache without copying keys for the grouped heads. The step's shared inputs (the rotation's signed
sine, the mask as an additive bias) are made once per step, not once per layer (`FusedLayers.step_inputs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from transformers import Qwen3ForCausalLM

from .static_decoding import SPLIT

if TYPE_CHECKING:
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer


@dataclass(frozen=True)
class FusedWeights:
    """One decoder layer's tensors as the fused step reads them (views of the model's own, nothing copied but the
    small per-head norm table)."""

    input_norm: torch.Tensor  # [d]
    qkv: torch.Tensor  # [(H + 2 KV) hd, d]: q's rows, then k's, then v's
    qk_norm: torch.Tensor  # [H + KV, hd]: q_norm's weight times the softmax scale per query head, k_norm's per KV head
    o_t: torch.Tensor  # [H hd, d]: o_proj's weight, transposed (a view)
    post_norm: torch.Tensor  # [d]
    gate_up: torch.Tensor  # [2 I, d]: gate's rows, then up's
    down_t: torch.Tensor  # [I, d]: down_proj's weight, transposed (a view)
    eps: float
    heads: int
    kv_heads: int
    head_dim: int


def _merged(linears: Sequence[nn.Linear]) -> torch.Tensor:
    """The linears' weights stacked by rows into one tensor, each linear's weight then a view of its rows: a merged
    projection reads one weight, and the eager forward still runs on the same storage. Merged once: a second call
    finds the views in place, unless something (`module.to`) has moved the weights since."""
    merged = getattr(linears[0], "merged_weight", None)
    if merged is not None and [merged[start:].data_ptr() for start in _row_starts(linears)] == [
            linear.weight.data_ptr() for linear in linears]:  # a moved weight has new storage, hence a new address
        return merged
    merged = torch.cat([linear.weight.detach() for linear in linears])  # [sum of out, in]
    linears[0].merged_weight = merged  # a plain attribute, not a parameter: the checkpoint keeps its own names
    for linear, start in zip(linears, _row_starts(linears)):
        linear.weight.data = merged[start:start + linear.weight.shape[0]]
    return merged


def _row_starts(linears: Sequence[nn.Linear]) -> list[int]:
    starts, start = [], 0
    for linear in linears:
        starts.append(start)
        start += linear.weight.shape[0]
    return starts


def fusable(block: Qwen3DecoderLayer) -> bool:
    """Whether `block` is a Qwen3 layer the fused step can read: plain linears without biases (int8 weights are
    another module, and keep the eager step)."""
    attn, mlp = block.self_attn, block.mlp
    linears = (attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj)
    return (all(type(linear) is nn.Linear and linear.bias is None for linear in linears)
            and getattr(block.self_attn, "sliding_window", None) is None)


def merge_projections(block: Qwen3DecoderLayer) -> FusedWeights:
    """`block`'s projections merged (Q, K, V; gate, up), its modules' weights re-pointed at the merged tensors."""
    attn, mlp = block.self_attn, block.mlp
    head_dim = attn.head_dim
    heads = attn.q_proj.weight.shape[0] // head_dim
    kv_heads = attn.k_proj.weight.shape[0] // head_dim
    q_norm = attn.q_norm.weight.detach() * attn.scaling  # the scale is linear: it passes through RoPE unchanged
    qk_norm = torch.cat([q_norm.expand(heads, head_dim), attn.k_norm.weight.detach().expand(kv_heads, head_dim)])
    return FusedWeights(
        input_norm=block.input_layernorm.weight.detach(), qkv=_merged([attn.q_proj, attn.k_proj, attn.v_proj]),
        qk_norm=qk_norm.contiguous(), o_t=attn.o_proj.weight.detach().t(),
        post_norm=block.post_attention_layernorm.weight.detach(),
        gate_up=_merged([mlp.gate_proj, mlp.up_proj]), down_t=mlp.down_proj.weight.detach().t(),
        eps=block.input_layernorm.variance_epsilon, heads=heads, kv_heads=kv_heads, head_dim=head_dim)


def fused_layer_step(w: FusedWeights, hidden: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor,
                     slot: torch.Tensor, bias: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """One token through one layer: what `layer_step` computes, in about twenty operations. `cos`, `signed_sin`
    [hd] and `bias` [C] (0 where visible, -inf elsewhere) come from `FusedLayers.step_inputs`."""
    d, hd, heads, kv = hidden.shape[-1], w.head_dim, w.heads, w.kv_heads
    residual = hidden.view(1, d)  # [1, d]
    qkv = F.linear(F.rms_norm(residual, (d,), w.input_norm, w.eps), w.qkv).view(heads + 2 * kv, hd)  # [H+2KV, hd]
    qk = F.rms_norm(qkv[:heads + kv], (hd,), None, w.eps) * w.qk_norm  # [H+KV, hd], q's rows pre-scaled
    qk = torch.addcmul(qk * cos, qk.roll(hd // 2, dims=-1), signed_sin)  # RoPE: x cos + rotate_half(x) sin
    keys.index_copy_(2, slot, qk[heads:].view(1, kv, 1, hd))
    values.index_copy_(2, slot, qkv[heads + kv:].view(1, kv, 1, hd))
    q = qk[:heads].view(kv, heads // kv, hd)  # [KV, G, hd]: query head h reads KV head h // G
    scores = torch.baddbmm(bias, q, keys[0].transpose(1, 2))  # [KV, G, C], hidden slots at -inf
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(hidden.dtype)  # [KV, G, C]
    c = keys.shape[2]
    # One product over the whole cache leaves most of a GPU idle at batch 1, so the weighted sum runs per
    # SPLIT-slot piece (one batched product), then the pieces are added up (as `attend`'s "split").
    pieces = weights.view(kv, heads // kv, c // SPLIT, SPLIT).transpose(1, 2)  # [KV, P, G, SPLIT]
    partial = torch.matmul(pieces, values[0].view(kv, c // SPLIT, SPLIT, hd))  # [KV, P, G, hd]
    out = partial.sum(dim=1, dtype=torch.float32).to(hidden.dtype).view(1, heads * hd)  # [1, H hd]
    residual = torch.addmm(residual, out, w.o_t)  # [1, d]: the attention's output added to the residual
    gate, up = F.linear(F.rms_norm(residual, (d,), w.post_norm, w.eps), w.gate_up).chunk(2, dim=-1)  # [1, I] each
    return torch.addmm(residual, F.silu(gate) * up, w.down_t).view(1, 1, d)  # [1, 1, d]


class FusedLayers(list["FusedLayer"]):
    """Every decoder layer of `lm` as a fused step, in order, as `StaticDecoding`'s `layers`; building it merges the
    model's projections in place (the eager forward is unchanged)."""

    def __init__(self, lm: Qwen3ForCausalLM):
        blocks = list(lm.model.layers)
        if not all(fusable(block) for block in blocks):
            raise ValueError("the fused step reads plain Qwen3 layers (no int8 weights, biases or sliding windows)")
        super().__init__(FusedLayer(merge_projections(block)) for block in blocks)

    @staticmethod
    def step_inputs(cos: torch.Tensor, sin: torch.Tensor, visible: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The step's shared inputs as the fused layers read them, made once per step: cos [hd], the sine signed for
        rotating by `roll` (rotate_half(x) = roll(x) * [-1 on the first half, +1 on the second]), the mask as a bias."""
        cos, sin = cos.reshape(-1), sin.reshape(-1)  # [hd]
        half = sin.shape[0] // 2
        signed_sin = torch.cat([-sin[:half], sin[half:]])  # [hd]
        bias = torch.zeros(visible.shape, dtype=cos.dtype, device=cos.device).masked_fill(~visible, float("-inf"))
        return cos, signed_sin, bias  # bias: [C]


class FusedLayer:
    """One layer's fused step, called as `StaticDecoding` calls a layer."""

    def __init__(self, weights: FusedWeights):
        self.weights = weights

    def __call__(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, slot: torch.Tensor,
                 visible: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return fused_layer_step(self.weights, hidden, cos, sin, slot, visible, keys, values)
