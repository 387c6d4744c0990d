"""The Tempo-Tiny curriculum: a base pre-training that gives the small VLM its Yes/No relevance prior, then the
paper's four stages at toy scale, all with the auto-regressive loss only.

  base     vision tower + language model + LM head: Yes/No relevance and listing the shapes seen, first on
           2-frame clips (cheap, so many steps), then on whole 8-frame segments; beside them, linear heads on
           the vision tower's output name the shape under every token (our stand-in for web-scale pre-training,
           which makes an object's kind readable from Qwen3-VL's features; the heads are dropped afterwards)
  stage 0  memory tokens + projector + decoder (compressor frozen): align, first by describing single segments
           from their memories alone (so the decoder must read them), then on questions about short videos
  stage 1  + the compressor's language model at a lower rate: joint training on short videos
  stage 2  the same on longer videos (up to 256 frames)
  stage 3  decoder only, on memories precomputed once for hour-long videos (up to 1024 frames)

The vision tower is frozen after the base stage (as Qwen3-VL's is pre-trained for the real model), so its
features are computed once per segment; stage 3 likewise reuses memories computed once. During stages 1-3 each
segment keeps some of its first memory tokens, so the decoder learns to read truncated memories: often what ATA
gives it at inference, otherwise random counts.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from torch import nn

from ..model import TempoModel, build_model, save_pretrained
from ..model.checkpoint_files import RELEVANCE_FILE
from ..model.relevance_direction import relevance_metadata, save_relevance_direction
from ..synthetic import SyntheticVideo, generate_video
from . import data
from .base import pretrain_base, relevance_accuracy, shape_accuracy, shape_heads, shape_patch_filters
from .loop import use_linear_patch_embed
from .paper import align_captions, train_answers, train_decoder_long
from .recipe import TRAINING_SEEDS, Recipe
from .tiny import train_tokenizer, write_skeleton

log = logging.getLogger(__name__)


def _videos(first_seed: int, count: int, low: float, high: float) -> list[SyntheticVideo]:
    return [generate_video(first_seed + i, min_duration=low, max_duration=high) for i in range(count)]


def save_base(model: TempoModel, head: nn.Linear, base_dir: str) -> None:
    """The pre-trained tiny Qwen3-VL, in Qwen3VLForConditionalGeneration's key layout."""
    tensors = {f"model.{name}": p.detach().cpu().contiguous() for name, p in model.compressor.vlm.named_parameters()}
    tensors["lm_head.weight"] = head.weight.detach().cpu().contiguous()
    save_file(tensors, os.path.join(base_dir, "model.safetensors"), metadata={"format": "pt"})


def training_videos(recipe: Recipe) -> dict[str, list[SyntheticVideo]]:
    """The recipe's videos by role; their seeds never overlap, nor reach evaluation's."""
    first = TRAINING_SEEDS + recipe.seed * 10_000
    return {"short": _videos(first, recipe.short_videos, 30, 150),
            "more_short": _videos(first + 200, recipe.base_videos, 30, 150),  # seeds up to first + 2999
            "medium": _videos(first + 3_000, recipe.medium_videos, 120, 600),
            "long": _videos(first + 6_000, recipe.long_videos, 600, 3600),
            "held_out": _videos(first + 9_000, recipe.held_out_videos, 30, 150)}


@dataclass
class Pretrained:
    """The model after the base stage (vision tower frozen, relevance direction set) and its encoded videos."""

    model: TempoModel
    head: nn.Linear
    checkpoint_dir: str
    base_dir: str
    tokenizer: Tokenizer
    encoded: dict[str, list[data.EncodedVideo]]
    rng: np.random.Generator


