"""Zoom, a coarse-to-fine answer: the whole video is compressed first; then, for a question about when things
happen (or any question, when asked to), the same question is asked again over the stretch around the
compressor's most relevant moment that samples at the full frame rate, and answered in the video's own time.

An hour sampled at 1,024 frames puts 28 s in a segment; the window's segments are 4 s. The compressor's relevance
is the search signal (searching first and answering at the full rate is what wins on hour-long videos, T* and
Deep Video Discovery find); the decoder then reads only the window."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace

from ..config import RunConfig, SamplingConfig, Zoom
from ..events import Compressed, Compression, Event, Finished, Segment, SegmentCompressed, VideoProbed, Zoomed
from .request import Request

# What makes a question one about time: "when", "what time", "from when to when", "how long"; and about order:
# "which ... first", "before or after", "earlier or later".
WHEN = re.compile(r"\b(when|what time|at what (time|point|moment)|how long)\b", re.IGNORECASE)
ORDER = re.compile(r"\b(first|earlier|before|after|later|last)\b", re.IGNORECASE)
ALTERNATIVES = re.compile(r"\bor\b", re.IGNORECASE)

OnePass = Callable[[Request], Iterable[Event]]  # one pass of the host's half over a request, never zooming


def asks_order(question: str) -> bool:
    """Whether the question asks which of two things comes first (or last)."""
    return bool(ORDER.search(question) and ALTERNATIVES.search(question))


def reason_to_zoom(question: str, mode: str) -> str | None:
    """Why this question zooms under `mode` (Zoom's value), in words; None when it answers from the whole video."""
    if mode == Zoom.ALWAYS:
        return "zoom is always on"
    if mode != Zoom.AUTO:
        return None
    if asks_order(question):
        return "the question asks which comes first"
    if WHEN.search(question):
        return "the question asks when"
    return None


def zoomable(probed: VideoProbed, sampling: SamplingConfig) -> bool:
    """Whether a closer window exists: the stretch sampled is longer than the full rate can cover."""
    low, high = sampling.stretch(probed.duration)
    return sampling.max_frames / sampling.fps < high - low


def looks_closer(question: str, config: RunConfig, probed: VideoProbed) -> bool:
    """Whether a request for one answer to `question` looks closer into `probed` before answering: then its pass over
    the whole video compresses only, and the answer comes from the window's pass."""
    return reason_to_zoom(question, config.zoom) is not None and zoomable(probed, config.sampling)


def peaks(relevance: Sequence[float], count: int) -> list[int]:
    """The `count` most relevant segments that are not neighbours of a more relevant one, most relevant first."""
    chosen: list[int] = []
    for index in sorted(range(len(relevance)), key=lambda i: (-relevance[i], i)):
        if all(abs(index - other) > 1 for other in chosen):
            chosen.append(index)
        if len(chosen) == count:
            break
    return chosen


def moment_of(compression: Compression, question: str, sampling: SamplingConfig) -> float | None:
    """Where to look closer: the middle of the most relevant segment; for a question of order, the middle of its
    two most relevant peaks, or None when one window cannot hold both."""
    plan, relevance = compression.plan, compression.relevance
    middles = [sum(plan.span(i)) / 2 for i in range(len(relevance))]
    if not asks_order(question):
        return middles[max(range(len(relevance)), key=lambda i: (relevance[i], -i))]
    found = peaks(relevance, 2)
    if len(found) < 2:
        return middles[found[0]] if found else None
    first, second = sorted(plan.span(i) for i in found)
    if second[1] - first[0] > sampling.max_frames / sampling.fps:
        return None
    return (first[0] + second[1]) / 2


def coarse_to_fine(one_pass: OnePass, request: Request, allocate: Callable[[list[float]], list[int]],
                   reason: str) -> Iterator[Event]:
    """The whole video's pass (compression only, unless it is too short to zoom: then it answers, `looks_closer`),
    then `Zoomed` and the window's pass, whose `Finished` carries the first pass and the time both took."""
    started = time.perf_counter()
    config = request.config
    whole: Compression | None = None
    for event in one_pass(request):
        if isinstance(event, Compressed):
            whole = event.compression
        yield event
        if isinstance(event, Finished):  # nothing to zoom into: the first pass answered
            return
    if whole is None:
        return
    moment = moment_of(whole, request.question, config.sampling)
    window = None if moment is None else config.sampling.closer_window(moment, whole.video.duration)
    if window is None:  # a question of order whose two moments lie further apart than a window
        yield from answered_again(one_pass, request)
        return
    assert moment is not None  # the window is around it
    tokens = allocate(whole.relevance)
    segments = tuple(Segment(i, *whole.plan.span(i), relevance, k)
                     for i, (relevance, k) in enumerate(zip(whole.relevance, tokens)))
    zoomed = Zoomed(window, round(moment, 1), reason, whole.video, segments)
    yield zoomed
    first = time.perf_counter() - started
    closer = replace(config, sampling=replace(config.sampling, start=window[0], end=window[1]), zoom=Zoom.OFF.value)
    for event in one_pass(replace(request, config=closer)):
        if isinstance(event, Finished):
            timings = dict(event.timings)
            timings["first pass"] = round(first, 4)
            timings["total"] = round(timings.get("total", 0.0) + first, 4)
            event = replace(event, zoom=zoomed, timings=timings)
        yield event


def answered_again(one_pass: OnePass, request: Request) -> Iterator[Event]:
    """The whole video answered after all (zoom off): its compression replays from the cache, so only the answer's
    events are new."""
    for event in one_pass(replace(request, config=replace(request.config, zoom=Zoom.OFF.value))):
        if not isinstance(event, (VideoProbed, Compressed, SegmentCompressed)):
            yield event
