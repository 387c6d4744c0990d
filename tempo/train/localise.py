"""Localisation: training the compressor's zero-shot relevance to rank the evidence segment above every other one.

A pointwise Yes/No classifier that is right on 91 % of segments still puts its highest score on a wrong segment
in long videos: one false positive among 128 segments is enough. So this stage trains the ranking itself, with a
listwise objective: for one question, a list of segments (the evidence, its neighbours, the video's other events,
and segments of other videos showing the same kind in another colour or the same colour on another kind) and a
softmax over their relevance logits whose target is the evidence. A pointwise Yes/No term keeps s_i a probability.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..model import TempoModel
from ..model.prompts import segment_prompt_ids
from ..synthetic import COLOURS, KINDS, segment_relevance
from . import data
from .loop import Progress, Schedule
from .paper import compress_video

LIST_SIZE = 16  # segments ranked against each other per question
MAX_POSITIVES = 4
ABSENT_SHARE = 0.15  # lists about a shape that is in none of them: only the pointwise term applies


def draw_into(chosen: list[tuple[int, int]], candidates: list[tuple[int, int]], count: int,
              rng: np.random.Generator) -> None:
    """Up to `count` of `candidates` not in `chosen` yet, drawn at random, appended to `chosen`."""
    fresh = [c for c in candidates if c not in chosen]
    for j in rng.permutation(len(fresh))[:count]:
        chosen.append(fresh[int(j)])


def top_up(chosen: list[tuple[int, int]], with_event: list[tuple[int, int]], rng: np.random.Generator) -> None:
    """Fills `chosen` to LIST_SIZE with segments showing an object in any video (a very short video's list)."""
    if len(chosen) < LIST_SIZE and (available := len(set(chosen).union(with_event))) < LIST_SIZE:
        raise ValueError(f"Only {available} segments of these videos can fill a ranking list, and a list needs "
                         f"{LIST_SIZE}: train on more or longer videos.")
    while len(chosen) < LIST_SIZE:
        draw_into(chosen, [with_event[int(rng.integers(len(with_event)))]], 1, rng)


@dataclass(frozen=True)
class Target:
    """What a question asks about: a kind, and a colour unless the question asks for the colour."""

    kind: str
    colour: str | None

    def question(self, rng: np.random.Generator) -> str:
        if self.colour is None:
            return f"What colour is the {self.kind}?"
        forms = (f"When does the {self.colour} {self.kind} appear?",
                 f"How many times does the {self.colour} {self.kind} appear?")
        return forms[int(rng.integers(len(forms)))]

    def shown(self, events: frozenset[tuple[str, str]]) -> bool:
        return any(kind == self.kind and (self.colour is None or colour == self.colour) for kind, colour in events)


@dataclass(frozen=True)
class RankingList:
    """One question and the segments ranked for it, as (video, segment) indices, with their labels."""

    question: str
    segments: list[tuple[int, int]]
    labels: list[bool]


class SegmentIndex:
    """Which big shapes every segment of the encoded videos shows, to draw lists with hard negatives from."""

    def __init__(self, videos: list[data.EncodedVideo]):
        self.videos = videos
        self.shown: list[list[frozenset[tuple[str, str]]]] = []
        self.by_kind: dict[str, list[tuple[int, int]]] = {kind: [] for kind in KINDS}
        self.by_colour: dict[str, list[tuple[int, int]]] = {colour: [] for colour in COLOURS}
        for v, video in enumerate(videos):
            segments = []
            for i in range(len(video.plan.segments)):
                events = frozenset((e.kind, e.colour) for e in
                                   data.visible_events(video.video, video.plan.segment_frame_times(i)))
                segments.append(events)
                for kind, colour in events:
                    self.by_kind[kind].append((v, i))
                    self.by_colour[colour].append((v, i))
            self.shown.append(segments)
        self.with_event = [(v, i) for v, segments in enumerate(self.shown) for i, events in enumerate(segments)
                           if events]

    def sample(self, rng: np.random.Generator) -> RankingList:
        """A list: the evidence of one event (or none, for a shape absent from the list) and hard negatives."""
        v, i = self.with_event[int(rng.integers(len(self.with_event)))]
        kind, colour = sorted(self.shown[v][i])[int(rng.integers(len(self.shown[v][i])))]
        absent = rng.random() < ABSENT_SHARE
        if absent:  # same kind in another colour: the list shows near misses only
            colour = str(rng.choice([c for c in COLOURS if c != colour]))
        target = Target(kind, None if not absent and rng.random() < 0.3 else colour)
        chosen: list[tuple[int, int]] = []

        add = functools.partial(draw_into, chosen, rng=rng)  # add(candidates, count)

        shown = self.shown[v]
        add([(v, j) for j in range(len(shown)) if target.shown(shown[j])], MAX_POSITIVES)
        add([(v, j) for j in range(i - 2, i + 3) if 0 <= j < len(shown)], 4)  # the neighbours look alike
        add([(v, j) for j in range(len(shown)) if shown[j]], 3)  # the video's other events
        add([c for c in self.by_kind[kind] if c[0] != v], 2)
        add([c for c in self.by_colour[colour] if c[0] != v], 2)
        add([(v, j) for j in range(len(shown))], LIST_SIZE - len(chosen))
        top_up(chosen, self.with_event, rng)
        if absent and any(target.shown(self.shown[a][b]) for a, b in chosen):
            return self.sample(rng)
        labels = [target.shown(self.shown[a][b]) for a, b in chosen]
        return RankingList(target.question(rng), chosen, labels)


def relevance_logits(model: TempoModel, direction: torch.Tensor, question: str,
                     segments: list[tuple[data.EncodedVideo, int]]) -> torch.Tensor:
    """(w_yes - w_no) . h at the last prompt position of each segment [n], differentiable."""
    tok = model.compressor_tokenizer
    vision = [video.segment_vision(i, model.device, model.dtype) for video, i in segments]
    prompts = [segment_prompt_ids(tok, question, video.plan, i, features.grid, model.geometry)
               for (video, i), features in zip(segments, vision)]
    hidden, lengths = model.compressor.hidden_states(prompts, vision)  # [n, W, d_s]
    last = torch.stack([hidden[b, length - 1] for b, length in enumerate(lengths)]).float()  # [n, d_s]
    return last @ direction.float()


def ranking_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Listwise: -log of the softmax mass on the relevant segments (if any); plus Yes/No cross-entropy."""
    pointwise = F.binary_cross_entropy_with_logits(logits, labels.float())
    if not labels.any():
        return pointwise
    listwise = torch.logsumexp(logits, 0) - torch.logsumexp(logits[labels], 0)
    return listwise + pointwise


def list_loss(model: TempoModel, direction: torch.Tensor, index: SegmentIndex,
              rng: np.random.Generator) -> torch.Tensor:
    """The ranking loss of one list drawn from `index`."""
    ranking = index.sample(rng)
    logits = relevance_logits(model, direction, ranking.question,
                              [(index.videos[v], i) for v, i in ranking.segments])
    return ranking_loss(logits, torch.tensor(ranking.labels, device=logits.device))


def train_localisation(model: TempoModel, head: nn.Linear, videos: list[data.EncodedVideo], steps: int,
                       lists: int, lr: float, rng: np.random.Generator, every: int) -> dict:
    """The compressor's language model and the base LM head on ranking lists (the vision tower stays frozen)."""
    index = SegmentIndex(videos)
    tok = model.compressor_tokenizer
    yes, no = tok.token_id("Yes"), tok.token_id("No")
    params = list(model.compressor.vlm.language_model.parameters()) + list(head.parameters())
    schedule = Schedule([{"params": params, "lr": lr}], steps)
    progress = Progress("localise", steps, every)
    for step in range(steps):
        total = 0.0
        for _ in range(lists):
            loss = list_loss(model, head.weight[yes] - head.weight[no], index, rng) / lists
            loss.backward()
            total += loss.item()
        schedule.step()
        progress.update(step, total)
    return progress.summary()


def ranking_regulariser(model: TempoModel, direction: torch.Tensor, videos: list[data.EncodedVideo],
                        rng: np.random.Generator) -> Callable[[], torch.Tensor]:
    """One ranking list's loss per call, against a fixed direction: keeps the relevance ranking while later
    stages train the compressor's language model for its memories."""
    index = SegmentIndex(videos)
    direction = direction.detach()
    return lambda: list_loss(model, direction, index, rng)


def localisation_accuracy(model: TempoModel, videos: list[data.EncodedVideo]) -> dict:
    """How often the most relevant segment overlaps the evidence (what ATA gives the most tokens), over the
    videos' non-global questions, per family and by video length."""
    hits: dict[str, list[bool]] = {}
    by_length: dict[str, list[bool]] = {"under 10 min": [], "10 min or more": []}
    for video in videos:
        for question in video.questions:
            if question.family == "global":
                continue
            with torch.inference_mode():
                _, relevance = compress_video(model, video, question.text)
            best = int(np.argmax(relevance))
            hit = segment_relevance(question, *video.plan.span(best))
            hits.setdefault(question.family, []).append(hit)
            by_length["under 10 min" if video.video.duration < 600 else "10 min or more"].append(hit)
    every = [h for family in hits.values() for h in family]
    return {"localisation": float(np.mean(every)), "questions": len(every),
            "per_family": {family: float(np.mean(h)) for family, h in hits.items()},
            "by_length": {name: float(np.mean(h)) for name, h in by_length.items() if h}}
