"""The host's half of a request: the question and the file checked, the video found in the per-video cache or
opened by a decoder, and the job sent to the accelerator, from one of three sources: a compression the cache holds
(replayed), segments the cache holds (pixels or vision features), or the file decoded now. `run` is a whole
request in one process; a server passes its own way to reach the accelerator (`demo.device`)."""

from __future__ import annotations

import contextlib
import functools
import os
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from ..allocation import check_budget
from ..config import Limits, RunConfig
from ..errors import InputError, TempoError, VideoError
from ..events import Compressed, Compression, Event, Finished, Segment, SegmentCompressed, SegmentRead, VideoProbed
from ..model import TempoModel
from ..model.prompts import Exchange, compressor_query, history_within
from ..settings import validate
from ..times import length
from ..timing import Timer
from ..video import SamplingPlan, probe
from ..video.patches import PatchGeometry
from ..video.sandbox import SandboxedDecoder
from ..video.segments import Decoder, LocalDecoder, PreparedSegment
from .accelerator import execute, frame_time, out_of_memory_as_error, respond
from .budget import allocate_tokens, effective_budget
from .cache import VideoCache, VideoEntry, VideoKey, default_cache
from .job import Dialogue, Job
from .request import Answers, Request, answer_configs
from .zoom import coarse_to_fine, looks_closer, reason_to_zoom

Accelerate = Callable[[Job], Iterable[Event]]


# ------------------------------------------------------------------------------------------------ checks

def check_question(question: str, max_chars: int) -> str:
    """Reject what cannot be a question; the text itself is passed on verbatim (it is never markup), except
    that characters no encoding can carry (lone surrogates from undecodable bytes) become U+FFFD."""
    if not isinstance(question, str) or not question.strip():
        raise InputError("Please type a question about the video.")
    if len(question) > max_chars:
        raise InputError(f"The question is {len(question):,} characters long; the limit is {max_chars:,}.")
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in question)


def checked(model: TempoModel, question: str, config: RunConfig | None) -> tuple[RunConfig, str]:
    """The run's config (default: the library's) and question, both refused early with a message if unusable."""
    config = config or RunConfig()
    validate(config, model.spec)
    return config, check_question(question, config.limits.max_question_chars)


def check_file(video: str | os.PathLike, limits: Limits) -> probe.Probe:
    """`video`'s container and bitstream headers, checked against the limits; nothing is decoded."""
    headers = probe.probe(video)
    probe.check(headers, limits)
    return headers


def check_size(size: int, limits: Limits) -> None:
    """Refuse a file of `size` bytes over the upload limit, wherever it came from (an upload, a URL, data)."""
    if size > limits.max_upload_bytes:
        raise InputError(f"The file is {size / 2**20:,.1f} MB; this server accepts up to "
                         f"{limits.max_upload_bytes / 2**20:,.1f} MB.")


def check_duration(probed: VideoProbed, limits: Limits) -> None:
    """Refuse a video longer than the limit, before any frame is decoded."""
    if probed.duration > limits.max_duration_s:
        raise InputError(f"The video lasts {length(probed.duration)}; this server accepts up to "
                         f"{length(limits.max_duration_s)}.")


# ------------------------------------------------------------------------------------------------ the source

def open_decoder(video: str | os.PathLike, config: RunConfig, geometry: PatchGeometry, timer: Timer) -> Decoder:
    """`video`'s headers read and checked against the limits (nothing decoded yet), then the file opened by a
    decoder: in a child process where `limits.isolate_decoding` says so (servers), else in this one."""
    limits = config.limits
    if not os.path.exists(video):
        raise VideoError(f"Video file not found: {os.fspath(video)}")
    if os.path.isfile(video) and os.path.getsize(video) > 0:  # the decoders name the other cases precisely
        with timer.time("open"):
            check_file(video, limits)
    decoder = SandboxedDecoder if limits.isolate_decoding else LocalDecoder
    return decoder(video, config.sampling, geometry, limits, timer)


@dataclass(frozen=True)
class Source:
    """Where a request's segments come from: the video's cache entry, or a decoder that has opened the file."""

    key: VideoKey | None  # None: the file cannot be cached (not a regular file)
    probed: VideoProbed
    plan: SamplingPlan
    cached: VideoEntry | None
    decoder: Decoder | None