def pretrain(out_dir: str, recipe: Recipe, device: torch.device, every: int, report: dict) -> Pretrained:
    """Tokenizer, skeleton, base pre-training, memory-token init, then every video's vision features once."""
    torch.manual_seed(recipe.seed)
    rng = np.random.default_rng(recipe.seed)
    videos = training_videos(recipe)
    short, more_short, medium, long, held_out = (videos[name] for name in
                                                 ("short", "more_short", "medium", "long", "held_out"))

    tokenizer = train_tokenizer(data.corpus(short + medium[:10] + long[:5], rng))
    checkpoint_dir, base_dir = write_skeleton(out_dir, tokenizer)
    model = build_model(checkpoint_dir, base_dir, "Tempo-Tiny", device, torch.float32, initialize=True).train()
    compressor = model.compressor
    embed_table = compressor.vlm.language_model.embed_tokens
    head = nn.Linear(embed_table.embedding_dim, embed_table.num_embeddings, bias=False).to(device)
    use_linear_patch_embed(compressor)
    shape_patch_filters(compressor)
    log.info("Tempo-Tiny: %.2fM compressor + %.2fM decoder parameters, tokenizer of %d tokens",
             sum(p.numel() for p in compressor.parameters()) / 1e6,
             sum(p.numel() for p in model.decoder.parameters()) / 1e6, tokenizer.get_vocab_size())

    # Thousands of videos, not the 200 of stages 0-1: with ~700 events the base model memorised each event's
    # colour, background and place instead of learning its shape.
    base_videos = short + more_short + long[:5]
    heads = shape_heads(compressor.vlm.visual.config.out_hidden_size, device)
    report["parts"]["base clips"] = pretrain_base(model, head, heads, base_videos, 2, recipe.clip_steps,
                                                   recipe.clip_batch, recipe.base_lr, rng, "clips", every)
    report["parts"]["base"] = pretrain_base(model, head, heads, base_videos, data.SEGMENT_FRAMES, recipe.base_steps,
                                             recipe.base_batch, recipe.base_lr / 2, rng, "base", every)
    report["shape_heads_after_base"] = shape_accuracy(model, heads, held_out, 100, rng)
    log.info("shape heads on held-out runs of frames: %s", report["shape_heads_after_base"])
    set_relevance_direction(model, head, checkpoint_dir, base_dir)
    with torch.no_grad():  # the release's "smart init": memory tokens drawn like an average embedding
        table = compressor.vlm.language_model.embed_tokens.weight
        compressor.compression_tokens.copy_(torch.normal(table.mean(0).expand_as(compressor.compression_tokens[0]),
                                                         table.std(0).expand_as(compressor.compression_tokens[0]))
                                            [None])
    compressor.vlm.visual.requires_grad_(False)

    encode_started = time.perf_counter()
    encoded_short = data.encode_videos(compressor, short, recipe.max_frames, model.geometry, rng)
    encoded_medium = data.encode_videos(compressor, medium, recipe.medium_frames, model.geometry, rng)
    encoded_long = data.encode_videos(compressor, long, recipe.max_frames, model.geometry, rng)
    encoded_held_out = data.encode_videos(compressor, held_out, recipe.max_frames, model.geometry, rng)
    report["parts"]["encode"] = {"seconds": round(time.perf_counter() - encode_started, 1)}
    report["relevance_after_base"] = relevance_accuracy(model, encoded_held_out)
    log.info("relevance on held-out segments: %s", report["relevance_after_base"])

    encoded = {"short": encoded_short, "medium": encoded_medium, "long": encoded_long, "held_out": encoded_held_out}
    return Pretrained(model, head, checkpoint_dir, base_dir, tokenizer, encoded, rng)


def set_relevance_direction(model: TempoModel, head: nn.Linear, checkpoint_dir: str, base_dir: str) -> None:
    """Save the base model and w_yes - w_no from its head, and use that direction from now on."""
    save_base(model, head, base_dir)
    tok = model.compressor_tokenizer
    yes, no = tok.token_id("Yes"), tok.token_id("No")
    direction = (head.weight[yes] - head.weight[no]).detach().float()
    model.compressor.relevance_direction.copy_(direction)
    save_relevance_direction(os.path.join(checkpoint_dir, RELEVANCE_FILE), direction.cpu(),
                             relevance_metadata(base_dir, yes, no))


def train(out_dir: str, recipe: Recipe, device: torch.device, every: int = 50) -> dict:
    """Run the whole curriculum and write a loadable checkpoint to `out_dir`; returns the training log."""
    started = time.perf_counter()
    report: dict = {"recipe": asdict(recipe), "device": str(device), "parts": {}}
    pre = pretrain(out_dir, recipe, device, every, report)
    model, rng, checkpoint_dir = pre.model, pre.rng, pre.checkpoint_dir
    align_and_joint(model, pre.encoded, recipe, rng, every, report)
    model.compressor.requires_grad_(False)
    report["parts"]["stage 3"] = train_decoder_long(model, pre.encoded["long"] + pre.encoded["medium"], recipe, rng,
                                                     every)
    report["relevance_after_training"] = relevance_accuracy(model, pre.encoded["held_out"])
    log.info("relevance after training: %s", report["relevance_after_training"])
    model.eval()
    save_pretrained(model, checkpoint_dir)
    report["seconds"] = round(time.perf_counter() - started, 1)
    with open(os.path.join(out_dir, "training_log.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    log.info("trained Tempo-Tiny in %.0f s -> %s", report["seconds"], out_dir)
    return report


def align_and_joint(model: TempoModel, encoded: dict[str, list[data.EncodedVideo]], recipe: Recipe,
                    rng: np.random.Generator, every: int, report: dict,
                    regulariser: Callable[[], torch.Tensor] | None = None) -> None:
    """Stages 0a-2 on the encoded videos; `regulariser` adds a loss to every step that trains the compressor."""
    compressor = model.compressor
    language_model = compressor.vlm.language_model
    language_model.requires_grad_(False)
    aligned = [compressor.compression_tokens, *model.decoder.parameters()]
    report["parts"]["stage 0a"] = align_captions(model, encoded["short"] + encoded["long"], aligned, recipe, rng,
                                                  every)
    report["parts"]["stage 0"] = train_answers(model, encoded["short"], [{"params": aligned, "lr": recipe.align_lr}],
                                                recipe.align_steps, recipe, rng, "stage 0", every, truncate=False)
    language_model.requires_grad_(True)
    joint = [{"params": aligned, "lr": recipe.lr},
             {"params": list(language_model.parameters()), "lr": recipe.compressor_lr}]
    report["parts"]["stage 1"] = train_answers(model, encoded["short"], joint, recipe.joint_steps, recipe, rng,
                                                "stage 1", every, truncate=True, regulariser=regulariser)
    report["parts"]["stage 2"] = train_answers(model, encoded["medium"], joint, recipe.longer_steps, recipe, rng,
                                                "stage 2", every, truncate=True, regulariser=regulariser)
