"""The decoder's one-token steps over a preallocated KV cache, so that on a GPU each step replays as one CUDA graph.

Eager decoding launches a few hundred small kernels per token from Python, and on a GPU that launching, not the
arithmetic, sets the pace. Here every tensor a step touches has a fixed address (the token and its position are
buffers filled before each replay), so the whole step is captured once per answer and replayed per token. The
step is Qwen3's decoder layer written out with the model's own modules: the same weights and the same operations
as the eager forward, with the KV cache written in place and attention masked to the positions filled so far.
`layer_step` is that layer; `compiled_decoding` builds it ahead of time into one package every layer runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from transformers import Qwen3ForCausalLM

if TYPE_CHECKING:
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

SPLIT = 256  # cache slots per piece of the "split" and "flash" attention; capacities are whole pieces
ATTENTIONS = ("split", "fused", "flash", "flex")

# One decoder layer's step: (hidden [1, 1, d], cos, sin [1, 1, 1, hd], slot [1], visible [C], keys, values
# [1, KV, C, hd]) -> hidden [1, 1, d], the cache written at `slot`.
LayerStep = Callable[..., torch.Tensor]


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def attend(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor, scale: float,
           attention: str) -> torch.Tensor:
    """Attention of the query rows q [1, KV, G, hd] over the cache's visible slots -> [1, KV, G, hd]."""
    if attention == "fused":
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=visible[None, None, None], scale=scale)
    kv, g, c = q.shape[1], q.shape[2], keys.shape[2]
    if attention == "flash":
        return _split_kv(q, keys, values, visible, scale)
    if attention == "flex":
        return _flex(q, keys, values, visible, scale)
    # A few query rows against thousands of slots: one product over the whole cache leaves most of a GPU idle,
    # so the weighted sum runs as one batched product per SPLIT-slot piece, then the pieces are added up.
    scores = torch.matmul(q, keys.transpose(2, 3)) * scale  # [1, KV, G, C]
    weights = torch.softmax(scores.float().masked_fill(~visible, float("-inf")), dim=-1).to(q.dtype)
    pieces = weights.view(kv, g, c // SPLIT, SPLIT).transpose(1, 2)  # [KV, P, G, SPLIT]
    partial = torch.matmul(pieces, values.view(kv, c // SPLIT, SPLIT, -1))  # [KV, P, G, hd]
    return partial.sum(dim=1, dtype=torch.float32).to(q.dtype)[None]  # [1, KV, G, hd]


def _split_kv(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor,
              scale: float) -> torch.Tensor:
    """Flash-decoding: each SPLIT-slot piece gets its own softmax (its maximum, sum and weighted values), and the
    pieces are combined by their log-sum-exp, so that no pass over the whole cache waits for another; a compiler
    fuses each piece's work into one kernel."""
    kv, g, c, hd = q.shape[1], q.shape[2], keys.shape[2], keys.shape[3]
    pieces = c // SPLIT
    k = keys.view(kv, pieces, SPLIT, hd)  # [KV, P, S, hd]
    v = values.view(kv, pieces, SPLIT, hd)
    scores = torch.matmul(q.view(kv, 1, g, hd), k.transpose(2, 3)).float() * scale  # [KV, P, G, S]
    scores = scores.masked_fill(~visible.view(1, pieces, 1, SPLIT), float("-inf"))
    # A piece with no visible slot keeps a finite maximum, so its weights are exp(-inf) = 0, not NaN.
    top = scores.amax(dim=-1, keepdim=True).clamp(min=-1e30)  # [KV, P, G, 1]
    weights = torch.exp(scores - top)
    partial = torch.matmul(weights.to(v.dtype), v).float()  # [KV, P, G, hd]
    rescale = torch.exp(top - top.amax(dim=1, keepdim=True))  # [KV, P, G, 1]
    total = (weights.sum(dim=-1, keepdim=True) * rescale).sum(dim=1)  # [KV, G, 1]
    return ((partial * rescale).sum(dim=1) / total).to(q.dtype)[None]  # [1, KV, G, hd]


def _flex(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor,
          scale: float) -> torch.Tensor:
    """PyTorch's FlexAttention with the hidden slots masked by a score modification; compiled (as in a package),
    a single query row runs its split-KV decoding kernel on a GPU. Eagerly it is a slow reference."""
    from torch.nn.attention.flex_attention import flex_attention

    def masked(score: torch.Tensor, batch: torch.Tensor, head: torch.Tensor, q_index: torch.Tensor,
               kv_index: torch.Tensor) -> torch.Tensor:  # 0-d tensors: FlexAttention maps it over every score
        return torch.where(visible[kv_index], score, float("-inf"))

    kv, g, hd = q.shape[1], q.shape[2], q.shape[3]
    out = flex_attention(q.reshape(1, kv * g, 1, hd), keys, values, score_mod=masked, scale=scale, enable_gqa=True)
    return out.reshape(1, kv, g, hd)


def layer_step(block: Qwen3DecoderLayer, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
               slot: torch.Tensor, visible: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
               attention: str) -> torch.Tensor:
    """One token through one Qwen3 decoder layer (`block`): its key and value written at `slot` of the layer's
    cache, attention over the `visible` slots; returns the layer's output [1, 1, d]."""
    attn = block.self_attn
    x = block.input_layernorm(hidden)  # [1, 1, d]
    heads = (1, 1, -1, attn.head_dim)
    q = attn.q_norm(attn.q_proj(x).view(heads)).transpose(1, 2)  # [1, H, 1, hd]
    k = attn.k_norm(attn.k_proj(x).view(heads)).transpose(1, 2)  # [1, KV, 1, hd]
    v = attn.v_proj(x).view(heads).transpose(1, 2)  # [1, KV, 1, hd]
    q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
    keys.index_copy_(2, slot, k)
    values.index_copy_(2, slot, v)
    # Query head h reads KV head h // groups: the heads sharing a KV head become that head's query rows.
    q = q.reshape(1, keys.shape[1], -1, attn.head_dim)  # [1, KV, G, hd]
    out = attend(q, keys, values, visible, attn.scaling, attention)  # [1, KV, G, hd]
    hidden = hidden + attn.o_proj(out.reshape(1, 1, -1))  # [1, 1, d]
    return hidden + block.mlp(block.post_attention_layernorm(hidden))


class StaticDecoding:
    """Decoding after a prefill: `step(token)` returns the next logits [V] and appends `token` to the cache."""

    def __init__(self, lm: Qwen3ForCausalLM, keys: list[torch.Tensor], values: list[torch.Tensor], room: int,
                 graph: bool, attention: str = "split", layers: Sequence[LayerStep] | None = None):
        """`keys`/`values`: the prefill's cache, one [1, kv_heads, length, head_dim] per layer; `room`: how many
        more tokens it must hold; `graph`: capture the step as a CUDA graph (on a GPU); `attention`: "split"
        (products over `SPLIT`-slot pieces of the cache, summed: 8.7 ms per Tempo-6B step on an H200), "fused"
        (PyTorch's masked attention kernel: 13.3 ms, half of it in that kernel; benchmarks/gpu) or "flash"
        (split-KV, each piece its own softmax); `layers`: one step per decoder layer built ahead of time
        (`compiled_decoding.CompiledLayers`), which then attend as they were built; default: the eager layers."""
        if attention not in ATTENTIONS:
            raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}, not {attention!r}")
        self.lm, self.attention = lm, attention
        blocks = lm.model.layers
        self.layers: Sequence[LayerStep] = layers if layers is not None else [
            functools.partial(layer_step, block, attention=attention) for block in blocks]
        length = keys[0].shape[2]
        capacity = -(-(length + room) // SPLIT) * SPLIT  # whole pieces; the slots past the end stay masked
        shape = (1, keys[0].shape[1], capacity, keys[0].shape[3])
        self.keys = [torch.zeros(shape, dtype=k.dtype, device=k.device) for k in keys]  # [1, kv, C, d] per layer
        self.values = [torch.zeros(shape, dtype=v.dtype, device=v.device) for v in values]
        for layer, (k, v) in enumerate(zip(keys, values)):
            self.keys[layer][:, :, :length] = k
            self.values[layer][:, :, :length] = v
        device = keys[0].device
        self.token = torch.zeros(1, 1, dtype=torch.long, device=device)  # [1, 1]
        self.position = torch.full((1, 1), length, dtype=torch.long, device=device)  # [1, 1]
        self.slots = torch.arange(capacity, device=device)  # [C]
        self.logits: torch.Tensor | None = None
        self.graph = self._capture() if graph else None

    @property
    def capacity(self) -> int:
        return self.slots.shape[0]

    @torch.inference_mode()
    def _forward(self) -> torch.Tensor:
        """One token through every layer: the cache written at `position`, attention over positions <= it."""
        model = self.lm.model
        hidden = model.embed_tokens(self.token)  # [1, 1, d]
        cos, sin = model.rotary_emb(hidden, self.position)  # [1, 1, head_dim] each
        cos, sin = cos[:, None], sin[:, None]  # [1, 1, 1, head_dim]: broadcast over heads
        visible = self.slots <= self.position[0]  # [C]
        slot = self.position[0]  # [1]
        step_inputs = getattr(self.layers, "step_inputs", None)  # fused layers read them in their own form
        if step_inputs is not None:
            cos, sin, visible = step_inputs(cos, sin, visible)
        for layer, run in enumerate(self.layers):
            hidden = run(hidden, cos, sin, slot, visible, self.keys[layer], self.values[layer])
        return self.lm.lm_head(model.norm(hidden))[0, -1]  # [V]

    def _capture(self) -> torch.cuda.CUDAGraph:
        """Warm the step up on a side stream (as capturing requires), then record it; neither moves the position,
        and the slot both write to is written again by the first real step."""
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self._forward()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.logits = self._forward()
        return graph

    def step(self, token: int) -> torch.Tensor:
        self.token.fill_(token)
        if self.graph is not None:
            self.graph.replay()
            assert self.logits is not None  # the captured step's output
            logits = self.logits.clone()
        else:
            logits = self._forward()
        self.position += 1
        return logits
