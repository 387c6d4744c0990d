"""Video + question -> events: probe, compress segment by segment, allocate the budget, stream the answer.

`run` is a whole request in one process. It is made of two halves that a server can run apart: `serve`, the
host's half (the file and its checks, the per-video cache, the pixels), and `execute`, the accelerator's half (the
vision tower, the compressor, the decoder). They meet in a `Job`, which pickles, and the accelerator hands back
only CPU data, so the host keeps every compression however the accelerator is reached (`demo.device`).
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from .allocation import check_budget
from .cache import Compression, EncodedSegment, VideoCache, VideoEntry, default_cache
from .config import RunConfig
from .errors import TempoError
from .events import Event, Finished, SegmentCompressed, SegmentRead, VideoProbed
from .model import TempoModel
from .stages import (CompressedVideo, Source, check_duration, checked, compress_batch, effective_budget, encode_batch,
                     micro_batches, open_source, out_of_memory_as_error, respond)
from .timing import StageTimer
from .video import SamplingPlan
from .video.segments import PreparedSegment

log = logging.getLogger(__name__)


@dataclass
class Job:
    """One trip to the accelerator: compress `segments` for `question` (unless `known` is the compression already),
    then answer once per config in `answers`. Once `segments` is a list, everything in it pickles."""

    question: str
    video: VideoProbed
    plan: SamplingPlan
    config: RunConfig  # the run's (sampling, micro-batch)
    answers: tuple[RunConfig, ...]  # one answer each: an ask has one, a comparison two, a budget sweep six
    timer: StageTimer
    segments: Iterable[PreparedSegment | EncodedSegment] = ()
    known: Compression | None = None
    keep_vision_bytes: int = 0  # send the vision features back with the compression while they fit in this

    @property
    def to_compress(self) -> int:
        """Segments the accelerator compresses (none when the compression is known)."""
        return 0 if self.known is not None else self.video.num_segments


@dataclass
class Compressed:
    """The compression of one (video, question), on the CPU, for the host to keep; with the vision features when
    the job asked for them; `from_cache` when it was replayed from the cache rather than computed."""

    video: CompressedVideo
    encoded: list[EncodedSegment] | None = None
    from_cache: bool = False


def execute(model: TempoModel, job: Job) -> Iterator[Event | Compressed]:
    """The accelerator's half: one `SegmentCompressed` per segment and then `Compressed` (unless the compression
    is known), then `AllocationDone`, `AnswerToken`s and `Finished` for each answer."""
    compressed = CompressedVideo(job.question, job.video, job.plan)
    if job.known is not None:
        compressed.memories, compressed.relevance = list(job.known.memories), list(job.known.relevance)
    else:
        yield from compress_segments(model, job, compressed)
    for config in job.answers:
        yield from respond(model, compressed, config, job.timer)


def compress_segments(model: TempoModel, job: Job, into: CompressedVideo) -> Iterator[Event | Compressed]:
    """Every segment of `job` through the vision tower (where it comes as pixels) and the compressor, appended to
    `into`; the segments' source is closed if it is left early (a decoding stream stops its workers)."""
    kept: list[EncodedSegment] | None = [] if job.keep_vision_bytes else None
    started = time.perf_counter()
    try:
        for batch in micro_batches(job.segments, job.config.micro_batch):
            batch = encode_batch(model, batch, job.timer)
            memories, relevance = compress_batch(model, batch, job.question, job.plan, job.timer)
            for segment, memory, score in zip(batch, memories, relevance):
                into.memories.append(memory)
                into.relevance.append(score)
                yield SegmentCompressed(segment.index, job.video.num_segments, *job.plan.span(segment.index), score,
                                        segment.thumbnail)
            if kept is not None:  # kept only while it could still fit
                kept += batch
                if sum(s.nbytes for s in kept) > job.keep_vision_bytes:
                    kept = None
    finally:
        if hasattr(job.segments, "close"):
            job.segments.close()
    log.info("compressed %d segments for a question in %.1f s", len(into.memories), time.perf_counter() - started)
    on_cpu = CompressedVideo(job.question, job.video, job.plan, [m.cpu() for m in into.memories], list(into.relevance))
    yield Compressed(on_cpu, kept)


