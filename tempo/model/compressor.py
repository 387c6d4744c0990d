"""Local compressor: Qwen3-VL reads one segment and the question, then k_max learnable memory tokens.

Under causal attention the memory tokens' final hidden states are the segment memory H_i, and the hidden
state just before them (the end of the routing prompt) gives the zero-shot relevance s_i, in one pass.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from transformers import PreTrainedConfig, Qwen3VLConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

from ..video.segments import VisionFeatures
from .vision_attention import stack_chunks


class CompressorOutput(NamedTuple):
    """A micro-batch's compression: memories [B, k_max, d_s] and relevance [B] (float32)."""

    memories: torch.Tensor
    relevance: torch.Tensor


def rope_positions(prompt_ids: list[int], video_token_id: int, group_hw: tuple[int, int],
                   total_length: int) -> torch.Tensor:
    """Qwen3-VL M-RoPE (t, h, w) positions for one prompt followed by appended (memory) tokens.

    Text advances all three axes by one. Each frame group's h x w placeholder tokens share t and spread
    over h and w; the text after a group starts at its largest position + 1.
    """
    ids = torch.tensor(prompt_ids)
    is_video = (ids == video_token_id).tolist()
    h, w = group_hw
    rows = torch.arange(h).repeat_interleave(w)
    cols = torch.arange(w).repeat(h)
    positions = torch.empty(3, total_length, dtype=torch.long)
    position, i = 0, 0
    while i < len(prompt_ids):
        if is_video[i]:
            positions[0, i:i + h * w] = position
            positions[1, i:i + h * w] = position + rows
            positions[2, i:i + h * w] = position + cols
            position += max(h, w)
            i += h * w
        else:
            j = i + 1
            while j < len(prompt_ids) and not is_video[j]:
                j += 1
            positions[:, i:j] = torch.arange(position, position + j - i)
            position += j - i
            i = j
    positions[:, len(prompt_ids):] = torch.arange(position, position + total_length - len(prompt_ids))
    return positions


class LocalCompressor(nn.Module):
    """Qwen3-VL (vision tower + language model, no LM head) plus the learnable memory tokens."""

    relevance_direction: torch.Tensor  # a buffer (registered below)

    def __init__(self, config: Qwen3VLConfig, num_memory_tokens: int):
        super().__init__()
        # transformers types the sub-configs as its constructor takes them (a dict, or None); built, they are configs
        assert isinstance(config.text_config, PreTrainedConfig) and isinstance(config.vision_config, PreTrainedConfig)
        self.vlm = Qwen3VLModel(config)
        self.vision_chunks = stack_chunks(self.vlm.visual)  # a micro-batch's frame pairs attended in one call
        self.compression_tokens = nn.Parameter(torch.empty(1, num_memory_tokens, config.text_config.hidden_size))
        self.video_token_id = config.video_token_id
        self.merge_size = config.vision_config.spatial_merge_size
        # w_yes - w_no [d_s] from the *base* model's LM head: filled in by the loader (it is not in the
        # checkpoint, hence not persistent), kept in float32 like the release.
        self.register_buffer("relevance_direction", torch.zeros(config.text_config.hidden_size, dtype=torch.float32),
                             persistent=False)

    @property
    def num_memory_tokens(self) -> int:
        return self.compression_tokens.shape[1]

    def encode_vision(self, pixel_values: torch.Tensor, grids: list[tuple[int, int, int]]) -> list[VisionFeatures]:
        """Run the vision tower over several segments' patch rows at once and split the result per segment."""
        param = self.compression_tokens
        grid_thw = torch.tensor(grids, dtype=torch.long, device=param.device)  # [B, 3]
        output = self.vlm.visual(pixel_values.to(param.device, param.dtype), grid_thw=grid_thw)
        sizes = [t * h * w // self.merge_size**2 for t, h, w in grids]  # merged tokens per segment
        embeds = output.pooler_output.split(sizes)  # [tokens_i, d_s] each
        deepstack = [feature.split(sizes) for feature in output.deepstack_features]
        return [VisionFeatures(embeds[i], [layer[i] for layer in deepstack], grids[i]) for i in range(len(grids))]

    def hidden_states(self, prompts: list[list[int]], vision: list[VisionFeatures],
                      appended: torch.Tensor | None = None) -> tuple[torch.Tensor, list[int]]:
        """Final hidden states [B, width, d_s] of right-padded prompts, each followed by the `appended` [n, d_s]
        embeddings (the memory tokens) right after its own last token; also returns the prompt lengths.

        Padding sits at the end and is masked, so under causal attention it never reaches a real position.
        """
        param = self.compression_tokens
        device, extra = param.device, 0 if appended is None else appended.shape[0]
        lengths = [len(p) for p in prompts]
        width = max(lengths) + extra
        ids = torch.zeros(len(prompts), width, dtype=torch.long)  # [B, W]
        mask = torch.zeros(len(prompts), width, dtype=torch.long)  # [B, W]
        positions = torch.zeros(3, len(prompts), width, dtype=torch.long)  # [(t, h, w), B, W]
        for b, (prompt, features) in enumerate(zip(prompts, vision)):
            ids[b, :len(prompt)] = torch.tensor(prompt)
            mask[b, :len(prompt) + extra] = 1
            group_hw = (features.grid[1] // self.merge_size, features.grid[2] // self.merge_size)
            positions[:, b, :len(prompt) + extra] = rope_positions(prompt, self.video_token_id, group_hw,
                                                                   len(prompt) + extra)
        ids, mask, positions = ids.to(device), mask.to(device), positions.to(device)

        language_model = self.vlm.language_model
        embeds = language_model.embed_tokens(ids)  # [B, W, d_s]
        video_mask = ids == self.video_token_id  # [B, W]
        embeds[video_mask] = torch.cat([f.embeds for f in vision]).to(embeds.dtype)
        if appended is not None:
            for b, length in enumerate(lengths):
                embeds[b, length:length + extra] = appended.to(embeds.dtype)
        deepstack = [torch.cat([f.deepstack[layer] for f in vision]).to(embeds.dtype)
                     for layer in range(len(vision[0].deepstack))]
        hidden = language_model(
            inputs_embeds=embeds,
            attention_mask=mask if min(lengths) != max(lengths) else None,
            position_ids=positions,
            visual_pos_masks=video_mask,
            deepstack_visual_embeds=deepstack,
            use_cache=False,
        ).last_hidden_state  # [B, W, d_s]
        return hidden, lengths

    def forward(self, prompts: list[list[int]], vision: list[VisionFeatures]) -> CompressorOutput:
        """Compress a micro-batch of segments: memories [B, k_max, d_s] and relevance [B] (float32)."""
        k = self.num_memory_tokens
        hidden, lengths = self.hidden_states(prompts, vision, self.compression_tokens[0])  # [B, W, d_s]
        memories = torch.stack([hidden[b, length:length + k] for b, length in enumerate(lengths)])  # [B, k, d_s]
        before_memory = torch.stack([hidden[b, length - 1] for b, length in enumerate(lengths)]).float()  # [B, d_s]
        relevance = torch.sigmoid(before_memory @ self.relevance_direction.float())  # [B]
        return CompressorOutput(memories, relevance)
