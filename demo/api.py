"""The API's endpoints, for `gradio_client`: the page's work as JSON (and files). Each takes the video and the
question, then the page's settings by name (`settings.controls`), and runs through the same `Server` methods as
the page's handlers."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

from tempo.analysis import most_relevant, usable
from tempo.engine import Request
from tempo.errors import InputError
from tempo.events import AllocationDone, Finished, Segment, SegmentCompressed
from tempo.model.prompts import Exchange
from tempo.render.gallery import write_gallery
from tempo.render.progress import RunProgress, Status
from tempo.render.report import Asked, Truth
from tempo.times import clock, span

from .chat import MAX_TURNS
from .html import LOOKED_AT
from .refusals import refused
from .server import Server
from .settings import split_others

REFRESH_S = 0.5  # a streamed partial JSON at most this often, besides the first segment and the milestones
MAX_HISTORY_BYTES = 8 * 2**20  # earlier turns a /chat call may send back (23 turns of 1,024 segments is ~3 MB)


@refused
def answer(server: Server, video: object, question: str, **settings: object) -> Iterator[dict]:
    """JSON for API clients, streamed: partial while compressing (see `status`), the finished run at the end, with
    `looked_at` (the segments the compressor found most relevant), `model` and, for the shipped examples, `truth`."""
    yield from streamed(server, server.request(video, question, settings))


def streamed(server: Server, request: Request) -> Iterator[dict]:
    """`request`'s run as /answer's JSON: partial results while it runs, at most every REFRESH_S besides the first
    segment and the milestones, then the finished run."""
    progress, shown = RunProgress(request.question), 0.0
    for event in server.run(request):
        progress.update(event)
        first = isinstance(event, SegmentCompressed) and len(progress.segments) == 1
        milestone = isinstance(event, (AllocationDone, Finished))
        if first or milestone or time.perf_counter() - shown > REFRESH_S:
            shown = time.perf_counter()
            yield progress.to_dict() | (finished_fields(server, request, event) if isinstance(event, Finished) else {})


def finished_fields(server: Server, request: Request, finished: Finished) -> dict:
    """What a finished run adds to its JSON: where the compressor looked, the model's name, whether its weights
    are int8, and (for a shipped example) the truth."""
    truth = server.truth(request, finished)
    return ({"looked_at": looked_at(finished.segments), "model": server.model.spec.name, "int8": server.model.int8}
            | ({"truth": truth_dict(truth)} if truth else {}))


def looked_at(segments: Sequence[Segment]) -> list[dict]:
    """Where the compressor looked: its most relevant segments, most relevant first, with their times."""
    return [{"index": s.index, "start": s.start, "end": s.end, "at": span(s.start, s.end), "relevance": s.relevance}
            for s in most_relevant(segments, LOOKED_AT)]


@refused
def chat(server: Server, video: object, question: str, *, history: object = None,
         **settings: object) -> Iterator[dict]:
    """A conversation with one video: `history` (the "turns" a previous call returned; none to start) in, those
    turns plus this question's out, as {"turns": [...]}; while it runs, {"turns": history, "current": partial
    /answer JSON}. Each turn is /answer's JSON with its "question" and "looked_at" (the segments the compressor
    found most relevant). The model reads the earlier turns with the question (those its allowance holds; none for a
    model that takes none: see each turn's history_used and history_dropped), reusing the cached work on the video."""
    turns = previous_turns(history)
    request = replace(server.request(video, question, settings),
                      history=tuple(Exchange(turn["question"], str(turn.get("answer") or "")) for turn in turns))
    for partial in streamed(server, request):
        if partial["status"] != Status.DONE:
            yield {"turns": turns, "current": partial}
            continue
        yield {"turns": turns + [{"question": question.strip(), **partial}]}


def previous_turns(history: object) -> list[dict]:
    """A /chat history, checked: a list of the turns an earlier call returned (only the latest are kept)."""
    if history in (None, "", []):
        return []
    if isinstance(history, dict) and "turns" in history:  # the whole earlier reply is fine too
        history = history["turns"]
    if not isinstance(history, list) or not all(isinstance(t, dict) and isinstance(t.get("question"), str)
                                                for t in history):
        raise InputError("The history must be the list of turns an earlier /chat call returned (each with its "
                         "\"question\"), or empty to start a conversation.")
    kept = history[-(MAX_TURNS - 1):]
    size = len(json.dumps(kept, ensure_ascii=False, default=str))
    if size > MAX_HISTORY_BYTES:
        raise InputError(f"The history is {size / 2**20:.1f} MB; this server takes up to "
                         f"{MAX_HISTORY_BYTES / 2**20:.0f} MB of earlier turns (start a new conversation).")
    return kept


def truth_dict(truth: Truth) -> dict:
    return {"expected": truth.expected, "evidence": [list(span) for span in truth.evidence], "correct": truth.correct}


@refused
def compare(server: Server, video: object, question: str, **values: object) -> dict:
    """Two allocations of one compression: {"first", "second"} (each as /answer's JSON), the tokens each segment
    gained or lost, and the segments that changed most."""
    settings, others = split_others(values)
    comparison = server.compare(server.request(video, question, settings), others)
    return {"first": comparison.first.to_dict(), "second": comparison.second.to_dict(),
            "token_changes": comparison.token_changes, "most_changed": comparison.most_changed}


@refused
def sweep(server: Server, video: object, question: str, **settings: object) -> dict:
    """The run's strategy at budgets from one token per segment to every memory token (the top one kept whole):
    one /answer-style JSON per budget, smallest first, each with "usable" (false where the answer says nothing
    or loops) and, for a shipped example, "correct"."""
    request = server.request(video, question, settings)
    results = []
    for finished in server.sweep(request):
        truth = server.truth(request, finished)
        results.append(finished.to_dict() | {"usable": usable(finished.answer)} |
                       ({"correct": truth.correct} if truth else {}))
    return {"budgets": [answer["budget"] for answer in results], "results": results}


@refused
def segment(server: Server, video: object, question: str, *, segment: object, **settings: object) -> dict:
    """One segment (0-based): its time, relevance, rank (1 = most relevant) and tokens kept under these
    settings, and its sampled frames."""
    look = server.segment(server.request(video, question, settings), segment)
    record = look.segment
    facts = {"index": record.index, "start": record.start, "end": record.end, "relevance": record.relevance,
             "relevance_scaled": look.scaled, "rank": look.rank, "tokens": record.tokens}
    return {"facts": facts, "frames": [(frame, clock(t)) for frame, t in zip(look.frames, look.times)]}


@refused
def report(server: Server, video: object, question: str, **settings: object) -> Iterator[str]:
    """The run as one self-contained HTML file (the page's "Report · HTML")."""
    request = server.request(video, question, settings)
    progress = RunProgress(request.question)
    for event in server.run(request):
        progress.update(event)
    workdir = tempfile.mkdtemp(prefix="tempo-app-")
    try:
        asked = Asked(progress, server.truth(request, progress.finished))
        yield str(server.write_report([asked], Path(workdir, "tempo-report.html")))
    finally:  # Gradio has copied the file into its cache by now
        shutil.rmtree(workdir, ignore_errors=True)


@refused
def clip(server: Server, video: object, *, start: object, end: object) -> Iterator[str]:
    """A span of the video as an mp4 (a moment from /answer's "moments": its start and end, in seconds or as
    m:ss): copied from the file where its key frames allow, else encoded again; its first and last frames are the
    span's. Up to the server's clip length (300 s unless $TEMPO_MAX_CLIP_S says otherwise)."""
    workdir = tempfile.mkdtemp(prefix="tempo-app-")
    try:
        yield str(server.clip(video, start, end, Path(workdir)).path)
    finally:  # Gradio has copied the file into its cache by now
        shutil.rmtree(workdir, ignore_errors=True)


@refused
def gallery(server: Server, video: object, question: str, **settings: object) -> Iterator[str]:
    """The run's moments as one PNG: each moment's key frame, ranked, with its time and score (the page's
    "Highlights · PNG")."""
    request = server.request(video, question, settings)
    progress = RunProgress(request.question)
    for event in server.run(request):
        progress.update(event)
    finished = progress.finished
    if finished is None or not finished.moments:
        raise InputError("This run found no moments to show (compression off, or a video with no relevance).")
    workdir = tempfile.mkdtemp(prefix="tempo-app-")
    try:
        segments = (list(progress.zoom.segments) if progress.zoom else []) + progress.segments  # a zoom's both passes
        yield str(write_gallery(finished.moments, segments, Path(workdir, "tempo-highlights.png"), request.question,
                                request.video))
    finally:  # Gradio has copied the file into its cache by now
        shutil.rmtree(workdir, ignore_errors=True)

