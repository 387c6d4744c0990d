"""Video + question -> events: probe, compress segment by segment, allocate the budget, stream the answer."""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Generator, Iterable, Iterator

import numpy as np
import torch
from PIL import Image

from .allocation import allocate, reduce_memory
from .cache import EncodedSegment, VideoCache, VideoEntry
from .config import RunConfig, SamplingConfig
from .decoder import Sampler
from .errors import InputError, TempoError
from .events import (AllocationDone, AnswerToken, Event, Finished, SegmentCompressed, SegmentSummary,
                     VideoProbed)
from .loading import TempoModel
from .patches import PatchGeometry, even_clip_length, model_frame, normalize, patchify
from .prompts import compressor_prompt_ids, decoder_prompt_ids, frame_group_times, segment_time_tag
from .video import FrameReader, fit_long_edge, open_video, sample_frame_indices, sampled_fps, segment_ranges

THUMBNAIL_EDGE = 320


@dataclass
class PreparedSegment:
    """One segment's compressor-ready pixels plus what the UI shows for it."""

    index: int
    first_frame: int  # position of its first frame among the sampled frames
    num_frames: int
    pixel_rows: torch.Tensor  # uint8 [patches, C * temporal_patch * patch * patch]
    grid: tuple[int, int, int]
    thumbnail: np.ndarray


