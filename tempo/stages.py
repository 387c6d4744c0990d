"""The pipeline's stages, each a function of its own: open and probe the file (or find it in the cache) and check it
against the limits; decode and preprocess segments on worker threads (`prepare_segments`); the vision tower and the
compressor over micro-batches; the allocation and the answer (`respond`). `pipeline` strings them together."""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial
from typing import Iterable, Iterator

import numpy as np
import torch

from .allocation import allocate
from .cache import EncodedSegment, PreparedSegment, VideoCache, VideoEntry, VideoKey
from .config import Limits, RunConfig, SamplingConfig
from .errors import InputError, ResourceError
from .events import AllocationDone, AnswerToken, Event, Finished, SegmentSummary, VideoProbed
from .model import TempoModel
from .model.prompts import segment_prompt_ids
from .video import (FrameReader, SamplingPlan, decode_workers, is_long, long_edge_size, open_sparse, open_video,
                    plan_sampling)
from .video.patches import PatchGeometry, fit_long_edge, model_frames, normalize, patchify
from .video.resample import resize
from .video.stream import segment_stream

THUMBNAIL_EDGE = 320


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


def encode_batch(model: TempoModel, batch: list[PreparedSegment | EncodedSegment],
                 timer: StageTimer) -> list[EncodedSegment]:
    """The vision tower over a micro-batch's pixels (the question-independent half of compression); segments that
    come with their vision features pass as they are."""
    pixels = [s for s in batch if isinstance(s, PreparedSegment)]
    if not pixels:
        return list(batch)
    with timer.stage("vision"), torch.inference_mode():
        pixel_values = normalize(torch.cat([s.pixel_rows for s in pixels]), model.geometry)
        vision = iter(model.compressor.encode_vision(pixel_values, [s.grid for s in pixels]))
    return [EncodedSegment(s.index, s.thumbnail, next(vision)) if isinstance(s, PreparedSegment) else s
            for s in batch]


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

    question: str
    video: VideoProbed | None = None
    plan: SamplingPlan | None = None
    memories: list[torch.Tensor] = field(default_factory=list)  # [k_max, d_s] per segment
    relevance: list[float] = field(default_factory=list)


def probe(reader: FrameReader, sampling: SamplingConfig) -> tuple[VideoProbed, SamplingPlan]:
    """The sampling plan for this video, and what the UI says about it."""
    info = reader.info
    plan = plan_sampling(reader, sampling)
    probed = VideoProbed(info.path, info.duration, info.native_fps, info.total_frames, info.width, info.height,
                         len(plan.frame_indices), plan.real_fps, len(plan.segments), info.backend)
    return probed, plan


@dataclass
class Source:
    """Where a run's segments come from: the video's cache entry, or a reader that has only probed the file."""

    key: VideoKey | None  # None: the file cannot be cached (not a regular file)
    probed: VideoProbed
    plan: SamplingPlan
    cached: VideoEntry | None
    reader: FrameReader | None  # handed to the decoding workers when they start, else closed by `close`

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()
            self.reader = None


def open_source(video: str | os.PathLike, config: RunConfig, cache: VideoCache, timer: StageTimer) -> Source:
    """The file checked against the limits, then found in the cache or opened and probed; nothing is decoded."""
    limits, sampling = config.limits, config.sampling
    with timer.stage("open"):
        if os.path.isfile(video) and os.path.getsize(video) > limits.max_upload_bytes:
            raise InputError(f"The file is {os.path.getsize(video) / 2**20:,.1f} MB; this server accepts up "
                             f"to {limits.max_upload_bytes / 2**20:,.1f} MB.")
        key = cache.key(video, sampling) if os.path.isfile(video) else None
        cached = cache.get(key) if key else None
        if cached is not None:
            return Source(key, cached.probed, cached.plan, cached, None)
        reader = open_video(video, keyframes_only=sampling.fast_seek, long_edge=sampling.long_edge)
        try:
            probed, plan = probe(reader, sampling)
        except BaseException:
            reader.close()
            raise
        return Source(key, probed, plan, None, reader)


def check_duration(probed: VideoProbed, limits: Limits) -> None:
    """Refuse a video longer than the limit, before any frame is decoded."""
    if probed.duration > limits.max_duration_s:
        raise InputError(f"The video lasts {_length(probed.duration)}; this server accepts up to "
                         f"{_length(limits.max_duration_s)}.")


def allocate_tokens(model: TempoModel, relevance: list[float], config: RunConfig) -> list[int]:
    """Memory tokens kept per segment under `config`'s allocation settings (and budget, or the checkpoint's)."""
    allocation = config.allocation
    return allocate(relevance, effective_budget(model, config), allocation.k_min, model.spec.num_memory_tokens,
                    allocation.strategy, allocation.seed)


def respond(model: TempoModel, compressed: CompressedVideo, config: RunConfig,
            timer: StageTimer) -> Iterator[Event]:
    """Allocate the budget over the compressed segments and stream the answer: `AllocationDone`,
    `AnswerToken`s, then `Finished`."""
    allocation, k_max, budget = config.allocation, model.spec.num_memory_tokens, effective_budget(model, config)
    with timer.stage("allocate"), torch.inference_mode():
        tokens = allocate_tokens(model, compressed.relevance, config)
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


def checked(model: TempoModel, question: str, config: RunConfig | None) -> tuple[RunConfig, str]:
    """The run's config (default: the library's) and question, both refused early with a message if unusable."""
    config = config or RunConfig()
    config.validate(model.spec)
    return config, check_question(question, config.limits.max_question_chars)
