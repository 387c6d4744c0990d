"""The decoder's one-token steps over a preallocated KV cache, so that on a GPU each step replays as one CUDA graph.

Eager decoding launches a few hundred small kernels per token from Python, and on a GPU that launching, not the
arithmetic, sets the pace. Here every tensor a step touches has a fixed address (the token and its position are
buffers filled before each replay), so the whole step is captured once per answer and replayed per token. The
step is Qwen3's decoder layer written out with the model's own modules: the same weights and the same operations
as the eager forward, with the KV cache written in place and attention masked to the positions filled so far.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import Qwen3ForCausalLM

SPLIT = 256  # cache slots per piece of the "split" attention


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class StaticDecoding:
    """Decoding after a prefill: `step(token)` returns the next logits [V] and appends `token` to the cache."""

    def __init__(self, lm: Qwen3ForCausalLM, keys: list[torch.Tensor], values: list[torch.Tensor], room: int,
                 graph: bool, attention: str = "split"):
        """`keys`/`values`: the prefill's cache, one [1, kv_heads, length, head_dim] per layer; `room`: how many
        more tokens it must hold; `graph`: capture the step as a CUDA graph (on a GPU); `attention`: "split"
        (products over `SPLIT`-slot pieces of the cache, summed: 8.7 ms per Tempo-6B step on an H200) or "fused"
        (PyTorch's masked attention kernel: 13.3 ms, half of it in that kernel; benchmarks/gpu)."""
        if attention not in ("fused", "split"):
            raise ValueError(f"attention must be 'fused' or 'split', not {attention!r}")
        self.lm, self.attention = lm, attention
        length = keys[0].shape[2]
        capacity = -(-(length + room) // SPLIT) * SPLIT  # whole pieces for "split"; the slots past the end stay masked
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

    @torch.inference_mode()
    def _forward(self) -> torch.Tensor:
        """One token through every layer: the cache written at `position`, attention over positions <= it."""
        model, config = self.lm.model, self.lm.config
        hidden = model.embed_tokens(self.token)  # [1, 1, d]
        cos, sin = model.rotary_emb(hidden, self.position)  # [1, 1, head_dim] each
        cos, sin = cos[:, None], sin[:, None]  # [1, 1, 1, head_dim]: broadcast over heads
        visible = self.slots <= self.position[0]  # [C]
        slot = self.position[0]  # [1]
        groups = config.num_attention_heads // config.num_key_value_heads
        for layer, block in enumerate(model.layers):
            attention = block.self_attn
            x = block.input_layernorm(hidden)  # [1, 1, d]
            heads = (1, 1, -1, attention.head_dim)
            q = attention.q_norm(attention.q_proj(x).view(heads)).transpose(1, 2)  # [1, H, 1, hd]
            k = attention.k_norm(attention.k_proj(x).view(heads)).transpose(1, 2)  # [1, KV, 1, hd]
            v = attention.v_proj(x).view(heads).transpose(1, 2)  # [1, KV, 1, hd]
            q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
            self.keys[layer].index_copy_(2, slot, k)
            self.values[layer].index_copy_(2, slot, v)
            # Query head h reads KV head h // groups: the heads sharing a KV head become that head's query rows.
            q = q.reshape(1, -1, groups, attention.head_dim)  # [1, KV, G, hd]
            out = self._attend(q, self.keys[layer], self.values[layer], visible, attention.scaling)  # [1, KV, G, hd]
            hidden = hidden + attention.o_proj(out.reshape(1, 1, -1))  # [1, 1, d]
            hidden = hidden + block.mlp(block.post_attention_layernorm(hidden))
        return self.lm.lm_head(model.norm(hidden))[0, -1]  # [V]

    def _attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, visible: torch.Tensor,
                scale: float) -> torch.Tensor:
        """Attention of the query rows q [1, KV, G, hd] over the cache's visible slots."""
        if self.attention == "fused":
            return F.scaled_dot_product_attention(q, keys, values, attn_mask=visible[None, None, None], scale=scale)
        # A few query rows against thousands of slots: one product over the whole cache leaves most of a GPU idle,
        # so the weighted sum runs as one batched product per SPLIT-slot piece, then the pieces are added up.
        scores = torch.matmul(q, keys.transpose(2, 3)) * scale  # [1, KV, G, C]
        weights = torch.softmax(scores.float().masked_fill(~visible, float("-inf")), dim=-1).to(q.dtype)
        kv, g, c = weights.shape[1], weights.shape[2], weights.shape[3]
        pieces = weights.view(kv, g, c // SPLIT, SPLIT).transpose(1, 2)  # [KV, P, G, SPLIT]
        partial = torch.matmul(pieces, values.view(kv, c // SPLIT, SPLIT, -1))  # [KV, P, G, hd]
        return partial.sum(dim=1, dtype=torch.float32).to(q.dtype)[None]  # [1, KV, G, hd]

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
            logits = self.logits.clone()
        else:
            logits = self._forward()
        self.position += 1
        return logits
