"""Video + question -> events: probe, compress segment by segment, allocate the budget, stream the answer."""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from dataclasses import dataclass
from functools import partial
from typing import Generator, Iterable, Iterator

import numpy as np
import torch
from PIL import Image

from .allocation import allocate, reduce_memory
from .cache import EncodedSegment, VideoCache, VideoEntry
from .config import RunConfig, SamplingConfig
from .decoder import Sampler
from .errors import InputError, ResourceError, TempoError
from .events import (AllocationDone, AnswerToken, Event, Finished, SegmentCompressed, SegmentSummary,
                     VideoProbed)
from .loading import TempoModel
from .patches import PatchGeometry, clip_size, even_clip_length, normalize, patchify, resize_frames, snap_frame
from .prompts import compressor_prompt_ids, decoder_prompt_ids, frame_group_times, time_tag
from .stream import segment_stream
from .video import (FrameReader, SamplingPlan, decode_workers, fit_long_edge, is_long, open_sparse, open_video,
                    plan_sampling)

THUMBNAIL_EDGE = 320


@dataclass
class PreparedSegment:
    """One segment's compressor-ready pixels plus what the UI shows for it."""

    index: int
    pixel_rows: torch.Tensor  # uint8 [patches, C * temporal_patch * patch * patch]
    grid: tuple[int, int, int]
    thumbnail: np.ndarray


class StageTimer:
    """Accumulates time per pipeline stage. Stages overlap when segments stream: decoding and preprocessing run
    on worker threads (their totals add up the workers' time), while the compressor runs on the caller's."""

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
    """Reject what cannot be a question; the text itself is passed on verbatim (it is never markup), except
    that characters no encoding can carry (lone surrogates from undecodable bytes) become U+FFFD."""
    if not isinstance(question, str) or not question.strip():
        raise InputError("Please type a question about the video.")
    if len(question) > max_chars:
        raise InputError(f"The question is {len(question):,} characters long; the limit is {max_chars:,}.")
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in question)


def _length(seconds: float) -> str:
    """A video length for messages: hours, minutes or seconds, whichever reads naturally."""
    if seconds >= 7200:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


def check_budget(num_segments: int, k_max: int, config: RunConfig) -> None:
    """Fail before any compression if the budget cannot give every segment a token (ATA, uniform)."""
    allocation = config.allocation
    if allocation.k_min > k_max:
        raise InputError(f"k_min ({allocation.k_min}) cannot exceed the {k_max} memory tokens a segment has.")
    if allocation.strategy in ("ata", "uniform") and allocation.budget < num_segments:
        frames = allocation.budget * config.sampling.segment_frames
        raise InputError(
            f"A budget of {allocation.budget} visual tokens cannot keep even one token for each of the "
            f"{num_segments} segments. Raise the budget to at least {num_segments}, or lower max frames to "
            f"{frames} or fewer.")