Answers = Sequence[RunConfig] | Callable[[VideoProbed], Sequence[RunConfig]]
Accelerate = Callable[[Job], Iterable[Event | Compressed]]


def serve(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig, answers: Answers,
          cache: VideoCache, accelerate: Accelerate | None = None, remote: bool = False) -> Iterator[Event | Compressed]:
    """The host's half of a request (`config` and `question` already checked): `video` opened or found in `cache`
    and checked, `VideoProbed`, then the job, run by `accelerate` (default: `execute` in this process). `answers`
    are the allocations to answer under (or a function of the probe giving them). One `Compressed` always comes
    before the answers (before the replayed segments, when it comes from the cache), and what it holds is kept in
    `cache`.

    `remote`: the accelerator is another process. The video is then read here first (a `SegmentRead` each), its
    pixels are kept in the cache and sent with the job, and no vision features come back."""
    accelerate = accelerate or (lambda job: execute(model, job))
    timer = StageTimer()
    source = open_source(video, config, cache, model.geometry, timer)
    try:
        check_duration(source.probed, config.limits)
        yield source.probed
        chosen = tuple(answers(source.probed) if callable(answers) else answers)
        for answer in chosen or (config,):
            check_budget(source.probed.num_segments, effective_budget(model, answer), answer.allocation.strategy,
                         config.sampling.segment_frames)
        job = Job(question, source.probed, source.plan, config, chosen, timer)
        known = cache.compression(source.key, question) if source.cached is not None else None
        if known is not None:  # asked before: the compression replays from the cache, and says so first
            job.known = known
            yield Compressed(CompressedVideo(question, source.probed, source.plan, list(known.memories),
                                             list(known.relevance)), from_cache=True)
            if not chosen:
                return
            for segment, score in zip(source.cached.segments, known.relevance):
                yield SegmentCompressed(segment.index, source.probed.num_segments, *source.plan.span(segment.index),
                                        score, segment.thumbnail)
        elif source.cached is not None:
            job.segments = source.cached.segments
        else:
            job.segments, source.decoder = source.decoder.segments(), None  # the segments close the decoder now
            if remote:
                job.segments = yield from read_all(job.segments, source.probed.num_segments)
                if source.key is not None:
                    cache.put(source.key, VideoEntry(source.probed, source.plan, job.segments))
                    source.cached = cache.get(source.key)
        if not remote and source.cached is None and source.key is not None:
            job.keep_vision_bytes = cache.max_bytes  # for the cache, when the compression comes back
        for item in accelerate(job):
            if isinstance(item, Compressed):
                keep(cache, source, question, item)
            yield item
    finally:
        source.close()


def read_all(segments: Iterable[PreparedSegment], total: int) -> Iterator[SegmentRead]:
    """Decode and preprocess every segment before the accelerator is asked for (a `SegmentRead` each); returns
    them as a list."""
    read = []
    for segment in segments:
        read.append(segment)
        yield SegmentRead(segment.index, total)
    return read


def keep(cache: VideoCache, source: Source, question: str, compressed: Compressed) -> None:
    """A fresh compression into the cache: with its video's vision features when they came back, else beside
    what the cache holds of the video already."""
    if source.key is None:
        return
    compression = Compression(compressed.video.memories, compressed.video.relevance)
    if compressed.encoded is not None and source.cached is None:
        cache.put(source.key, VideoEntry(source.probed, source.plan, compressed.encoded,
                                         OrderedDict({question: compression})))
    else:
        cache.remember(source.key, question, compression)


def run(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None,
        cache: VideoCache | None = None) -> Iterator[Event]:
    """Answer `question` about `video`, yielding progress events; the last one is `Finished`.

    `cache` keeps the question-independent work for follow-up questions (default: one cache per model)."""
    config, question = checked(model, question, config)
    cache = default_cache(model) if cache is None else cache
    with out_of_memory_as_error():
        for item in serve(model, video, question, config, (config,), cache):
            if not isinstance(item, Compressed):
                yield item


def answer(model: TempoModel, video: str | os.PathLike, question: str, config: RunConfig | None = None,
           cache: VideoCache | None = None) -> Finished:
    """Run to completion and return the `Finished` event."""
    for event in run(model, video, question, config, cache):
        if isinstance(event, Finished):
            return event
    raise TempoError("The pipeline ended without an answer.")
