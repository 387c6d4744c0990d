"""The paper's training stages 0-3 at toy scale, all with the auto-regressive answer loss: aligning the memory
tokens and the decoder, then joint training, then the decoder alone on long videos (`staged` runs them inside
Tempo-Tiny's numbered stages)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from ..allocation import adaptive_token_allocation
from ..config import AllocationConfig
from ..model import TempoModel
from ..model.prompts import segment_prompt_ids
from . import data
from .loop import Progress, Schedule, answer_positions_loss
from .recipe import Recipe

K_MIN = AllocationConfig().k_min  # inference's floor, so training truncates memories the way ATA will


def training_allocation(relevance: list[float], k_max: int, rng: np.random.Generator,
                        ata_share: float = 0.4) -> list[int]:
    """Memory tokens kept per segment in training: ATA on the model's own relevance at a budget of 1/8 to 1/2
    of all tokens (what inference gives the decoder) `ata_share` of the time; otherwise all of them, one shared
    random count, or a random count each."""
    n, draw = len(relevance), rng.random()
    if draw < ata_share:
        budget = max(n, round(n * k_max * rng.uniform(0.125, 0.5)))
        return adaptive_token_allocation(relevance, budget, K_MIN, k_max)
    rest = (draw - ata_share) / (1 - ata_share)
    if rest < 0.25:
        return [k_max] * n
    if rest < 0.5:
        return [int(rng.integers(1, k_max + 1))] * n
    return rng.integers(1, k_max + 1, size=n).tolist()


def answer_loss(model: TempoModel, memories: torch.Tensor, tokens: list[int], tag_times: list[float],
                question: str, answer: str) -> torch.Tensor:
    """Decoder loss for one example: time tag + first k_i memory tokens per segment, then the question."""
    tok = model.tokenizer
    answer_ids = tok.text(answer) + [tok.token_id("<|im_end|>")]
    embeds, _ = model.decoder_inputs(memories, tokens, "head", question, tag_times, answer_ids=answer_ids)
    logits = model.decoder.lm(inputs_embeds=embeds[None], logits_to_keep=len(answer_ids) + 1).logits[0]
    return answer_positions_loss(logits, answer_ids)


def compress_video(model: TempoModel, video: data.EncodedVideo, question: str,
             chunk: int = 16) -> tuple[torch.Tensor, list[float]]:
    """Memories [N, k_max, d_s] of every segment of `video` for `question` (differentiable), and relevance."""
    tok = model.compressor_tokenizer
    vision = video.vision(model.device, model.dtype)
    prompts = [segment_prompt_ids(tok, question, video.plan, i, f.grid, model.geometry)
               for i, f in enumerate(video.features)]
    chunks = [model.compressor(prompts[i:i + chunk], vision[i:i + chunk]) for i in range(0, len(prompts), chunk)]
    return torch.cat([memories for memories, _ in chunks]), torch.cat([r for _, r in chunks]).tolist()


def align_captions(model: TempoModel, videos: list[data.EncodedVideo], params: list, recipe: Recipe,
                   rng: np.random.Generator, every: int) -> dict:
    """Stage 0a: the decoder describes one segment (its big shapes or its small ones) from that segment's memory
    tokens alone, often only its first few; half of the segments shown hold an event, which are rare."""
    tok = model.compressor_tokenizer
    k_max = model.spec.num_memory_tokens
    with_event = [[i for i in range(len(v.plan.segments))
                   if data.big_shapes(v.video, v.plan.segment_frame_times(i)) != "none."] for v in videos]
    schedule = Schedule([{"params": params, "lr": recipe.align_lr}], recipe.caption_steps)
    progress = Progress("stage 0a", recipe.caption_steps, every)
    for step in range(recipe.caption_steps):
        examples = []
        for _ in range(recipe.caption_batch):
            v = int(rng.integers(len(videos)))
            video = videos[v]
            events = with_event[v]
            index = events[int(rng.integers(len(events)))] if events and rng.random() < 0.5 else \
                int(rng.integers(len(video.plan.segments)))
            times = video.plan.segment_frame_times(index)
            request, answer = (data.LIST_BIG, data.big_shapes(video.video, times)) if rng.random() < 0.6 else \
                (data.LIST_SMALL, data.small_shapes(video.video, times))
            tokens = k_max if rng.random() < 0.4 else int(rng.integers(K_MIN, k_max + 1))
            examples.append((video, index, request, answer, tokens))
        vision = [video.segment_vision(index, model.device, model.dtype) for video, index, _, _, _ in examples]
        prompts = [segment_prompt_ids(tok, request, video.plan, index, features.grid, model.geometry)
                   for (video, index, request, _, _), features in zip(examples, vision)]
        memories, _ = model.compressor(prompts, vision)
        loss = sum(answer_loss(model, memories[b:b + 1], [tokens], [video.plan.tag_time(index)], request, answer)
                   for b, (video, index, request, answer, tokens) in enumerate(examples)) / len(examples)
        assert isinstance(loss, torch.Tensor)  # a sum of tensors (to typeshed, or the 0 it starts from)
        loss.backward()
        schedule.step()
        progress.update(step, loss.item())
    return progress.summary()


def train_answers(model: TempoModel, videos: list[data.EncodedVideo], groups: list[dict], steps: int,
                  recipe: Recipe, rng: np.random.Generator, name: str, every: int, truncate: bool,
                  regulariser: Callable[[], torch.Tensor] | None = None) -> dict:
    """The answer loss on (video, question) examples, plus `regulariser()` once a step when given."""
    schedule = Schedule(groups, steps)
    progress = Progress(name, steps, every)
    k_max = model.spec.num_memory_tokens
    for step in range(steps):
        total = 0.0
        for _ in range(recipe.batch):
            video = videos[int(rng.integers(len(videos)))]
            question = video.questions[int(rng.integers(len(video.questions)))]
            memories, relevance = compress_video(model, video, question.text)
            tokens = training_allocation(relevance, k_max, rng) if truncate else [k_max] * len(relevance)
            loss = answer_loss(model, memories, tokens, video.plan.tag_times(), question.text,
                               data.training_answer(question, video.plan)) / recipe.batch
            loss.backward()
            total += loss.item()
        if regulariser is not None:
            extra = regulariser()
            extra.backward()
            total += extra.item()
        schedule.step()
        progress.update(step, total)
    return progress.summary()


def train_decoder_long(model: TempoModel, videos: list[data.EncodedVideo], recipe: Recipe,
                       rng: np.random.Generator, every: int) -> dict:
    """Stage 3: the compressor is frozen, so every (video, question) is compressed once up front. Its log's
    "seconds" counts that compression too ("compress_seconds" alone)."""
    started = time.perf_counter()
    examples = []
    for video in videos:
        for question in video.questions:
            with torch.inference_mode():
                memories, relevance = compress_video(model, video, question.text)
            examples.append((video.plan, question, memories.half().cpu(), relevance))
    schedule = Schedule([{"params": list(model.decoder.parameters()), "lr": recipe.lr}], recipe.long_steps)
    progress = Progress("stage 3", recipe.long_steps, every)
    k_max = model.spec.num_memory_tokens
    for step in range(recipe.long_steps):
        total = 0.0
        for _ in range(recipe.batch):
            plan, question, memories, relevance = examples[int(rng.integers(len(examples)))]
            tokens = training_allocation(relevance, k_max, rng)
            loss = answer_loss(model, memories.to(model.device, model.dtype), tokens, plan.tag_times(), question.text,
                               data.training_answer(question, plan)) / recipe.batch
            loss.backward()
            total += loss.item()
        schedule.step()
        progress.update(step, total)
    return progress.summary() | {"seconds": round(time.perf_counter() - started, 1),
                                 "compress_seconds": round(progress.started - started, 1)}