def prepare_segment(index: int, frames: list[np.ndarray], plan: SamplingPlan, sampling: SamplingConfig,
                    geometry: PatchGeometry, timer: StageTimer) -> PreparedSegment:
    """Decoded frames of one segment -> patch rows: each frame is reduced to model size on its own (PIL, as
    released), then the segment is resized and cut into patches in one vectorised step."""
    with timer.stage("preprocess"):
        images = [fit_long_edge(Image.fromarray(frame), sampling.long_edge) for frame in frames]
        middle = images[len(images) // 2].copy()
        middle.thumbnail((THUMBNAIL_EDGE, THUMBNAIL_EDGE))
        snapped = torch.stack([torch.from_numpy(np.asarray(snap_frame(image, geometry).convert("RGB")).copy())
                               for image in images]).permute(0, 3, 1, 2)
        size = clip_size(snapped.shape[2], snapped.shape[3], even_clip_length(len(images), geometry), geometry)
        rows, grid = patchify(resize_frames(snapped, size), geometry)
    return PreparedSegment(index, rows, grid, np.asarray(middle))


def prepare_segments(path: str | os.PathLike, reader: FrameReader, plan: SamplingPlan, sampling: SamplingConfig,
                     geometry: PatchGeometry, timer: StageTimer) -> Iterator[PreparedSegment]:
    """Segments in order, decoded and preprocessed on worker threads while the caller compresses earlier ones.

    `reader` (already open) decodes short videos. Long ones are decoded sparsely where the file allows it, by
    one worker per core, each over a share of the time range."""
    if is_long(plan) and not plan.keyframes_only:
        sparse = open_sparse(path)
        if sparse is not None:
            reader.close()
            reader = sparse
    workers = decode_workers(plan)
    if reader.shareable:
        readers = [lambda: reader] * workers
    else:
        readers = [lambda: reader] + [partial(open_video, path)] * (workers - 1)
    prepare = partial(prepare_segment, plan=plan, sampling=sampling, geometry=geometry, timer=timer)
    return segment_stream(plan, readers, prepare, timer.stage)


def encode_segments(model: TempoModel, segments: Iterable[PreparedSegment], micro_batch: int,
                    timer: StageTimer) -> Iterator[list[EncodedSegment]]:
    """The vision tower over micro-batches of segments (the question-independent half of compression)."""
    geometry = model.geometry

    def encode(batch: list[PreparedSegment]) -> list[EncodedSegment]:
        with timer.stage("vision"), torch.inference_mode():
            pixel_values = normalize(torch.cat([s.pixel_rows for s in batch]), geometry)
            vision = model.compressor.encode_vision(pixel_values, [s.grid for s in batch])
        return [EncodedSegment(s.index, s.thumbnail, v) for s, v in zip(batch, vision)]

    for batch in micro_batches(segments, micro_batch):
        yield encode(batch)


def micro_batches(items: Iterable, size: int) -> Iterator[list]:
    """Lists of `size` items, except the first, which holds one item: on a long video the first segment's result
    then shows as soon as its own frames are decoded, not after `size` segments' worth of video."""
    batch: list = []
    limit = 1
    for item in items:
        batch.append(item)
        if len(batch) == limit:
            yield batch
            batch, limit = [], size
    if batch:
        yield batch


def compress_batch(model: TempoModel, batch: list[EncodedSegment], question: str, plan: SamplingPlan,
                   timer: StageTimer) -> tuple[torch.Tensor, list[float]]:
    """The question-dependent half: memories [B, k_max, d_s] and relevance for a micro-batch of segments."""
    geometry = model.geometry
    with timer.stage("compress"), torch.inference_mode():
        prompts = []
        for segment in batch:
            grid = segment.vision.grid
            times = frame_group_times(plan.model_times(segment.index, grid[0] * geometry.temporal_patch_size),
                                      geometry.merge_size)
            per_group = grid[1] * grid[2] // geometry.merge_size**2
            prompts.append(compressor_prompt_ids(model.compressor_tokenizer, question, times, per_group))
        memories, relevance = model.compressor(prompts, [s.vision for s in batch])
    return memories, relevance.tolist()


def decoder_embeddings(model: TempoModel, memories: list[torch.Tensor], tokens: list[int], truncation: str,
                       question: str, tag_times: list[float], context_length: int) -> tuple[torch.Tensor, int]:
    """The decoder's input embeddings and how many visual positions had to be cut to fit the context.

    As released: the visual sequence is cut to context - reserve - text length (possibly inside a segment).
    Unlike the release, a question that leaves no room at all is rejected instead of being cut off.
    """
    kept = [reduce_memory(memory, k, truncation) for memory, k in zip(memories, tokens)]
    tags = [model.tokenizer.markup(time_tag(t)) for t in tag_times]
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
    plan: SamplingPlan
    question: str
    memories: list[torch.Tensor]  # [k_max, d_s] per segment
    relevance: list[float]


def probe(reader: FrameReader, sampling: SamplingConfig) -> tuple[VideoProbed, SamplingPlan]:
    """The sampling plan for this video, and what the UI says about it."""
    info = reader.info
    plan = plan_sampling(reader, sampling)
    probed = VideoProbed(info.path, info.duration, info.native_fps, info.total_frames, info.width, info.height,
                         len(plan.frame_indices), plan.real_fps, len(plan.segments), info.backend)
    return probed, plan


def compress(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig,
             timer: StageTimer) -> Generator[Event, None, CompressedVideo]:
    """Probe and compress segment by segment, yielding `VideoProbed` then one `SegmentCompressed` each.

    The question-independent work (decoding, pixels, vision tower) is kept in `model.video_cache`, so another
    question about the same file only reruns the compressor's language model.
    """
    sampling = config.sampling
    reader, batches = None, None
    try:
        with timer.stage("open"):
            if os.path.isfile(video) and os.path.getsize(video) > config.limits.max_upload_bytes:
                raise InputError(f"The file is {os.path.getsize(video) / 2**20:,.1f} MB; this server accepts up "
                                 f"to {config.limits.max_upload_bytes / 2**20:,.1f} MB.")
            key = VideoCache.key(video, sampling) if os.path.isfile(video) else None
            cached = model.video_cache.get(key) if key else None
            if cached is None:
                reader = open_video(video, keyframes_only=sampling.fast_seek, long_edge=sampling.long_edge)
                probed, plan = probe(reader, sampling)
            else:
                probed, plan = cached.probed, cached.plan
        if probed.duration > config.limits.max_duration_s:
            raise InputError(f"The video lasts {_length(probed.duration)}; this server accepts up to "
                             f"{_length(config.limits.max_duration_s)}.")
        yield probed
        check_budget(probed.num_segments, model.spec.num_memory_tokens, config)

        if cached is None:
            segments = prepare_segments(video, reader, plan, sampling, model.geometry, timer)
            reader = None  # the first decoding worker owns it now
            batches = encode_segments(model, segments, config.micro_batch, timer)
        else:
            batches = micro_batches(cached.segments, config.micro_batch)

        compressed = CompressedVideo(probed, plan, question, [], [])
        encoded: list[EncodedSegment] | None = [] if cached is None and key is not None else None
        for batch in batches:
            memories, relevance = compress_batch(model, batch, question, plan, timer)
            for segment, memory, score in zip(batch, memories, relevance):
                start, end = plan.span(segment.index)
                compressed.memories.append(memory)
                compressed.relevance.append(score)
                yield SegmentCompressed(segment.index, probed.num_segments, start, end, score, segment.thumbnail)
            if encoded is not None:  # kept for the cache only while it could still fit there
                encoded += batch
                if sum(s.nbytes for s in encoded) > model.video_cache.max_bytes:
                    encoded = None
    finally:
        if reader is not None:
            reader.close()
        if batches is not None and hasattr(batches, "close"):
            batches.close()  # stops the decoding workers if we leave early
    if encoded is not None:
        model.video_cache.put(key, VideoEntry(probed, plan, encoded))
    return compressed


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
                                         compressed.question, compressed.plan.tag_times(), context_length)
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
    segments = [SegmentSummary(i, *compressed.plan.span(i), score, k)
                for i, (score, k) in enumerate(zip(compressed.relevance, tokens))]
    yield Finished(model.tokenizer.decode(token_ids).strip(), token_ids, segments, allocation.budget, sum(tokens),
                   k_max, timings, compressed.video)


def run(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None) -> Iterator[Event]:
    """Answer `question` about `video`, yielding progress events; the last one is `Finished`."""
    config = config or RunConfig()
    config.validate()
    question = check_question(question, config.limits.max_question_chars)
    timer = StageTimer()
    try:
        compressed = yield from compress(model, video, question, config, timer)
        yield from respond(model, compressed, config, timer)
    except (torch.OutOfMemoryError, MemoryError):
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # let the next request start from a clean slate
        raise ResourceError("Out of memory on this video. Lower max frames, the micro-batch or the budget, "
                            "or use a smaller model.") from None


def answer(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None) -> Finished:
    """Run to completion and return the `Finished` event."""
    for event in run(model, video, question, config):
        if isinstance(event, Finished):
            return event
    raise TempoError("The pipeline ended without an answer.")
