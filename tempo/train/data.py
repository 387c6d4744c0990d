"""Training data from the synthetic world, prepared exactly the way inference prepares a video file."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from ..config import SamplingConfig
from ..model.compressor import LocalCompressor
from ..model.prompts import DECODER_SYSTEM_PROMPT, ROUTING_SYSTEM_PROMPT, time_tag
from ..synthetic import COLOURS, KINDS, Event, Question, SyntheticVideo, make_questions, occurrences
from ..video import SamplingPlan, VideoInfo, uniform_plan
from ..video.patches import PatchGeometry, model_frames, normalize, patchify
from ..video.segments import VisionFeatures

NATIVE_FPS = 4.0  # the rate the example mp4s are written at: sampling is emulated on it
SEGMENT_FRAMES = 8
LIST_BIG = "List the big shapes."
LIST_SMALL = "List the small shapes."


def plan_video(video: SyntheticVideo, max_frames: int) -> SamplingPlan:
    """The released sampling of a synthetic video, as if read from an mp4 written at NATIVE_FPS."""
    info = VideoInfo("synthetic", round(video.duration * NATIVE_FPS), NATIVE_FPS, video.width, video.height,
                     "synthetic")
    return uniform_plan(info, SamplingConfig(max_frames=max_frames, segment_frames=SEGMENT_FRAMES))


def segment_pixels(video: SyntheticVideo, plan: SamplingPlan, index: int,
                   geometry: PatchGeometry) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """Patch rows of one segment through the inference pixel chain (identity resizes at 512x256)."""
    frames = video.frames(plan.segment_frame_times(index))  # [T, H, W, 3]
    return patchify(model_frames(frames, geometry), geometry)


def token_labels(video: SyntheticVideo, frame_times: list[float], geometry: PatchGeometry,
                 coverage: float = 0.2) -> np.ndarray:
    """What each merged vision token of a run of frames shows, for the base stage's auxiliary heads: [pairs,
    rows, cols, 3] holding the kind (1-6) and colour (1-8) of the event covering it and the kind of the moving shape
    covering it, 0 where nothing covers `coverage` of the token's pixels. A token spans two frames; either frame
    counts."""
    cell = geometry.factor  # pixels per side of a merged token
    rows, cols = video.height // cell, video.width // cell
    times = list(frame_times) + list(frame_times[-1:]) * (len(frame_times) % 2)
    labels = np.zeros((len(times), rows, cols, 3), dtype=np.int64)
    for f, t in enumerate(times):
        owner = np.zeros((video.height, video.width), dtype=np.int64)  # which sprite (1-based) shows at a pixel
        drawn = video.sprites(t)
        for number, placed in enumerate(drawn, 1):
            placed.paint(owner, number)
        cells = owner.reshape(rows, cell, cols, cell).transpose(0, 2, 1, 3).reshape(rows, cols, cell * cell)
        for number, placed in enumerate(drawn, 1):
            covered = (cells == number).mean(-1) >= coverage
            kind = KINDS.index(placed.kind) + 1
            if placed.event:
                labels[f][covered, 0] = kind
                labels[f][covered, 1] = list(COLOURS).index(placed.colour) + 1
            else:
                labels[f][covered, 2] = kind
    pairs = labels.reshape(len(times) // 2, 2, rows, cols, 3)
    return np.where(pairs[:, 0] > 0, pairs[:, 0], pairs[:, 1])


def relevant(question: Question, frame_times: list[float]) -> bool:
    """The relevance label: a global question concerns every segment; others the frames showing their events."""
    if question.family == "global":
        return True
    return any(start <= t < end for t in frame_times for start, end in question.evidence)


def visible_events(video: SyntheticVideo, frame_times: list[float]) -> list[Event]:
    """The events shown in any of these frames, in the order they happen."""
    return [event for event in video.events if any(event.start <= t < event.end for t in frame_times)]


def big_shapes(video: SyntheticVideo, frame_times: list[float]) -> str:
    """The events visible in these frames, e.g. "red star.", or "none."."""
    seen: list[str] = []
    for event in visible_events(video, frame_times):
        if f"{event.colour} {event.kind}" not in seen:
            seen.append(f"{event.colour} {event.kind}")
    return ", ".join(seen) + "." if seen else "none."


def small_shapes(video: SyntheticVideo, frame_times: list[float]) -> str:
    """The kinds of the moving shapes in these frames' scenes, e.g. "circle, square."."""
    kinds: list[str] = []
    for scene in video.scenes:
        if any(scene.start <= t < scene.end for t in frame_times):
            kinds += [shape.kind for shape in scene.shapes if shape.kind not in kinds]
    return ", ".join(kinds) + "."