@contextlib.contextmanager
def opened(video: str | os.PathLike, config: RunConfig, cache: VideoCache, geometry: PatchGeometry,
           timer: Timer) -> Iterator[Source]:
    """The file checked against the limits, then found in the cache or opened by a decoder (nothing decoded yet),
    which is closed on the way out, whether or not its segments were taken."""
    limits = config.limits
    if os.path.isfile(video):
        check_size(os.path.getsize(video), limits)
    key = cache.key(video, config.sampling) if os.path.isfile(video) else None
    cached = cache.get(key) if key else None
    if cached is not None:
        yield Source(key, cached.probed, cached.plan, cached, None)
        return
    decoder = open_decoder(video, config, geometry, timer)
    try:
        yield Source(key, decoder.probed, decoder.plan, None, decoder)
    finally:
        decoder.close()


# ------------------------------------------------------------------------------------------------ the host's half

def serve(model: TempoModel, request: Request, cache: VideoCache, accelerate: Accelerate | None = None,
          remote: bool = False) -> Generator[Event, None, None]:
    """The host's half of `request`: `VideoProbed`, then the job's events as `accelerate` (default: `execute` here)
    yields them, one answer per config of `request.answers`. One `Compressed` always comes before the answers, and
    what it holds is kept in `cache`. `remote`: the accelerator is another process; the video is then read here
    first (a `SegmentRead` each), its pixels kept in the cache and sent with the job. A request for one answer whose
    `config.zoom` says so looks closer first (`zoom`): two passes."""
    one_pass = functools.partial(serve_once, model, cache=cache, accelerate=accelerate, remote=remote)
    reason = reason_to_zoom(request.question, request.config.zoom) if request.answers is Answers.ONE else None
    if reason is None:
        yield from one_pass(request)
        return
    yield from coarse_to_fine(one_pass, request, lambda relevance: allocate_tokens(model, relevance, request.config),
                              reason)


def serve_once(model: TempoModel, request: Request, cache: VideoCache, accelerate: Accelerate | None = None,
               remote: bool = False) -> Iterator[Event]:
    """One pass of `serve` over what `request.config` samples, never looking closer: the job made from what the
    cache holds or the file, sent to the accelerator, and what comes back kept."""
    config = request.config
    accelerate = accelerate or functools.partial(execute, model)
    timer = Timer()
    query, dialogue = conversation_turn(model, request.question, request.history)
    with out_of_memory_as_error(), opened(request.video, config, cache, model.geometry, timer) as source:
        check_duration(source.probed, config.limits)
        yield source.probed
        answer_under = answer_configs(request, source.probed, model.spec.num_memory_tokens,
                                      looks_closer(request.question, config, source.probed))
        for answer_config in answer_under or (config,):
            check_budget(source.probed.num_segments, effective_budget(model, answer_config),
                         answer_config.allocation.strategy, config.sampling.segment_frames)
        job = Job(query, source.probed, source.plan, config.micro_batch, answer_under, timer, dialogue=dialogue)
        job = yield from with_segments(source, job, cache, remote)
        if job.compression is not None and not job.answer_configs:
            return  # asked before, and only for the compression: nothing for the accelerator to do
        for event in accelerate(job):
            remember(source, event, cache)
            yield event


def conversation_turn(model: TempoModel, question: str, history: Sequence[Exchange]) -> tuple[str, Dialogue]:
    """What the compressor reads for `question` after `history` (`compressor_query`), and what the decoder answers:
    the question with the earlier turns that fit its allowance, or none where the checkpoint takes no history."""
    query = compressor_query(question, history)
    if not model.spec.takes_history:
        return query, Dialogue(question, (), len(history))
    kept, dropped = history_within(model.tokenizer, history, model.spec.history_tokens)
    return query, Dialogue(question, kept, dropped)


