"""Qwen3-VL's vision attention with a whole micro-batch of frame pairs attended in one call.

The vision tower attends within each pair of frames (a `cu_seqlens` chunk). Without flash-attention's variable-length
kernel, transformers calls attention once per chunk: 16 small calls per layer for a micro-batch of four 8-frame
segments, each too small to fill a GPU, and one host synchronisation per layer to read the chunk lengths. The chunks of
a video all have the same length, so here they are stacked and attended in one call, and the lengths are read once
per forward pass. Chunks of different lengths (segments of different sizes in one batch) take transformers' path.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.nn.functional as F
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionAttention, apply_rotary_pos_emb_vision


class ChunkLengths:
    """The chunk lengths of the `cu_seqlens` last seen (every layer of a forward pass gets the same tensor), and
    whether equal chunks are stacked (`stack`; off, every call takes transformers' path)."""

    def __init__(self) -> None:
        self.stack = True
        self.seen: torch.Tensor | None = None
        self.lengths: list[int] = []

    def of(self, cu_seqlens: torch.Tensor) -> list[int]:
        if cu_seqlens is not self.seen:
            self.seen, self.lengths = cu_seqlens, (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
        return self.lengths


if TYPE_CHECKING:
    class StackedChunkAttention(Qwen3VLVisionAttention):
        """A vision attention layer as `stack_chunks` leaves it (it stays a Qwen3VLVisionAttention): the shared
        chunk lengths, transformers' forward kept as the fallback, and the stacked-chunk forward."""

        chunk_lengths: ChunkLengths
        chunked_forward: Callable[..., torch.Tensor]
        forward: Callable[..., torch.Tensor]


def stacked_chunk_attention(self: StackedChunkAttention, hidden_states: torch.Tensor, cu_seqlens: torch.Tensor,
                            position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
                            **kwargs: Any) -> torch.Tensor:
    """`Qwen3VLVisionAttention.forward` for equal chunks: the same projections, rotary embedding and scaled dot-product
    attention within each chunk, with the chunks as the batch."""
    if not self.chunk_lengths.stack or len(set(lengths := self.chunk_lengths.of(cu_seqlens))) != 1:
        return self.chunked_forward(hidden_states, cu_seqlens, position_embeddings=position_embeddings, **kwargs)
    tokens = hidden_states.shape[0]
    q, k, v = self.qkv(hidden_states).reshape(tokens, 3, self.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
    assert position_embeddings is not None  # the vision blocks always pass them
    cos, sin = position_embeddings
    q, k = apply_rotary_pos_emb_vision(q, k, cos, sin)  # [N, heads, hd] each
    chunks, length = len(lengths), lengths[0]
    q, k, v = (t.reshape(chunks, length, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))  # [n, heads, L, hd]
    out = F.scaled_dot_product_attention(q, k, v, scale=self.scaling)  # [n, heads, L, hd]
    return self.proj(out.transpose(1, 2).reshape(tokens, -1))  # [N, d]


def stack_chunks(vision_tower: torch.nn.Module) -> ChunkLengths:
    """Give every attention layer of `vision_tower` the stacked-chunk forward (transformers' stays as the fallback;
    flash-attention's variable-length kernel is left alone). Returns the layers' shared `ChunkLengths`."""
    lengths = ChunkLengths()
    for module in vision_tower.modules():
        if isinstance(module, Qwen3VLVisionAttention) and "flash" not in str(module.config._attn_implementation):
            layer = cast("StackedChunkAttention", module)  # what the next three lines make of it
            layer.chunk_lengths = lengths
            layer.chunked_forward = layer.forward
            layer.forward = types.MethodType(stacked_chunk_attention, layer)
    return lengths