class StageTimer:
    """Accumulates wall time per pipeline stage (stages interleave when segments stream)."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.totals: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.totals[name] += time.perf_counter() - start


def check_question(question: str, max_chars: int) -> str:
    """Reject what cannot be a question; the text itself is passed on verbatim (it is never markup)."""
    if not isinstance(question, str) or not question.strip():
        raise InputError("Please type a question about the video.")
    if len(question) > max_chars:
        raise InputError(f"The question is {len(question):,} characters long; the limit is {max_chars:,}.")
    return question


def check_budget(num_segments: int, config: RunConfig) -> None:
    """Fail before any compression if the budget cannot give every segment a token (ATA, uniform)."""
    allocation = config.allocation
    if allocation.strategy in ("ata", "uniform") and allocation.budget < num_segments:
        frames = allocation.budget * config.sampling.segment_frames
        raise InputError(
            f"A budget of {allocation.budget} visual tokens cannot keep even one token for each of the "
            f"{num_segments} segments. Raise the budget to at least {num_segments}, or lower max frames to "
            f"{frames} or fewer.")


def prepare_segments(reader: FrameReader, frame_indices: list[int], sampling: SamplingConfig,
                     geometry: PatchGeometry, timer: StageTimer) -> Iterator[PreparedSegment]:
    """Decode the sampled frames in order, reducing each to model resolution at once, one segment at a time."""
    ranges = segment_ranges(len(frame_indices), sampling.segment_frames)
    frames = iter(reader.read(frame_indices))
    for index, window in enumerate(ranges):
        clip_frames = even_clip_length(len(window), geometry)
        pixels, thumbnail = [], None
        for position in window:
            with timer.stage("decode"):
                frame = next(frames)
            with timer.stage("preprocess"):
                image = fit_long_edge(Image.fromarray(frame), sampling.long_edge)
                pixels.append(model_frame(image, geometry, clip_frames))
                if position == window[len(window) // 2]:
                    image.thumbnail((THUMBNAIL_EDGE, THUMBNAIL_EDGE))
                    thumbnail = np.asarray(image)
        with timer.stage("preprocess"):
            rows, grid = patchify(torch.stack(pixels), geometry)
        yield PreparedSegment(index, window.start, len(window), rows, grid, thumbnail)


def encode_segments(model: TempoModel, segments: Iterable[PreparedSegment], micro_batch: int,
                    timer: StageTimer) -> Iterator[list[EncodedSegment]]:
    """The vision tower over micro-batches of segments (the question-independent half of compression)."""
    geometry = model.geometry

    def encode(batch: list[PreparedSegment]) -> list[EncodedSegment]:
        with timer.stage("vision"), torch.inference_mode():
            pixel_values = normalize(torch.cat([s.pixel_rows for s in batch]), geometry)
            vision = model.compressor.encode_vision(pixel_values, [s.grid for s in batch])
        return [EncodedSegment(s.index, s.first_frame, s.num_frames, s.thumbnail, v) for s, v in zip(batch, vision)]

    batch: list[PreparedSegment] = []
    for segment in segments:
        batch.append(segment)
        if len(batch) == micro_batch:
            yield encode(batch)
            batch = []
    if batch:
        yield encode(batch)


def compress_batch(model: TempoModel, batch: list[EncodedSegment], question: str, real_fps: float,
                   timer: StageTimer) -> tuple[torch.Tensor, list[float]]:
    """The question-dependent half: memories [B, k_max, d_s] and relevance for a micro-batch of segments."""
    geometry = model.geometry
    with timer.stage("compress"), torch.inference_mode():
        prompts = []
        for segment in batch:
            grid = segment.vision.grid
            times = frame_group_times(segment.first_frame, grid[0] * geometry.temporal_patch_size, real_fps,
                                      geometry.merge_size)
            per_group = grid[1] * grid[2] // geometry.merge_size**2
            prompts.append(compressor_prompt_ids(model.compressor_tokenizer, question, times, per_group))
        memories, relevance = model.compressor(prompts, [s.vision for s in batch])
    return memories, relevance.tolist()


def decoder_embeddings(model: TempoModel, memories: list[torch.Tensor], tokens: list[int], truncation: str,
                       question: str, real_fps: float, segment_frames: int,
                       context_length: int) -> tuple[torch.Tensor, int]:
    """The decoder's input embeddings and how many visual positions had to be cut to fit the context.

    As released: the visual sequence is cut to context - reserve - text length (possibly inside a segment).
    Unlike the release, a question that leaves no room at all is rejected instead of being cut off.
    """
    kept = [reduce_memory(memory, k, truncation) for memory, k in zip(memories, tokens)]
    tags = [model.tokenizer.markup(segment_time_tag(i, segment_frames, real_fps)) for i in range(len(memories))]
    visual = model.decoder.visual_sequence(kept, tags)
    before, after = decoder_prompt_ids(model.tokenizer, question)
    room = context_length - model.spec.inference_reserve - len(before) - len(after)
    if room <= 0:
        raise InputError(f"The question takes {len(before) + len(after)} tokens and leaves no room for the video "
                         f"in the decoder's {context_length}-token context; please shorten it.")
    cut = max(0, visual.shape[0] - room)
    return model.decoder.prompt_embeddings(before, visual[:room], after), cut


@dataclass
class CompressedVideo:
    """One (video, question) after the compressor: all the decoder side needs, reusable across allocations."""

    video: VideoProbed
    question: str
    memories: list[torch.Tensor]  # [k_max, d_s] per segment
    relevance: list[float]
    spans: list[tuple[float, float]]  # seconds


def compress(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig,
             timer: StageTimer) -> Generator[Event, None, CompressedVideo]:
    """Probe and compress segment by segment, yielding `VideoProbed` then one `SegmentCompressed` each.

    The question-independent work (decoding, pixels, vision tower) is kept in `model.video_cache`, so another
    question about the same file only reruns the compressor's language model.
    """
    sampling = config.sampling
    reader = None
    try:
        with timer.stage("open"):
            key = VideoCache.key(video, sampling) if os.path.isfile(video) else None
            cached = model.video_cache.get(key) if key else None
            if cached is None:
                reader = open_video(video)
                probed = probe(reader, sampling)
            else:
                probed = cached.probed
        if probed.duration > config.limits.max_duration_s:
            raise InputError(f"The video lasts {probed.duration / 3600:.1f} h; this server accepts up to "
                             f"{config.limits.max_duration_s / 3600:.1f} h.")
        yield probed
        check_budget(probed.num_segments, config)

        if cached is None:
            frame_indices = sample_frame_indices(reader.info.total_frames, reader.info.native_fps, sampling.fps,
                                                 sampling.min_frames, sampling.max_frames)
            segments = prepare_segments(reader, frame_indices, sampling, model.geometry, timer)
            batches = encode_segments(model, segments, config.micro_batch, timer)
        else:
            batches = (cached.segments[i:i + config.micro_batch]
                       for i in range(0, len(cached.segments), config.micro_batch))

        compressed = CompressedVideo(probed, question, [], [], [])
        encoded: list[EncodedSegment] = []
        for batch in batches:
            memories, relevance = compress_batch(model, batch, question, probed.real_fps, timer)
            for segment, memory, score in zip(batch, memories, relevance):
                start = segment.first_frame / probed.real_fps
                end = min((segment.first_frame + segment.num_frames) / probed.real_fps, probed.duration)
                compressed.memories.append(memory)
                compressed.relevance.append(score)
                compressed.spans.append((start, end))
                yield SegmentCompressed(segment.index, probed.num_segments, start, end, score, segment.thumbnail)
            encoded += batch
    finally:
        if reader is not None:
            reader.close()
    if cached is None and key is not None:
        model.video_cache.put(key, VideoEntry(probed, encoded))
    return compressed


def probe(reader: FrameReader, sampling: SamplingConfig) -> VideoProbed:
    """What the sampling plan will be for this video."""
    info = reader.info
    frame_indices = sample_frame_indices(info.total_frames, info.native_fps, sampling.fps, sampling.min_frames,
                                         sampling.max_frames)
    num_segments = len(segment_ranges(len(frame_indices), sampling.segment_frames))
    return VideoProbed(info.path, info.duration, info.native_fps, info.total_frames, info.width, info.height,
                       len(frame_indices), sampled_fps(len(frame_indices), info), num_segments, info.backend)


def respond(model: TempoModel, compressed: CompressedVideo, config: RunConfig,
            timer: StageTimer) -> Iterator[Event]:
    """Allocate the budget over the compressed segments and stream the answer: `AllocationDone`,
    `AnswerToken`s, then `Finished`."""
    allocation, generation = config.allocation, config.generation
    k_max = model.spec.num_memory_tokens
    with timer.stage("allocate"), torch.inference_mode():
        tokens = allocate(compressed.relevance, allocation.budget, allocation.k_min, k_max, allocation.strategy,
                          allocation.seed)
        context_length = config.context_length or model.spec.context_length
        embeds, cut = decoder_embeddings(model, compressed.memories, tokens, allocation.truncation,
                                         compressed.question, compressed.video.real_fps,
                                         config.sampling.segment_frames, context_length)
    yield AllocationDone(tokens, allocation.budget, sum(tokens), allocation.k_min, k_max, allocation.strategy,
                         allocation.truncation, cut)

    sampler = Sampler(generation.temperature, generation.top_p, model.spec.top_k, generation.seed)
    piece = model.tokenizer.piece_decoder()
    token_ids = []
    generated = model.decoder.generate(embeds, generation.max_new_tokens, set(model.spec.stop_ids), sampler)
    while True:
        with timer.stage("generate"):
            token = next(generated, None)
        if token is None:
            break
        token_ids.append(token)
        yield AnswerToken(token, piece(token))

    timings = {stage: round(seconds, 4) for stage, seconds in timer.totals.items()}
    timings["total"] = round(time.perf_counter() - timer.started, 4)
    segments = [SegmentSummary(i, start, end, score, k) for i, ((start, end), score, k)
                in enumerate(zip(compressed.spans, compressed.relevance, tokens))]
    yield Finished(model.tokenizer.decode(token_ids).strip(), token_ids, segments, allocation.budget, sum(tokens),
                   k_max, timings, compressed.video)


def run(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None) -> Iterator[Event]:
    """Answer `question` about `video`, yielding progress events; the last one is `Finished`."""
    config = config or RunConfig()
    config.validate()
    question = check_question(question, config.limits.max_question_chars)
    timer = StageTimer()
    compressed = yield from compress(model, video, question, config, timer)
    yield from respond(model, compressed, config, timer)


def answer(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None) -> Finished:
    """Run to completion and return the `Finished` event."""
    for event in run(model, video, question, config):
        if isinstance(event, Finished):
            return event
    raise TempoError("The pipeline ended without an answer.")
