"""What the page's events do. Each handler takes the server, the request's raw values (the video, the question,
then the settings by name) and returns or yields named updates: {output name: value}, leaving out what stays as
it is. `layout` maps the names onto the page's components."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go

from tempo.analysis import most_relevant, usable
from tempo.engine import Request, check_file
from tempo.errors import InputError, TempoError
from tempo.events import AllocationDone, AnswerToken, Finished, SegmentCompressed, SegmentRead, VideoProbed, Zoomed
from tempo.moments import shown
from tempo.render.comparison import comparison_figure, sweep_heatmap
from tempo.render.export import export
from tempo.render.gallery import write_gallery
from tempo.render.progress import RunProgress
from tempo.render.text import answer_text
from tempo.render.timeline import axis_of, timeline_figure
from tempo.times import clock

from . import preview
from .chat import Conversation, Turn, continued, history, messages
from .html import comparison_html, segment_html, stats_html, status_html, truth_html
from .refusals import refusal, refused
from .server import Server, label
from .settings import split_others

SEGMENT_REFRESH_S = 0.25  # timeline redraws while compressing; the first and last segment always show
ANSWER_REFRESH_S = 0.08
Updates = dict[str, object]


def show_preview(server: Server, upload: object) -> Iterator[Updates]:
    """The video panel for an upload: the file itself when browsers play it, else a small H.264 proxy (the
    analysis still reads the original)."""
    if not upload:
        yield {"preview": None, "chat": [], "conversation": None}
        return
    yield {"chat": [], "conversation": None}  # a new video, a new conversation
    try:
        video = server.visitor_video(upload)
    except TempoError as exc:
        raise refusal(exc) from None
    try:  # nothing is opened for a preview that the analysis would refuse: the analysis says why
        headers = check_file(video, server.limits)
    except TempoError:
        yield {"preview": None}
        return
    if preview.browser_playable(video, headers):
        yield {"preview": video}
        return
    workdir = tempfile.mkdtemp(prefix="tempo-app-")
    try:
        yield {"preview": str(preview.make_proxy(video, workdir))}
    except TempoError:  # the analysis says what is wrong with the file, if anything
        yield {"preview": None}
    finally:  # Gradio has copied the proxy into its cache by now
        shutil.rmtree(workdir, ignore_errors=True)


def analyze(server: Server, video: object, question: str, *, conversation: object = None,
            every_token: bool = False, **settings: object) -> Iterator[Updates]:
    """The page: a new turn in the conversation about this video. Live timeline while compressing, tokens once
    allocated, then the answer token by token in the chat; at the end the stats, the downloads (every turn), the
    filmstrip, the key frames and (for an example) the expected answer."""
    progress, drawn, workdir = RunProgress(), 0.0, None
    conversation = conversation if isinstance(conversation, Conversation) else None
    hidden = gr.DownloadButton(visible=False)
    yield {"status": status_html(progress), "timeline": empty_timeline(),
           "chat": messages(conversation, str(question or "")), "gallery": "", "stats": "", "json_file": hidden,
           "csv_file": hidden, "report_file": hidden, "filmstrip": "", "truth": "", "moments": "",
           "clip_file": hidden, "highlights_file": hidden}
    try:
        request = server.request(video, question, settings, bool(every_token))
        progress.question = request.question
        conversation = continued(conversation, os.fspath(request.video))  # the checked path, a str
        request, evidence = replace(request, history=history(conversation)), server.evidence(request)
        for event in server.run(request):
            progress.update(event)
            if isinstance(event, VideoProbed):
                progress.estimate = server.pace.estimate(event.num_segments)
                yield {"status": status_html(progress)}
            now = time.perf_counter()
            if isinstance(event, (SegmentRead, SegmentCompressed)) and not progress.from_cache:  # a replay is instant
                done = progress.read if isinstance(event, SegmentRead) else len(progress.segments)
                if done in (1, event.num_segments) or now - drawn > SEGMENT_REFRESH_S:
                    drawn = now
                    yield timeline(progress, evidence)
            elif isinstance(event, Zoomed) or isinstance(event, AllocationDone) and not progress.from_cache:
                yield timeline(progress, evidence)
            elif isinstance(event, AnswerToken) and now - drawn > ANSWER_REFRESH_S:
                drawn = now
                yield {"chat": messages(conversation, request.question, progress.answer)}
            elif isinstance(event, Finished):
                if not progress.from_cache:
                    server.pace.record(event)
                turn = Turn(progress, server.truth(request, event), evidence,
                            label(request.config, event.budget), progress.from_cache, server.model.spec.takes_history)
                conversation = conversation.with_turn(turn)
                # A folder per request, deleted (finally) once Gradio has copied the files into its cache.
                workdir = tempfile.mkdtemp(prefix="tempo-app-")
                yield turn_updates(conversation) | downloads(server, conversation, Path(workdir))
    except Exception as exc:
        error = refusal(exc)
        yield {"status": status_html(progress, error=error.message), "chat": messages(conversation)}
        raise error from None
    finally:
        if workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def look_closer(server: Server, video: object, question: str, moment: object, *, conversation: object = None,
                every_token: bool = False, **settings: object) -> Iterator[Updates]:
    """"Look closer": the question as typed, asked again over the window around the moment picked last (a time in
    an answer, a where-it-looked thumbnail, a timeline point; else where the shown turn's compressor looked most),
    sampled at the full rate, as a new turn of the conversation."""
    conversation = conversation if isinstance(conversation, Conversation) else None
    if conversation is None or not conversation.turns:
        raise refusal(InputError("Ask a question first, then look closer at a moment it found."))
    selected = conversation.turns[conversation.selected if conversation.selected is not None else -1].finished
    seconds = moment.get("seconds") if isinstance(moment, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        looked = most_relevant(selected.segments, 1)
        seconds = (looked[0].start + looked[0].end) / 2 if looked else selected.video.duration / 2
    sampling = server.request(video, question, settings, bool(every_token)).config.sampling
    window = sampling.closer_window(float(seconds), selected.video.duration)
    if window is None:
        raise refusal(InputError(f"This video samples at {sampling.fps:g} frames per second throughout already: "
                                 "there is nothing closer to see."))
    yield from analyze(server, video, question, conversation=conversation, every_token=every_token,
                       **(settings | {"start": window[0], "end": window[1]}))


@functools.cache
def empty_timeline() -> go.Figure:
    """The timeline before a run's first segment (the same every time: made once)."""
    return timeline_figure(RunProgress())


def timeline(progress: RunProgress, evidence: tuple[tuple[float, float], ...]) -> Updates:
    """The status line and the timeline as they stand (a figure costs tens of milliseconds: made only when shown)."""
    return {"status": status_html(progress), "timeline": timeline_figure(progress, evidence)}


def turn_updates(conversation: Conversation) -> Updates:
    """The selected turn on the page: its timeline, chat mark, stats, filmstrip, key frames and expected answer."""
    assert conversation.selected is not None  # a conversation with turns has one selected
    turn = conversation.turns[conversation.selected]
    progress = turn.progress
    assert progress.allocation is not None  # a turn's run was allocated
    return {"timeline": turn.figure, "status": status_html(progress),
            "chat": messages(conversation), "conversation": conversation, "gallery": turn.key_frames,
            "stats": stats_html(turn.finished, progress.allocation.context_truncated), "filmstrip": turn.filmstrip,
            "truth": truth_html(turn.truth), "moments": turn.moments, "clip_file": gr.DownloadButton(visible=False)}


def downloads(server: Server, conversation: Conversation, workdir: Path) -> Updates:
    """Every turn of the conversation as JSON, CSV and one HTML report, and the newest turn's moments as one
    picture, written into `workdir`."""
    turns = conversation.turns
    json_path, csv_path = export([turn.progress for turn in turns], workdir)
    report_path = server.write_report([turn.asked for turn in turns], workdir / "tempo-report.html")
    newest = turns[-1]
    highlights = gr.DownloadButton(visible=False)
    if newest.finished.moments:
        highlights = gr.DownloadButton(value=str(write_gallery(
            newest.finished.moments, newest.highlight_segments, workdir / "tempo-highlights.png", newest.question,
            conversation.video)), visible=True)
    return {"json_file": gr.DownloadButton(value=str(json_path), visible=True),
            "csv_file": gr.DownloadButton(value=str(csv_path), visible=True),
            "report_file": gr.DownloadButton(value=str(report_path), visible=True), "highlights_file": highlights}


def clip_view(server: Server, conversation: object, picked: object) -> Iterator[Updates]:
    """A click on one of the shown turn's moments: its clip, cut from the conversation's video, to download."""
    if not isinstance(conversation, Conversation) or conversation.selected is None or not isinstance(picked, dict):
        return
    listed = shown(conversation.turns[conversation.selected].finished.moments)  # as the page lists them
    index = picked.get("moment")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(listed):
        return
    worded = listed[index]
    workdir = tempfile.mkdtemp(prefix="tempo-app-")
    try:
        clip = server.clip(conversation.video, worded.moment.start, worded.moment.end, Path(workdir))
        yield {"clip_file": gr.DownloadButton(f"Clip {worded.rank} · {worded.when} · MP4",
                                              value=str(clip.path), visible=True)}
    except TempoError as exc:
        raise refusal(exc) from None
    finally:  # Gradio has copied the clip into its cache by now
        shutil.rmtree(workdir, ignore_errors=True)


def show_turn(server: Server, conversation: object, picked: object) -> Updates:
    """A click on a reply in the chat: that turn's run on the timeline, filmstrip and key frames again."""
    if not isinstance(conversation, Conversation) or not isinstance(picked, dict):
        return {}
    index = picked.get("turn")
    if not isinstance(index, int) or not 0 <= index < len(conversation.turns):
        return {}
    return turn_updates(conversation.selecting(index))


@refused
def segment_view(server: Server, video: object, question: str, picked: object, *, every_token: bool = False,
                 **settings: object) -> Updates:
    """A click on the filmstrip or the timeline: that segment's card and frames, in the Segment tab."""
    if not isinstance(picked, dict) or "segment" not in picked:
        return {}
    request = server.request(video, question, settings, bool(every_token))
    look = server.segment(request, picked["segment"])
    return {"card": segment_html(look, server.model.spec.num_memory_tokens),
            "frames": [(frame, clock(t)) for frame, t in zip(look.frames, look.times)],
            "tabs": gr.Tabs(selected="segment")}


@refused
def compare_view(server: Server, video: object, question: str, **values: object) -> Updates:
    """The Compare tab: both timelines and answers, what changed most, and a summary."""
    settings, others = split_others(values)
    request = server.request(video, question, settings)
    comparison, evidence = server.compare(request, others), server.evidence(request)
    first, second = comparison.first, comparison.second
    before, after = [s.tokens or 0 for s in first.segments], [s.tokens or 0 for s in second.segments]  # allocated
    start, end = axis_of(second.video)
    changes = comparison_figure(second.segments, before, after, start=start, duration=end, k_max=second.k_max,
                                labels=comparison.labels, highlight=comparison.most_changed)
    return {"first_plot": timeline_figure(RunProgress.of(first), evidence),
            "first_answer": gr.Textbox(value=answer_text(first.answer), label=comparison.labels[0]),
            "second_plot": timeline_figure(RunProgress.of(second), evidence),
            "second_answer": gr.Textbox(value=answer_text(second.answer), label=comparison.labels[1]),
            "changes": changes,
            "summary": comparison_html(first, second, comparison.labels, comparison.most_changed,
                                       server.truth(request), (verdict(server, request, first),
                                                               verdict(server, request, second)))}


@refused
def sweep_view(server: Server, video: object, question: str, **settings: object) -> Updates:
    """The Budget sweep tab: tokens per segment at each budget as a heatmap, and the answer at each budget, marked
    "too few tokens" where it says nothing usable and, for an example, right or wrong."""
    request = server.request(video, question, settings)
    sweep = server.sweep(request)
    last = sweep[-1]
    rows = []
    for finished in reversed(sweep):
        everything = finished.tokens_used == finished.k_max * len(finished.segments)
        rows.append([f"{finished.budget:,}" + (" (everything)" if everything else ""), f"{finished.tokens_used:,}",
                     answer_text(finished.answer), verdict(server, request, finished)])
    start, end = axis_of(last.video)
    return {"plot": sweep_heatmap(last.segments, sweep, start=start, duration=end, k_max=last.k_max),
            "answers": rows}


def verdict(server: Server, request: Request, finished: Finished) -> str:
    """How an answer of a sweep or a comparison fares: "too few tokens" when it says nothing usable, else for
    an example whether it is right."""
    if not usable(finished.answer):
        return "too few tokens"
    truth = server.truth(request, finished)
    return "" if truth is None else ("✓ right" if truth.correct else "✗ wrong")


def cancelled(server: Server) -> Updates:
    """The Cancel button: the run is stopped (Gradio cancels it; closing its stream stops decoding too)."""
    return {"status": status_html(RunProgress(), error="Cancelled: nothing more is decoded or compressed.")}


def strategy_choice(server: Server, every_token: bool) -> Updates:
    """Every memory token kept: the strategy has nothing to choose then."""
    return {"strategy": gr.Dropdown(interactive=not every_token)}
