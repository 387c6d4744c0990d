"""Video + question -> events: probe, compress segment by segment, allocate the budget, stream the answer."""

from __future__ import annotations

import contextlib
import os
import time
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from functools import partial
from typing import Generator, Iterable, Iterator

import numpy as np
import torch

from .allocation import allocate, check_budget
from .cache import Compression, EncodedSegment, VideoCache, VideoEntry, default_cache
from .config import RunConfig, SamplingConfig
from .errors import InputError, ResourceError, TempoError
from .events import (AllocationDone, AnswerToken, Event, Finished, SegmentCompressed, SegmentSummary,
                     VideoProbed)
from .model import TempoModel
from .patches import PatchGeometry, fit_long_edge, model_frames, normalize, patchify
from .prompts import segment_prompt_ids
from .stream import segment_stream
from .resample import resize
from .video import (FrameReader, SamplingPlan, decode_workers, is_long, long_edge_size, open_sparse, open_video,
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


def check_allocation(num_segments: int, k_max: int, budget: int, config: RunConfig) -> None:
    """Fail before any compression if the allocation settings cannot work for this many segments."""
    allocation = config.allocation
    if allocation.k_min > k_max:
        raise InputError(f"k_min ({allocation.k_min}) cannot exceed the {k_max} memory tokens a segment has.")
    check_budget(num_segments, budget, allocation.strategy, config.sampling.segment_frames)


def effective_budget(model: TempoModel, config: RunConfig) -> int:
    """The visual token budget of a run: the configured one, else the checkpoint's."""
    budget = config.allocation.budget
    return model.spec.visual_token_budget if budget is None else budget


def prepare_segment(index: int, frames: list[np.ndarray], sampling: SamplingConfig, geometry: PatchGeometry,
                    timer: StageTimer) -> PreparedSegment:
    """Decoded frames of one segment -> patch rows, the whole segment at once through the released resize chain
    (`patches`), plus the middle frame as a thumbnail."""
    with timer.stage("preprocess"):
        fitted = fit_long_edge(np.stack(frames), sampling.long_edge)  # [T, H, W, 3]
        middle = fitted[len(frames) // 2][None]
        width, height = long_edge_size(middle.shape[2], middle.shape[1], THUMBNAIL_EDGE)
        rows, grid = patchify(model_frames(fitted, geometry), geometry)
    return PreparedSegment(index, rows, grid, resize(middle, height, width)[0])


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
    prepare = partial(prepare_segment, sampling=sampling, geometry=geometry, timer=timer)
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
    with timer.stage("compress"), torch.inference_mode():
        prompts = [segment_prompt_ids(model.compressor_tokenizer, question, plan, s.index, s.vision.grid,
                                      model.geometry) for s in batch]
        memories, relevance = model.compressor(prompts, [s.vision for s in batch])
    return memories, relevance.tolist()


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


def compress(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig, timer: StageTimer,
             cache: VideoCache | None = None) -> Generator[Event, None, CompressedVideo]:
    """Probe and compress segment by segment, yielding `VideoProbed` then one `SegmentCompressed` each.

    The question-independent work (decoding, pixels, vision tower) is kept in `cache` (default: one cache per
    model), so another question about the same file only reruns the compressor's language model, and the same
    question again (other allocation settings) reruns nothing before the allocation.
    """
    cache = default_cache(model) if cache is None else cache
    sampling = config.sampling
    reader, batches = None, None
    try:
        with timer.stage("open"):
            if os.path.isfile(video) and os.path.getsize(video) > config.limits.max_upload_bytes:
                raise InputError(f"The file is {os.path.getsize(video) / 2**20:,.1f} MB; this server accepts up "
                                 f"to {config.limits.max_upload_bytes / 2**20:,.1f} MB.")
            key = cache.key(video, sampling) if os.path.isfile(video) else None
            cached = cache.get(key) if key else None
            if cached is None:
                reader = open_video(video, keyframes_only=sampling.fast_seek, long_edge=sampling.long_edge)
                probed, plan = probe(reader, sampling)
            else:
                probed, plan = cached.probed, cached.plan
        if probed.duration > config.limits.max_duration_s:
            raise InputError(f"The video lasts {_length(probed.duration)}; this server accepts up to "
                             f"{_length(config.limits.max_duration_s)}.")
        yield probed
        check_allocation(probed.num_segments, model.spec.num_memory_tokens, effective_budget(model, config), config)

        known = cache.compression(key, question) if cached is not None else None
        if known is not None:  # this question was asked before: only the allocation can differ
            for segment, score in zip(cached.segments, known.relevance):
                yield SegmentCompressed(segment.index, probed.num_segments, *plan.span(segment.index), score,
                                        segment.thumbnail)
            return CompressedVideo(probed, plan, question, list(known.memories), list(known.relevance))

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
                if sum(s.nbytes for s in encoded) > cache.max_bytes:
                    encoded = None
    finally:
        if reader is not None:
            reader.close()
        if batches is not None and hasattr(batches, "close"):
            batches.close()  # stops the decoding workers if we leave early
    compression = Compression(list(compressed.memories), list(compressed.relevance))
    if encoded is not None:
        cache.put(key, VideoEntry(probed, plan, encoded, OrderedDict({question: compression})))
    elif cached is not None:
        cache.remember(key, question, compression)
    return compressed


def respond(model: TempoModel, compressed: CompressedVideo, config: RunConfig,
            timer: StageTimer) -> Iterator[Event]:
    """Allocate the budget over the compressed segments and stream the answer: `AllocationDone`,
    `AnswerToken`s, then `Finished`."""
    allocation, k_max, budget = config.allocation, model.spec.num_memory_tokens, effective_budget(model, config)
    with timer.stage("allocate"), torch.inference_mode():
        tokens = allocate(compressed.relevance, budget, allocation.k_min, k_max, allocation.strategy,
                          allocation.seed)
        embeds, cut = model.decoder_inputs(compressed.memories, tokens, allocation.truncation, compressed.question,
                                           compressed.plan.tag_times(),
                                           config.context_length or model.spec.context_length)
    yield AllocationDone(tokens, budget, sum(tokens), allocation.k_min, k_max, allocation.strategy,
                         allocation.truncation, cut)

    piece = model.tokenizer.piece_decoder()
    token_ids = []
    generated = model.decoder.generate(embeds, config.generation, set(model.spec.stop_ids), model.spec.top_k)
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
    yield Finished(model.tokenizer.decode(token_ids).strip(), token_ids, segments, budget, sum(tokens),
                   k_max, timings, compressed.video, config.summary(budget))


@contextlib.contextmanager
def out_of_memory_as_error() -> Iterator[None]:
    """Running out of (GPU) memory becomes a ResourceError the user can act on, and frees what can be freed."""
    try:
        yield
    except (torch.OutOfMemoryError, MemoryError):
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # let the next request start from a clean slate
        raise ResourceError("Out of memory on this video. Lower max frames, the micro-batch or the budget, "
                            "or use a smaller model.") from None


def run(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None,
        cache: VideoCache | None = None) -> Iterator[Event]:
    """Answer `question` about `video`, yielding progress events; the last one is `Finished`.

    `cache` keeps the question-independent work for follow-up questions (default: one cache per model)."""
    config = config or RunConfig()
    config.validate()
    question = check_question(question, config.limits.max_question_chars)
    timer = StageTimer()
    with out_of_memory_as_error():
        compressed = yield from compress(model, video, question, config, timer, cache)
        yield from respond(model, compressed, config, timer)


def answer(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None,
           cache: VideoCache | None = None) -> Finished:
    """Run to completion and return the `Finished` event."""
    for event in run(model, video, question, config, cache):
        if isinstance(event, Finished):
            return event
    raise TempoError("The pipeline ended without an answer.")
