"""The API's endpoints, for `gradio_client`: the page's work as JSON (and files). Each takes the video and the
question, then the page's settings by name (`settings.controls`), and runs through the same `Server` methods as
the page's handlers."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Iterator

from tempo.events import AllocationDone, Finished, SegmentCompressed
from tempo.render.progress import RunProgress
from tempo.render.report import Truth
from tempo.render.text import clock

from .refusals import refusal, refused
from .server import Server
from .settings import split_others

REFRESH_S = 0.5  # a streamed partial result at most this often, besides the first segment and the milestones


def answer(server: Server, video: object, question: str, **settings: object) -> Iterator[dict]:
    """JSON for API clients, streamed: partial while compressing (see `stage`), the full result at the end
    (with `truth`, the expected answer, for the shipped examples)."""
    progress, shown = RunProgress(), 0.0
    try:
        request = server.request(video, question, settings)
        for event in server.run(request):
            progress.update(event)
            first = isinstance(event, SegmentCompressed) and len(progress.segments) == 1
            milestone = isinstance(event, (AllocationDone, Finished))
            if first or milestone or time.perf_counter() - shown > REFRESH_S:
                shown = time.perf_counter()
                truth = server.truth(request, event) if isinstance(event, Finished) else None
                yield progress.to_dict() | ({"truth": truth_dict(truth)} if truth else {})
    except Exception as exc:
        raise refusal(exc) from None


def truth_dict(truth: Truth) -> dict:
    return {"expected": truth.expected, "evidence": [list(span) for span in truth.evidence], "correct": truth.correct}


@refused
def compare(server: Server, video: object, question: str, **values: object) -> dict:
    """Two allocations of one compression: {"first", "second"} (each as /answer's result), the tokens each segment
    gained or lost, and the segments that changed most."""
    settings, others = split_others(values)
    comparison = server.compare(server.request(video, question, settings), others)
    return {"first": comparison.first.to_dict(), "second": comparison.second.to_dict(),
            "token_changes": comparison.token_changes, "most_changed": comparison.most_changed}


@refused
def sweep(server: Server, video: object, question: str, **settings: object) -> dict:
    """The run's strategy at budgets from one token per segment to every memory token: one /answer-style result
    per budget, smallest first."""
    swept = server.sweep(server.request(video, question, settings))
    return {"budgets": [result.budget for result in swept], "results": [result.to_dict() for result in swept]}


@refused
def segment(server: Server, video: object, question: str, *, segment: object, **settings: object) -> dict:
    """One segment (0-based): its time, relevance, rank (1 = most relevant) and tokens kept under these
    settings, and its sampled frames."""
    look = server.segment(server.request(video, question, settings), segment)
    facts = {"index": look.index, "start": look.start, "end": look.end, "relevance": look.relevance,
             "rank": look.rank, "tokens": look.tokens}
    return {"result": facts, "frames": [(frame, clock(t)) for frame, t in zip(look.frames, look.times)]}


def report(server: Server, video: object, question: str, **settings: object) -> Iterator[str]:
    """The run as one self-contained HTML file (the page's "Report · HTML")."""
    workdir = None
    try:
        request = server.request(video, question, settings)
        progress = RunProgress()
        for event in server.run(request):
            progress.update(event)
        workdir = tempfile.mkdtemp(prefix="tempo-app-")
        yield str(server.write_report(request, progress, Path(workdir, "tempo-report.html")))
    except Exception as exc:
        raise refusal(exc) from None
    finally:  # Gradio has copied the file into its cache by now
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)
