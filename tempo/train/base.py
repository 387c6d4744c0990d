"""The base stage: pre-training the tiny Qwen3-VL (vision tower, language model, LM head) on short runs of
sampled frames of synthetic videos, our stand-in for web-scale pre-training. It learns to say whether a run is
relevant to a question (Yes/No, the relevance prior the compressor reads), to list the shapes it shows, and,
through linear heads on the vision tower's output, to name the shape under every token."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..model import TempoModel
from ..model.compressor import LocalCompressor
from ..model.prompts import DECODER_SYSTEM_PROMPT, segment_prompt_ids
from ..synthetic import COLOURS, KINDS, Question, SyntheticVideo, make_questions
from ..video import SamplingPlan
from ..video.patches import normalize
from . import data
from .loop import Progress, Schedule, answer_positions_loss

# Classes of the shape heads, 0 meaning no such shape under the token: event kind, event colour, moving-shape kind.
SHAPE_CLASSES = (len(KINDS) + 1, len(COLOURS) + 1, len(KINDS) + 1)


@dataclass(frozen=True)
class BaseExample:
    """One base-stage example: a run of frames' patch rows and grid, the prompt and answer ids, and per merged vision
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
    """Runs of sampled frames of synthetic videos (2-frame clips or 8-frame segments) with one of three requests: is
    it relevant to a question (Yes/No; about half the time it is), list the big shapes (the events), or list the
    kinds of the small moving shapes. Runs showing an event are favoured, since events are rare."""

    def __init__(self, model: TempoModel, videos: list[SyntheticVideo], frames: int, rng: np.random.Generator):
        self.model, self.rng, self.frames = model, rng, frames
        self.videos = videos
        self.plans = [data.plan_video(v, 1024) for v in videos]
        self.questions = [make_questions(v, rng) for v in videos]
        tok = model.compressor_tokenizer
        self.yes, self.no, self.end = tok.token_id("Yes"), tok.token_id("No"), tok.token_id("<|im_end|>")

    def _frame_run(self, video: SyntheticVideo, plan: SamplingPlan) -> SamplingPlan:
        """The plan cut to `frames` sampled frames in a row, half of the time around an event."""
        last = len(plan.frame_times) - self.frames
        start = int(self.rng.integers(0, last + 1))
        if self.rng.random() < 0.5:
            event = video.events[int(self.rng.integers(len(video.events)))]
            middle = int(np.argmin([abs(t - (event.start + event.end) / 2) for t in plan.frame_times]))
            start = min(max(0, middle - self.frames // 2), last)
        return replace(plan, segments=[range(start, start + self.frames)])

    def sample(self) -> BaseExample:
        """One run of frames with a request and its answer."""
        rng, model, tok = self.rng, self.model, self.model.compressor_tokenizer
        v = int(rng.integers(len(self.videos)))
        video = self.videos[v]
        run = self._frame_run(video, self.plans[v])
        times = run.segment_frame_times(0)
        rows, grid = data.segment_pixels(video, run, 0, model.geometry)
        labels = torch.from_numpy(data.token_labels(video, times, model.geometry).reshape(-1, len(SHAPE_CLASSES)))
        draw = rng.random()
        if draw < 0.4:
            request, answer = (data.LIST_BIG, data.big_shapes(video, times)) if draw < 0.25 else \
                (data.LIST_SMALL, data.small_shapes(video, times))
            prompt = segment_prompt_ids(tok, request, run, 0, grid, model.geometry, system=DECODER_SYSTEM_PROMPT)
            return BaseExample(rows, grid, prompt, tok.text(answer) + [self.end], labels)
        question = self._question(video, self.questions[v], times)
        prompt = segment_prompt_ids(tok, question.text, run, 0, grid, model.geometry)
        verdict = self.yes if data.relevant(question, times) else self.no
        return BaseExample(rows, grid, prompt, [verdict, self.end], labels)

    def _question(self, video: SyntheticVideo, questions: list, times: list[float]) -> Question:
        """Half of the time a question about a big shape in the run, sometimes the global one, otherwise one
        about a shape that is not there. When the run does show a big shape, that makes a hard negative: the
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
    """The base Qwen3-VL (vision tower, language model, LM head) and the shape heads on runs of `frames` sampled
    frames: the answer's cross-entropy plus the shape heads' loss, equally weighted."""
    compressor = model.compressor
    examples = BaseExamples(model, videos, frames, rng)
    params = list(compressor.vlm.parameters()) + list(head.parameters()) + list(heads.parameters())
    schedule = Schedule([{"params": params, "lr": lr}], steps)
    progress = Progress(name, steps, every)
    for step in range(steps):
        batch = [examples.sample() for _ in range(batch_size)]
        pixels = normalize(torch.cat([example.rows for example in batch]), model.geometry)
        vision = compressor.encode_vision(pixels, [example.grid for example in batch])
        hidden, lengths = compressor.hidden_states([example.prompt + example.answer for example in batch], vision)
        answers = sum(answer_positions_loss(head(hidden[b, length - len(example.answer) - 1:length]), example.answer)
                      for b, (example, length) in enumerate(zip(batch, lengths))) / len(batch)
        features = torch.cat([features.embeds for features in vision])  # [tokens, d_s]
        labels = torch.cat([example.labels for example in batch]).to(features.device)  # [tokens, 3]
        loss = answers + shape_loss(heads, features.float(), labels)
        loss.backward()
        schedule.step()
        progress.update(step, loss.item())
    return progress.summary()


def shape_accuracy(model: TempoModel, heads: nn.ModuleList, videos: list[SyntheticVideo], runs: int,
                   rng: np.random.Generator) -> dict:
    """Per-token accuracy of each shape head on 8-frame runs of held-out videos, over the tokens showing such a
    shape."""
    examples = BaseExamples(model, videos, data.SEGMENT_FRAMES, rng)
    hits: list[list[bool]] = [[] for _ in SHAPE_CLASSES]
    for _ in range(runs):
        example = examples.sample()
        with torch.inference_mode():
            features = model.compressor.encode_vision(normalize(example.rows, model.geometry), [example.grid])[0]
            for j, head in enumerate(heads):
                shown = example.labels[:, j] > 0
                predicted = head(features.embeds.float()).argmax(-1).cpu()
                hits[j] += (predicted[shown] == example.labels[shown, j]).tolist()
    names = ("event_kind", "event_colour", "moving_kind")
    return {name: float(np.mean(h)) if h else None for name, h in zip(names, hits)} | {"runs": runs}


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
