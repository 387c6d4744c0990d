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
import math
import os
import time
from dataclasses import asdict, dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from safetensors.torch import save_file

from ..allocation import adaptive_token_allocation
from ..compressor import LocalCompressor
from ..config import AllocationConfig
from ..loading import RELEVANCE_FILE, relevance_metadata, save_relevance_direction
from ..model import TempoModel, build_model, save_pretrained
from ..patches import normalize
from ..prompts import DECODER_SYSTEM_PROMPT, segment_prompt_ids
from ..synthetic import COLOURS, KINDS, Question, SyntheticVideo, generate_video, make_questions
from ..video import SamplingPlan
from . import data
from .tiny import train_tokenizer, write_skeleton

log = logging.getLogger(__name__)

TRAINING_SEEDS = 1_000_000  # training videos use seeds from here on; evaluation uses seeds below it
WARMUP = 0.03
K_MIN = AllocationConfig().k_min  # inference's floor, so training truncates memories the way ATA will


@dataclass(frozen=True)
class Recipe:
    """Data sizes, steps and learning rates of every stage."""

    seed: int = 0
    short_videos: int = 200  # 30 s - 2.5 min: base pre-training, stages 0 and 1
    base_videos: int = 2800  # more 30 s - 2.5 min videos, for base pre-training only (see `train`)
    medium_videos: int = 60  # 2 - 10 min at <= 256 frames: stage 2
    long_videos: int = 30  # 10 - 60 min at <= 1024 frames: stage 3
    held_out_videos: int = 12  # 30 s - 2.5 min, never trained on: relevance accuracy
    clip_steps: int = 2500  # base pre-training on 2-frame clips (a quarter of a segment's cost)
    clip_batch: int = 16
    base_steps: int = 400  # then on whole 8-frame segments
    base_batch: int = 8
    caption_steps: int = 1200  # stage 0 on single segments ...
    caption_batch: int = 16
    align_steps: int = 300  # ... then on questions about whole short videos
    joint_steps: int = 500
    longer_steps: int = 150
    long_steps: int = 1600
    batch: int = 4  # (video, question) examples per step in stages 0-3
    base_lr: float = 2e-3
    align_lr: float = 1e-3
    lr: float = 3e-4
    compressor_lr: float = 5e-5

    def scaled(self, factor: float) -> "Recipe":
        """The same recipe with `factor` times the videos and steps (for quick trial runs)."""
        counts = ("short_videos", "base_videos", "medium_videos", "long_videos", "held_out_videos", "clip_steps", "base_steps",
                  "caption_steps", "align_steps", "joint_steps", "longer_steps", "long_steps")
        return replace(self, **{name: max(2, round(getattr(self, name) * factor)) for name in counts})


class Schedule:
    """AdamW with a 3% linear warm-up and a cosine decay to zero."""

    def __init__(self, groups: list[dict], steps: int):
        self.optimizer = torch.optim.AdamW(groups, weight_decay=0.0)
        self.steps = steps
        self.base = [group["lr"] for group in groups]
        self.step_index = 0

    def step(self) -> None:
        self.step_index += 1
        warmup = max(1, round(WARMUP * self.steps))
        progress = self.step_index / warmup if self.step_index < warmup else \
            0.5 * (1 + math.cos(math.pi * (self.step_index - warmup) / max(1, self.steps - warmup)))
        for group, base in zip(self.optimizer.param_groups, self.base):
            group["lr"] = base * progress
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


