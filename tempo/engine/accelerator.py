"""The accelerator's half of a request: the vision tower and the compressor over micro-batches of segments, then
the allocation and the answer. It gets a `Job` and yields events; all it sends back is CPU data."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Generator, Iterable, Iterator

import torch

from ..config import RunConfig
from ..errors import OutOfMemory
from ..events import AllocationDone, AnswerToken, Compressed, Compression, Event, Finished, Segment, SegmentCompressed
from ..model import TempoModel
from ..model.prompts import segment_prompt_ids
from ..settings import setting_named
from ..timing import Timer
from ..video import SamplingPlan
from ..video.patches import normalize
from ..video.segments import PreparedSegment
from .budget import allocate_tokens, effective_budget
from .job import Dialogue, Job

log = logging.getLogger(__name__)


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


def micro_batch(model: TempoModel, chosen: int | None) -> int:
    """Segments per compressor pass: the run's `chosen`, else the settings table's default where the model runs."""
    if chosen is not None:
        return chosen
    default = setting_named("micro_batch").default(place=model.device.type)
    assert isinstance(default, int)  # the table's defaults for a whole-number setting, in its range
    return default


def encode_batch(model: TempoModel, batch: list[PreparedSegment], timer: Timer) -> list[PreparedSegment]:
    """The vision tower over a micro-batch's pixels (the question-independent half of compression): each segment
    that comes as pixels comes back with their features instead; those already encoded pass as they are."""
    rows = [s.pixel_rows for s in batch if s.pixel_rows is not None]
    if not rows:  # every one came with its vision features
        return batch
    with timer.time("vision"), torch.inference_mode():
        # uint8 rows travel to the accelerator (a quarter of the float bytes) and are normalised there
        pixel_values = normalize(torch.cat(rows).to(model.device, non_blocking=True), model.geometry)
        vision = iter(model.compressor.encode_vision(pixel_values,
                                                     [s.grid for s in batch if s.pixel_rows is not None]))
    return [s if s.pixel_rows is None else s.encoded(next(vision)) for s in batch]


def compress_batch(model: TempoModel, batch: list[PreparedSegment], question: str, plan: SamplingPlan,
                   timer: Timer) -> tuple[torch.Tensor, list[float]]:
    """The question-dependent half: memories [B, k_max, d_s] and relevance for a micro-batch of encoded segments."""
    vision = [s.vision for s in batch if s.vision is not None]
    assert len(vision) == len(batch)  # encode_batch gave every segment its features
    with timer.time("compress"), torch.inference_mode():
        prompts = [segment_prompt_ids(model.compressor_tokenizer, question, plan, s.index, s.grid, model.geometry)
                   for s in batch]
        output = model.compressor(prompts, vision)
    return output.memories, output.relevance.tolist()


def frame_time(plan: SamplingPlan, segment: PreparedSegment) -> float:
    """When the frame a segment's thumbnail shows was taken."""
    times = plan.segment_frame_times(segment.index)
    return times[min(segment.shown, len(times) - 1)]


def respond(model: TempoModel, compression: Compression, config: RunConfig, timer: Timer,
            dialogue: Dialogue | None = None) -> Iterator[Event]:
    """Allocate the budget over a compression and stream the answer to `dialogue` (default: the compression's
    question, on its own): `AllocationDone`, `AnswerToken`s, then `Finished`."""
    dialogue = dialogue or Dialogue(compression.query)
    allocation, k_max, budget = config.allocation, model.spec.num_memory_tokens, effective_budget(model, config)
    with timer.time("allocate"), torch.inference_mode():
        tokens = allocate_tokens(model, compression.relevance, config)
        embeds, cut = model.decoder_inputs(compression.memories, tokens, allocation.truncation, dialogue.question,
                                           compression.plan.tag_times(),
                                           config.context_length or model.spec.context_length,
                                           history=dialogue.history)
    yield AllocationDone(tokens, budget, sum(tokens), allocation.k_min, k_max, allocation.strategy,
                         allocation.truncation, cut)

    piece = model.tokenizer.piece_decoder()
    token_ids = []
    spells_word = model.tokenizer.has_letters if model.spec.repetition_guard else None
    generated = model.decoder.generate(embeds, config.generation, set(model.spec.stop_ids), model.spec.top_k,
                                       spells_word)
    while True:
        with timer.time("generate"):
            token = next(generated, None)
        if token is None:
            break
        token_ids.append(token)
        yield AnswerToken(token, piece(token))

    segments = [Segment(i, *compression.plan.span(i), relevance, k)
                for i, (relevance, k) in enumerate(zip(compression.relevance, tokens))]
    yield Finished(model.tokenizer.decode(token_ids).strip(), token_ids, segments, budget, sum(tokens),
                   k_max, timer.timings(), compression.video, config,
                   tuple(sorted(timer.alongside & timer.totals.keys())), len(dialogue.history), dialogue.dropped,
                   question=dialogue.question)


def compress_segments(model: TempoModel, job: Job) -> Generator[Event, None, Compression]:
    """Every segment of `job` through the vision tower (where it comes as pixels) and the compressor: a
    `SegmentCompressed` each, then `Compressed` with a copy on the CPU; returns the compression as computed (on
    the accelerator). The segments' source is closed if it is left early (a decoding stream stops its workers)."""
    memories: list[torch.Tensor] = []
    relevance: list[float] = []
    kept: list[PreparedSegment] | None = [] if job.keep_vision_bytes else None
    started = time.perf_counter()
    try:
        for batch in micro_batches(job.segments, micro_batch(model, job.micro_batch)):
            batch = encode_batch(model, batch, job.timer)
            batch_memories, batch_relevance = compress_batch(model, batch, job.query, job.plan, job.timer)
            for segment, memory, segment_relevance in zip(batch, batch_memories, batch_relevance):
                memories.append(memory)
                relevance.append(segment_relevance)
                record = Segment(segment.index, *job.plan.span(segment.index), segment_relevance,
                                 frame=segment.thumbnail, frame_time=frame_time(job.plan, segment))
                yield SegmentCompressed(record, job.video.num_segments)
            if kept is not None:  # kept only while it could still fit
                kept += batch
                if sum(s.nbytes for s in kept) > job.keep_vision_bytes:
                    kept = None
    finally:
        if hasattr(job.segments, "close"):
            job.segments.close()
    log.info("compressed %d segments for a question in %.1f s", len(memories), time.perf_counter() - started)
    compression = Compression(job.query, job.video, job.plan, memories, relevance)
    yield Compressed(Compression(job.query, job.video, job.plan, [m.cpu() for m in memories], relevance), kept)
    return compression


def execute(model: TempoModel, job: Job) -> Iterator[Event]:
    """The accelerator's half: one `SegmentCompressed` per segment and then `Compressed` (unless the job brings its
    compression), then `AllocationDone`, `AnswerToken`s and `Finished` for each answer. Running out of memory
    raises `OutOfMemory`, wherever the job runs."""
    with out_of_memory_as_error():
        compression = job.compression
        if compression is None:
            compression = yield from compress_segments(model, job)
        for config in job.answer_configs:
            yield from respond(model, compression, config, job.timer, job.dialogue)


@contextlib.contextmanager
def out_of_memory_as_error() -> Iterator[None]:
    """Running out of (GPU or host) memory becomes `OutOfMemory`, the one error that says so, and what can be freed
    is freed."""
    try:
        yield
    except (torch.OutOfMemoryError, MemoryError):
        if torch.cuda.is_available():
            torch.cuda.empty_cache()  # let the next request start from a clean slate
        raise OutOfMemory() from None
