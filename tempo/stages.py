"""The pipeline's stages, each a function of its own: find the video in the cache or open a decoder on it (its
headers checked against the limits first, `video.segments`); the vision tower and the compressor over
micro-batches; the allocation and the answer (`respond`). `pipeline` strings them together."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import torch

from .allocation import allocate
from .cache import EncodedSegment, VideoCache, VideoEntry, VideoKey
from .config import Limits, RunConfig
from .errors import InputError, ResourceError, VideoError
from .events import AllocationDone, AnswerToken, Event, Finished, SegmentSummary, VideoProbed
from .model import TempoModel
from .model.prompts import segment_prompt_ids
from .timing import StageTimer
from .video import SamplingPlan
from .video import probe as headers
from .video.patches import PatchGeometry, normalize
from .video.probe import length
from .video.sandbox import SandboxedDecoder
from .video.segments import Decoder, LocalDecoder, PreparedSegment


def check_question(question: str, max_chars: int) -> str:
    """Reject what cannot be a question; the text itself is passed on verbatim (it is never markup), except
    that characters no encoding can carry (lone surrogates from undecodable bytes) become U+FFFD."""
    if not isinstance(question, str) or not question.strip():
        raise InputError("Please type a question about the video.")
    if len(question) > max_chars:
        raise InputError(f"The question is {len(question):,} characters long; the limit is {max_chars:,}.")
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in question)


def effective_budget(model: TempoModel, config: RunConfig) -> int:
    """The visual token budget of a run: the configured one, else the checkpoint's."""
    budget = config.allocation.budget
    return model.spec.visual_token_budget if budget is None else budget


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
        # uint8 rows travel to the accelerator (a quarter of the float bytes) and are normalised there
        rows = torch.cat([s.pixel_rows for s in pixels]).to(model.device, non_blocking=True)  # [P, C*T*p*p] uint8
        pixel_values = normalize(rows, model.geometry)
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


@dataclass
class Source:
    """Where a run's segments come from: the video's cache entry, or a decoder that has opened the file."""

    key: VideoKey | None  # None: the file cannot be cached (not a regular file)
    probed: VideoProbed
    plan: SamplingPlan
    cached: VideoEntry | None
    decoder: Decoder | None  # its segments are taken once; closed by `close` if they never are

    def close(self) -> None:
        if self.decoder is not None:
            self.decoder.close()
            self.decoder = None


def open_source(video: str | os.PathLike, config: RunConfig, cache: VideoCache, geometry: PatchGeometry,
                timer: StageTimer) -> Source:
    """The file checked against the limits, then found in the cache or opened by a decoder; nothing is decoded."""
    limits, sampling = config.limits, config.sampling
    if os.path.isfile(video) and os.path.getsize(video) > limits.max_upload_bytes:
        raise InputError(f"The file is {os.path.getsize(video) / 2**20:,.1f} MB; this server accepts up "
                         f"to {limits.max_upload_bytes / 2**20:,.1f} MB.")
    key = cache.key(video, sampling) if os.path.isfile(video) else None
    cached = cache.get(key) if key else None
    if cached is not None:
        return Source(key, cached.probed, cached.plan, cached, None)
    decoder = open_decoder(video, config, geometry, timer)
    return Source(key, decoder.probed, decoder.plan, None, decoder)


def open_decoder(video: str | os.PathLike, config: RunConfig, geometry: PatchGeometry, timer: StageTimer) -> Decoder:
    """`video`'s headers read and checked against the limits (nothing decoded yet), then the file opened by a
    decoder: in a child process where `limits.isolate_decoding` says so (servers), else in this one."""
    limits = config.limits
    if not os.path.exists(video):
        raise VideoError(f"Video file not found: {os.fspath(video)}")
    if os.path.isfile(video) and os.path.getsize(video) > 0:  # the decoders name the other cases precisely
        with timer.stage("open"):
            headers.check(headers.probe(video), limits)
    decoder = SandboxedDecoder if limits.isolate_decoding else LocalDecoder
    return decoder(video, config.sampling, geometry, limits, timer)


def check_duration(probed: VideoProbed, limits: Limits) -> None:
    """Refuse a video longer than the limit, before any frame is decoded."""
    if probed.duration > limits.max_duration_s:
        raise InputError(f"The video lasts {length(probed.duration)}; this server accepts up to "
                         f"{length(limits.max_duration_s)}.")


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
    wordy = model.tokenizer.has_letters if model.spec.repetition_guard else None
    generated = model.decoder.generate(embeds, config.generation, set(model.spec.stop_ids), model.spec.top_k,
                                       wordy)
    while True:
        with timer.stage("generate"):
            token = next(generated, None)
        if token is None:
            break
        token_ids.append(token)
        yield AnswerToken(token, piece(token))

    segments = [SegmentSummary(i, *compressed.plan.span(i), score, k)
                for i, (score, k) in enumerate(zip(compressed.relevance, tokens))]
    yield Finished(model.tokenizer.decode(token_ids).strip(), token_ids, segments, budget, sum(tokens),
                   k_max, timer.timings(), compressed.video, config.summary(budget),
                   tuple(sorted(timer.alongside & timer.totals.keys())))


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