class Progress:
    def __init__(self, stage: str, steps: int, every: int):
        self.stage, self.steps, self.every = stage, steps, every
        self.started = time.perf_counter()
        self.average: float | None = None
        self.losses: list[float] = []

    def update(self, step: int, loss: float) -> None:
        self.average = loss if self.average is None else 0.95 * self.average + 0.05 * loss
        self.losses.append(round(loss, 5))
        if (step + 1) % self.every == 0 or step + 1 == self.steps:
            elapsed = time.perf_counter() - self.started
            log.info("%-8s step %4d/%d  loss %.4f  %5.0fs elapsed, %5.0fs left", self.stage, step + 1, self.steps,
                     self.average, elapsed, elapsed / (step + 1) * (self.steps - step - 1))

    def summary(self) -> dict:
        return {"seconds": round(time.perf_counter() - self.started, 1), "final_loss": self.average,
                "losses": self.losses[::max(1, len(self.losses) // 100)]}


def use_linear_patch_embed(compressor: LocalCompressor) -> None:
    """Conv3d with stride == kernel is a matmul over flattened patches; on CPU its backward is ~15x slower than
    the matmul's, so training runs the same weights as a linear map."""
    embed = compressor.vlm.visual.patch_embed

    def forward(hidden_states: torch.Tensor) -> torch.Tensor:
        weight = embed.proj.weight
        return F.linear(hidden_states.to(weight.dtype), weight.reshape(weight.shape[0], -1), embed.proj.bias)

    embed.forward = forward


def answer_positions_loss(logits: torch.Tensor, answer: list[int]) -> torch.Tensor:
    """Cross-entropy of `answer`, given logits [n + 1, V] for its last prompt position and its own tokens."""
    return F.cross_entropy(logits[:len(answer)].float(), torch.tensor(answer, device=logits.device))


# ----------------------------------------------------------------------------------------------------- base stage

# Classes of the shape heads, 0 meaning no such shape under the token: event kind, event colour, moving-shape kind.
SHAPE_CLASSES = (len(KINDS) + 1, len(COLOURS) + 1, len(KINDS) + 1)


@dataclass(frozen=True)
class Window:
    """One base-stage example: a window's patch rows and grid, the prompt and answer ids, and per merged vision
    token what it shows ([tokens, 3], see `data.token_labels`)."""

    rows: torch.Tensor
    grid: tuple[int, int, int]
    prompt: list[int]
    answer: list[int]
    labels: torch.Tensor


def shape_heads(width: int, device: torch.device) -> nn.ModuleList:
    return nn.ModuleList(nn.Linear(width, classes) for classes in SHAPE_CLASSES).to(device)


def shape_loss(heads: nn.ModuleList, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each head over all tokens [tokens, d_s], plus over the tokens that show such a shape:
    shapes cover a few tokens of each frame, and without the second term "none" everywhere is nearly optimal."""
    loss = features.new_zeros(())
    for head, target in zip(heads, labels.T):
        logits = head(features)  # [tokens, classes]
        loss = loss + F.cross_entropy(logits, target)
        shown = target > 0
        if shown.any():
            loss = loss + F.cross_entropy(logits[shown], target[shown])
    return loss


class BaseExamples:
    """Windows of synthetic videos (2-frame clips or 8-frame segments) with one of three requests: is it relevant
    to a question (Yes/No; about half the time it is), list the big shapes (the events), or list the kinds of the
    small moving shapes. Windows showing an event are favoured, since events are rare."""

    def __init__(self, model: TempoModel, videos: list[SyntheticVideo], frames: int, rng: np.random.Generator):
        self.model, self.rng, self.frames = model, rng, frames
        self.videos = videos
        self.plans = [data.plan_video(v, 1024) for v in videos]
        self.questions = [make_questions(v, rng) for v in videos]
        tok = model.compressor_tokenizer
        self.yes, self.no, self.end = tok.token_id("Yes"), tok.token_id("No"), tok.token_id("<|im_end|>")

    def _window(self, video: SyntheticVideo, plan: SamplingPlan) -> SamplingPlan:
        last = len(plan.frame_times) - self.frames
        start = int(self.rng.integers(0, last + 1))
        if self.rng.random() < 0.5:
            event = video.events[int(self.rng.integers(len(video.events)))]
            middle = int(np.argmin([abs(t - (event.start + event.end) / 2) for t in plan.frame_times]))
            start = min(max(0, middle - self.frames // 2), last)
        return replace(plan, segments=[range(start, start + self.frames)])

    def sample(self) -> Window:
        """One window with a request and its answer."""
        rng, model, tok = self.rng, self.model, self.model.compressor_tokenizer
        v = int(rng.integers(len(self.videos)))
        video = self.videos[v]
        window = self._window(video, self.plans[v])
        times = window.segment_frame_times(0)
        rows, grid = data.segment_pixels(video, window, 0, model.geometry)
        labels = torch.from_numpy(data.token_labels(video, times, model.geometry).reshape(-1, len(SHAPE_CLASSES)))
        draw = rng.random()
        if draw < 0.4:
            request, answer = (data.LIST_BIG, data.big_shapes(video, times)) if draw < 0.25 else \
                (data.LIST_SMALL, data.small_shapes(video, times))
            prompt = segment_prompt_ids(tok, request, window, 0, grid, model.geometry, system=DECODER_SYSTEM_PROMPT)
            return Window(rows, grid, prompt, tok.text(answer) + [self.end], labels)
        question = self._question(video, self.questions[v], times)
        prompt = segment_prompt_ids(tok, question.text, window, 0, grid, model.geometry)
        return Window(rows, grid, prompt, [self.yes if data.relevant(question, times) else self.no, self.end], labels)

    def _question(self, video: SyntheticVideo, questions: list, times: list[float]) -> Question:
        """Half of the time a question about a big shape in the window, sometimes the global one, otherwise one
        about a shape that is not there. When the window does show a big shape, that makes a hard negative: the
        answer hinges on which shape it is, not on whether there is one."""
        rng = self.rng
        seen = [(event.kind, event.colour) for event in data.visible_events(video, times)]
        if seen and rng.random() < 0.5:
            kind, colour = seen[int(rng.integers(len(seen)))]
            return Question("needle", _shape_question(kind, colour, rng), "", ((0.0, video.duration),))
        if rng.random() < 0.15:
            return questions[-1]  # the global question: every segment is relevant to it
        seen_kinds = {kind for kind, _ in seen}
        if seen and rng.random() < 0.2:  # the shape is there, but in another colour (a colour question would fit)
            kind, shown = seen[int(rng.integers(len(seen)))]
            colour = str(rng.choice([c for c in COLOURS if c != shown]))
            return Question("grounding", _shape_question(kind, colour, rng, ask_colour=False), "", ())
        kind, colour = str(rng.choice([k for k in KINDS if k not in seen_kinds])), str(rng.choice(list(COLOURS)))
        return Question("grounding", _shape_question(kind, colour, rng), "", ())


def _shape_question(kind: str, colour: str, rng: np.random.Generator, ask_colour: bool = True) -> str:
    """One of the needle, grounding or counting question forms about a (colour, kind) pair."""
    forms = [f"When does the {colour} {kind} appear?", f"How many times does the {colour} {kind} appear?"]
    if ask_colour:
        forms.append(f"What colour is the {kind}?")
    return forms[int(rng.integers(len(forms)))]


def shape_patch_filters(compressor: LocalCompressor) -> None:
    """Start three of the tiny ViT's patch filters as mean-R, -G and -B detectors and the next 16 as a 4x4
    brightness thumbnail of the patch, so colour and outline are visible from the first step; the rest keep
    their random initialisation. (From random filters alone, this ViT learned colour but barely any shape.)"""
    weight = compressor.vlm.visual.patch_embed.proj.weight  # [hidden, channels, time, height, width]
    channels, frames, size = weight.shape[1], weight.shape[2], weight.shape[-1]
    thumbnail = 4
    cell = size // thumbnail
    with torch.no_grad():
        for channel in range(channels):
            weight[channel].zero_()
            weight[channel, channel].fill_(4.0 / (frames * size * size))
        for i in range(thumbnail * thumbnail):
            row, column = divmod(i, thumbnail)
            weight[channels + i].zero_()
            weight[channels + i, :, :, row * cell:(row + 1) * cell, column * cell:(column + 1) * cell] = \
                4.0 / (channels * frames * cell * cell)


def pretrain_base(model: TempoModel, head: nn.Linear, heads: nn.ModuleList, videos: list[SyntheticVideo],
                  frames: int, steps: int, batch_size: int, lr: float, rng: np.random.Generator, name: str,
                  every: int) -> dict:
    """The base Qwen3-VL (vision tower, language model, LM head) and the shape heads on windows of `frames`
    frames: the answer's cross-entropy plus the shape heads' loss, equally weighted."""
    compressor = model.compressor
    examples = BaseExamples(model, videos, frames, rng)
    params = list(compressor.vlm.parameters()) + list(head.parameters()) + list(heads.parameters())
    schedule = Schedule([{"params": params, "lr": lr}], steps)
    progress = Progress(name, steps, every)
    for step in range(steps):
        batch = [examples.sample() for _ in range(batch_size)]
        pixels = normalize(torch.cat([window.rows for window in batch]), model.geometry)
        vision = compressor.encode_vision(pixels, [window.grid for window in batch])
        hidden, lengths = compressor.hidden_states([window.prompt + window.answer for window in batch], vision)
        answers = sum(answer_positions_loss(head(hidden[b, length - len(window.answer) - 1:length]), window.answer)
                      for b, (window, length) in enumerate(zip(batch, lengths))) / len(batch)
        features = torch.cat([features.embeds for features in vision])  # [tokens, d_s]
        labels = torch.cat([window.labels for window in batch]).to(features.device)  # [tokens, 3]
        loss = answers + shape_loss(heads, features.float(), labels)
        loss.backward()
        schedule.step()
        progress.update(step, loss.item())
    return progress.summary()


def shape_accuracy(model: TempoModel, heads: nn.ModuleList, videos: list[SyntheticVideo], windows: int,
                   rng: np.random.Generator) -> dict:
    """Per-token accuracy of each shape head on windows of held-out videos, over the tokens showing such a shape."""
    examples = BaseExamples(model, videos, data.SEGMENT_FRAMES, rng)
    hits: list[list[bool]] = [[] for _ in SHAPE_CLASSES]
    for _ in range(windows):
        window = examples.sample()
        with torch.inference_mode():
            features = model.compressor.encode_vision(normalize(window.rows, model.geometry), [window.grid])[0]
            for j, head in enumerate(heads):
                shown = window.labels[:, j] > 0
                predicted = head(features.embeds.float()).argmax(-1).cpu()
                hits[j] += (predicted[shown] == window.labels[shown, j]).tolist()
    names = ("event_kind", "event_colour", "moving_kind")
    return {name: float(np.mean(h)) if h else None for name, h in zip(names, hits)} | {"windows": windows}


def relevance_accuracy(model: TempoModel, encoded: list[data.EncodedVideo]) -> dict:
    """How often sigmoid((w_yes - w_no) . h) > 0.5 agrees with the ground truth on held-out segments, overall and
    separately on relevant (true positive rate) and irrelevant segments (true negative rate)."""
    outcomes: dict[bool, list[bool]] = {True: [], False: []}
    tok = model.compressor_tokenizer
    for video in encoded:
        vision = video.vision(model.device, model.dtype)
        for question in video.questions:
            prompts = [segment_prompt_ids(tok, question.text, video.plan, i, f.grid, model.geometry)
                       for i, f in enumerate(video.features)]
            with torch.inference_mode():
                _, relevance = model.compressor(prompts, vision)
            for i, score in enumerate(relevance.tolist()):
                label = data.relevant(question, video.plan.segment_frame_times(i))
                outcomes[label].append((score > 0.5) == label)
    hits = outcomes[True] + outcomes[False]
    return {"accuracy": float(np.mean(hits)), "true_positive_rate": float(np.mean(outcomes[True])),
            "true_negative_rate": float(np.mean(outcomes[False])), "positives": len(outcomes[True]),
            "negatives": len(outcomes[False])}


# ------------------------------------------------------------------------------------------------- stages 0 - 3

def training_allocation(relevance: list[float], k_max: int, rng: np.random.Generator) -> list[int]:
    """Memory tokens kept per segment in training: ATA on the model's own relevance at a budget of 1/8 to 1/2
    of all tokens (what inference gives the decoder), all of them, one shared random count, or a random count
    each."""
    n, draw = len(relevance), rng.random()
    if draw < 0.4:
        budget = max(n, round(n * k_max * rng.uniform(0.125, 0.5)))
        return adaptive_token_allocation(relevance, budget, K_MIN, k_max)
    if draw < 0.55:
        return [k_max] * n
    if draw < 0.7:
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
        loss.backward()
        schedule.step()
        progress.update(step, loss.item())
    return progress.summary()


def train_answers(model: TempoModel, videos: list[data.EncodedVideo], groups: list[dict], steps: int,
                  recipe: Recipe, rng: np.random.Generator, name: str, every: int, truncate: bool) -> dict:
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


# ----------------------------------------------------------------------------------------------------- the recipe

def _videos(first_seed: int, count: int, low: float, high: float) -> list[SyntheticVideo]:
    return [generate_video(first_seed + i, min_duration=low, max_duration=high) for i in range(count)]


def save_base(model: TempoModel, head: nn.Linear, base_dir: str) -> None:
    """The pre-trained tiny Qwen3-VL, in Qwen3VLForConditionalGeneration's key layout."""
    tensors = {f"model.{name}": p.detach().cpu().contiguous() for name, p in model.compressor.vlm.named_parameters()}
    tensors["lm_head.weight"] = head.weight.detach().cpu().contiguous()
    save_file(tensors, os.path.join(base_dir, "model.safetensors"), metadata={"format": "pt"})


def train(out_dir: str, recipe: Recipe, device: torch.device, every: int = 50) -> dict:
    """Run the whole curriculum and write a loadable checkpoint to `out_dir`; returns the training log."""
    started = time.perf_counter()
    torch.manual_seed(recipe.seed)
    rng = np.random.default_rng(recipe.seed)
    first = TRAINING_SEEDS + recipe.seed * 10_000
    short = _videos(first, recipe.short_videos, 30, 150)
    more_short = _videos(first + 200, recipe.base_videos, 30, 150)  # seeds up to first + 2999 (medium: 3000)
    medium = _videos(first + 3_000, recipe.medium_videos, 120, 600)
    long = _videos(first + 6_000, recipe.long_videos, 600, 3600)
    held_out = _videos(first + 9_000, recipe.held_out_videos, 30, 150)
    report: dict = {"recipe": asdict(recipe), "device": str(device), "stages": {}}

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
    report["stages"]["base clips"] = pretrain_base(model, head, heads, base_videos, 2, recipe.clip_steps,
                                                   recipe.clip_batch, recipe.base_lr, rng, "clips", every)
    report["stages"]["base"] = pretrain_base(model, head, heads, base_videos, data.SEGMENT_FRAMES, recipe.base_steps,
                                             recipe.base_batch, recipe.base_lr / 2, rng, "base", every)
    report["shape_heads_after_base"] = shape_accuracy(model, heads, held_out, 100, rng)
    log.info("shape heads on held-out windows: %s", report["shape_heads_after_base"])
    save_base(model, head, base_dir)
    tok = model.compressor_tokenizer
    yes, no = tok.token_id("Yes"), tok.token_id("No")
    direction = (head.weight[yes] - head.weight[no]).detach().float()
    compressor.relevance_direction.copy_(direction)
    save_relevance_direction(os.path.join(checkpoint_dir, RELEVANCE_FILE), direction.cpu(),
                             relevance_metadata(base_dir, yes, no))
    with torch.no_grad():  # the release's "smart init": memory tokens drawn like an average embedding
        table = compressor.vlm.language_model.embed_tokens.weight
        compressor.compression_tokens.copy_(torch.normal(table.mean(0).expand_as(compressor.compression_tokens[0]),
                                                         table.std(0).expand_as(compressor.compression_tokens[0]))
                                            [None])
    compressor.vlm.visual.requires_grad_(False)

    encode_started = time.perf_counter()
    encoded_short = data.encode_videos(compressor, short, 1024, model.geometry, rng)
    encoded_medium = data.encode_videos(compressor, medium, 256, model.geometry, rng)
    encoded_long = data.encode_videos(compressor, long, 1024, model.geometry, rng)
    encoded_held_out = data.encode_videos(compressor, held_out, 1024, model.geometry, rng)
    report["stages"]["encode"] = {"seconds": round(time.perf_counter() - encode_started, 1)}
    report["relevance_after_base"] = relevance_accuracy(model, encoded_held_out)
    log.info("relevance on held-out segments: %s", report["relevance_after_base"])

    language_model = compressor.vlm.language_model
    language_model.requires_grad_(False)
    aligned = [compressor.compression_tokens, *model.decoder.parameters()]
    report["stages"]["stage 0a"] = align_captions(model, encoded_short + encoded_long, aligned, recipe, rng, every)
    report["stages"]["stage 0"] = train_answers(model, encoded_short, [{"params": aligned, "lr": recipe.align_lr}],
                                                recipe.align_steps, recipe, rng, "stage 0", every, truncate=False)
    language_model.requires_grad_(True)
    joint = [{"params": aligned, "lr": recipe.lr},
             {"params": list(language_model.parameters()), "lr": recipe.compressor_lr}]
    report["stages"]["stage 1"] = train_answers(model, encoded_short, joint, recipe.joint_steps, recipe, rng,
                                                "stage 1", every, truncate=True)
    report["stages"]["stage 2"] = train_answers(model, encoded_medium, joint, recipe.longer_steps, recipe, rng,
                                                "stage 2", every, truncate=True)
    compressor.requires_grad_(False)
    report["stages"]["stage 3"] = train_decoder_long(model, encoded_long + encoded_medium, recipe, rng, every)
    report["relevance_after_training"] = relevance_accuracy(model, encoded_held_out)
    log.info("relevance after training: %s", report["relevance_after_training"])

    model.eval()
    save_pretrained(model, checkpoint_dir)
    report["seconds"] = round(time.perf_counter() - started, 1)
    with open(os.path.join(out_dir, "training_log.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    log.info("trained Tempo-Tiny in %.0f s -> %s", report["seconds"], out_dir)
    return report