def with_segments(source: Source, job: Job, cache: VideoCache, remote: bool) -> Generator[Event, None, Job]:
    """`job` with what the accelerator works from, from one of three sources: the compression the cache holds for
    its query (replayed here: `Compressed`, then each segment as it was), the segments the cache holds (pixels or
    vision features), or the file: read here first for an accelerator in another process (a `SegmentRead` each,
    the pixels cached), else streamed from the decoder as it reads, the vision features coming back to be cached."""
    if source.cached is not None:
        known = cache.compression(source.key, job.query) if source.key is not None else None
        if known is None:
            return replace(job, segments=source.cached.segments)
        yield Compressed(known, from_cache=True)  # a caller after the compression alone stops here
        for segment, relevance in zip(source.cached.segments, known.relevance):
            record = Segment(segment.index, *source.plan.span(segment.index), relevance, frame=segment.thumbnail,
                             frame_time=frame_time(source.plan, segment))
            yield SegmentCompressed(record, source.probed.num_segments)
        return replace(job, compression=known)
    assert source.decoder is not None  # a video the cache lacks has been opened
    if not remote:
        keep = cache.max_bytes if source.key is not None else 0
        return replace(job, segments=source.decoder.segments(), keep_vision_bytes=keep)
    segments = yield from read_all(source.decoder.segments(), source.probed.num_segments)
    if source.key is not None:
        cache.put(source.key, VideoEntry(source.probed, source.plan, segments))
    return replace(job, segments=segments)


def remember(source: Source, event: Event, cache: VideoCache) -> None:
    """A compression that comes back joins its video's cache entry; one that brings the vision features of a video
    decoded here makes that entry (a video without a key is not cached)."""
    if not isinstance(event, Compressed) or source.key is None:
        return
    if event.vision is not None:  # vision comes back only when kept, for a video the cache lacked
        compressions = OrderedDict({event.compression.query: event.compression})
        cache.put(source.key, VideoEntry(source.probed, source.plan, event.vision, compressions))
    else:
        cache.remember(source.key, event.compression)  # kept where the video's entry is


def read_all(segments: Iterable[PreparedSegment], total: int) -> Generator[SegmentRead, None, list[PreparedSegment]]:
    """Decode and preprocess every segment before the accelerator is asked for (a `SegmentRead` each); returns
    them as a list."""
    read: list[PreparedSegment] = []
    for segment in segments:
        read.append(segment)
        yield SegmentRead(segment.index, total)
    return read


# ------------------------------------------------------------------------------------------------ a whole request

def run(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None,
        cache: VideoCache | None = None, history: Sequence[Exchange] = ()) -> Iterator[Event]:
    """Answer `question` about `video`, yielding progress events; the last one is `Finished`.

    `cache` keeps the question-independent work for follow-up questions (default: one cache per model);
    `history` holds the conversation's earlier turns, oldest first."""
    config, question = checked(model, question, config)
    cache = default_cache(model) if cache is None else cache
    yield from serve(model, Request(video, question, config, history=tuple(history)), cache)


def compress(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None,
             cache: VideoCache | None = None) -> Compression:
    """`question` about `video` through the compressor (or from the cache), without answering."""
    config, question = checked(model, question, config)
    cache = default_cache(model) if cache is None else cache
    for event in serve(model, Request(video, question, config, Answers.NONE), cache):
        if isinstance(event, Compressed):
            return event.compression
    raise TempoError("The compressor ended without a compression.")


def reanswer(model: TempoModel, compression: Compression, config: RunConfig, question: str | None = None,
             history: Sequence[Exchange] = ()) -> Finished:
    """Allocate and answer `compression` again under `config` (its sampling must be the compression's): the
    question it was compressed for, or another one, after `history` where the checkpoint reads earlier turns."""
    validate(config, model.spec)
    _, dialogue = conversation_turn(model, compression.query if question is None else question, history)
    with out_of_memory_as_error():
        *_, finished = respond(model, compression, config, Timer(), dialogue)
    assert isinstance(finished, Finished)  # respond's last event
    return finished


def answer(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None,
           cache: VideoCache | None = None, history: Sequence[Exchange] = ()) -> Finished:
    """Run to completion and return the `Finished` event."""
    for event in run(model, video, question, config, cache, history):
        if isinstance(event, Finished):
            return event
    raise TempoError("The pipeline ended without an answer.")