def absent_questions(video: SyntheticVideo, rng: np.random.Generator, count: int) -> list[Question]:
    """Questions about (colour, kind) pairs that never occur as events: always irrelevant, hard negatives."""
    present = set(occurrences(video))
    questions: list[Question] = []
    while len(questions) < count:
        colour, kind = str(rng.choice(list(COLOURS))), str(rng.choice(KINDS))
        if (kind, colour) in present:
            continue
        text = (f"When does the {colour} {kind} appear?" if rng.random() < 0.5
                else f"How many times does the {colour} {kind} appear?")
        questions.append(Question("grounding", text, "", ()))
    return questions


def training_answer(question: Question, plan: SamplingPlan) -> str:
    """The target text. Grounding answers name the time tag of the segment that shows most of the event,
    which is what the decoder can read off its input; the other families use the ground truth."""
    if question.family != "grounding":
        return question.answer
    best = max(range(len(plan.segments)), key=lambda i: sum(start <= t < end for t in plan.segment_frame_times(i)
                                                            for start, end in question.evidence))
    return f"At {plan.tag_time(best):.1f} seconds."


def corpus(videos: list[SyntheticVideo], rng: np.random.Generator) -> Iterator[str]:
    """Text the tokenizer is trained on: prompts, questions, answers, descriptions and time tags."""
    yield ROUTING_SYSTEM_PROMPT + "\nQuery:\n" + DECODER_SYSTEM_PROMPT + "\nsystem\nuser\nassistant\nYes\nNo"
    yield "What is happening in the video? Describe the video. Where is it? Who? Why? How long? What color?"
    for video in videos:
        plan = plan_video(video, 1024)
        for question in make_questions(video, rng) + absent_questions(video, rng, 2):
            yield question.text
            yield training_answer(question, plan) if question.answer else "No"
            yield "Yes"
        for index in range(0, len(plan.segments), 7):
            times = plan.segment_frame_times(index)
            yield " ".join([LIST_BIG, big_shapes(video, times), LIST_SMALL, small_shapes(video, times),
                            time_tag(plan.tag_time(index))])


@dataclass
class EncodedVideo:
    """A synthetic video with its sampling plan, questions and frozen vision-tower features per segment."""

    video: SyntheticVideo
    plan: SamplingPlan
    questions: list[Question]
    features: list[VisionFeatures]  # float16 on the CPU

    def vision(self, device: torch.device, dtype: torch.dtype) -> list[VisionFeatures]:
        return [self.segment_vision(i, device, dtype) for i in range(len(self.features))]

    def segment_vision(self, index: int, device: torch.device, dtype: torch.dtype) -> VisionFeatures:
        f = self.features[index]
        return VisionFeatures(f.embeds.to(device, dtype), [d.to(device, dtype) for d in f.deepstack], f.grid)


def encode_videos(compressor: LocalCompressor, videos: list[SyntheticVideo], max_frames: int,
                  geometry: PatchGeometry, rng: np.random.Generator, batch: int = 8) -> list[EncodedVideo]:
    """Render, patchify and run the (now frozen) vision tower once per segment; segments are rendered on a
    thread pool (numpy, numba and torch release the GIL) while the vision tower works through earlier ones."""
    encoded = []
    with ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        for video in videos:
            plan = plan_video(video, max_frames)
            rendered = pool.map(partial(segment_pixels, video, plan, geometry=geometry), range(len(plan.segments)))
            features = _vision_features(compressor, rendered, geometry, batch)
            encoded.append(EncodedVideo(video, plan, make_questions(video, rng), features))
    return encoded


def _vision_features(compressor: LocalCompressor, rendered: Iterator[tuple[torch.Tensor, tuple[int, int, int]]],
                     geometry: PatchGeometry, batch: int) -> list[VisionFeatures]:
    features: list[VisionFeatures] = []
    rendered = iter(rendered)
    while pixels := list(itertools.islice(rendered, batch)):
        with torch.inference_mode():
            out = compressor.encode_vision(normalize(torch.cat([rows for rows, _ in pixels]), geometry),
                                           [grid for _, grid in pixels])
        features += [VisionFeatures(f.embeds.half().cpu(), [d.half().cpu() for d in f.deepstack], f.grid)
                     for f in out]
    return features
