"""The three tools the app offers agents over MCP (and, like every endpoint, to `gradio_client`): `answer` a question
about a video, `locate` where in it the question's moment is (the compressor alone), and `wait_for` a live stream to
show what a question asks (its work in `demo/live_api.py`). Their docstrings are what an agent reads; Gradio takes
the `Args:` lines as the parameters' descriptions. They return JSON text."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import gradio as gr

from tempo.errors import TempoError
from tempo.events import Event, Segment, SegmentCompressed
from tempo.moments import find_moments
from tempo.render.progress import RunProgress
from tempo.settings import setting_named

from .api import looked_at
from .handover import HOW
from .live_api import first_alert
from .refusals import refused
from .server import Server

VIDEO = ("the video, as one string. " + HOW + " A data: URI suits short clips only; a file on the caller's machine "
         "is best uploaded first.")
QUESTION = "the question about the video, in plain language, e.g. 'When does the speaker show the chart?'"
ANSWERED = ("answer", "moments", "tokens_used", "budget", "num_segments", "duration")  # `answer`'s from the run's JSON


def for_agents(*settings: str) -> Callable[[Callable], Callable]:
    """Complete a tool's docstring with its `Args:`: the video, the question, then each setting's help from the
    settings table, so a setting is explained the same way on the page and to an agent."""
    def described(tool: Callable) -> Callable:
        lines = [f"video: {VIDEO}", f"question: {QUESTION}"]
        lines += [f"{name}: optional; {setting_named(name).describe()}" for name in settings]
        assert tool.__doc__ is not None  # every tool has its docstring
        tool.__doc__ = inspect.cleandoc(tool.__doc__) + "\n\nArgs:\n" + "".join(f"    {line}\n" for line in lines)
        return tool
    return described


def reporter(progress: gr.Progress) -> Callable[[Event], None]:
    """Each compressed segment reported to the caller: over MCP a progress notification, which also keeps an
    agent's host from giving up on an hour of video."""
    def report(event: Event) -> None:
        if isinstance(event, SegmentCompressed):
            progress((event.segment.index + 1, event.num_segments), desc="segments compressed", unit="segments")
    return report


def ranged(start: object, end: object, **more: object) -> dict[str, object]:
    """The settings a tool was given, leaving out what it left empty (the table's defaults apply)."""
    given = {"start": start, "end": end, **more}
    return {name: value for name, value in given.items() if value not in (None, "")}


@refused
@for_agents("budget", "start", "end", "zoom")
def answer(server: Server, video: str, question: str, budget: int | None = None, start: str | None = None,
           end: str | None = None, zoom: str | None = None, progress: gr.Progress = gr.Progress()) -> str:
    """Answer a question about a long video (minutes to hours) with Tempo: a small vision-language model reads the
    whole video in 8-frame segments, keeps more memory tokens where the question's moment is, and a language model
    answers from them. Slower than `locate` (it also runs the decoder); ask one question per call.
    Returns JSON text: {"answer", "moments" (ranked intervals where the relevance stands out, best first, each with
    start and end in seconds and a score from 0 to 1), "looked_at" (the segments the compressor found most relevant,
    most relevant first, each with index, start and end in seconds, "at" as m:ss and relevance from 0 to 1),
    "tokens_used", "budget", "num_segments", "duration" (seconds), "window" ([start, end] of what was read, in
    seconds), "zoom" (null, or where it looked closer and why: {"window", "moment", "reason"}), "model"}.
    """
    request = server.request(server.handed_video(video), question, ranged(start, end, budget=budget, zoom=zoom))
    report, run = reporter(progress), RunProgress(request.question)
    for event in server.run(request):  # to the end, so that the run closes what it opened
        report(event)
        run.update(event)
    finished = run.finished
    if finished is None:
        raise TempoError("The run ended without an answer.")
    plan_start = run.segments[0].start if run.segments else 0.0
    plan_end = run.segments[-1].end if run.segments else 0.0
    summary = finished.to_dict()  # the run's JSON, as --json and /answer give it: every ranked moment among it
    closer = summary["zoom"]
    return json.dumps({key: summary[key] for key in ANSWERED} | {
        "looked_at": looked_at(run.segments), "window": [plan_start, plan_end], "model": server.model.spec.name,
        "zoom": {key: closer[key] for key in ("window", "moment", "reason")} if closer else None},
        ensure_ascii=False)


@refused
@for_agents("start", "end")
def locate(server: Server, video: str, question: str, start: str | None = None, end: str | None = None,
           progress: gr.Progress = gr.Progress()) -> str:
    """Find where in a long video a question's moment is, without answering it: the compressor scores every
    8-frame segment for relevance to the question. Cheaper than `answer` (no decoder runs); a follow-up `answer`
    on the same video and question reuses this work. Use it to pick a time range, then `answer` with start/end
    for a closer look. Returns JSON text: {"moments" (ranked intervals where the relevance stands out, best first,
    each with start and end in seconds and a score from 0 to 1), "looked_at" (the most relevant segments, most
    relevant first, each with index, start and end in seconds, "at" as m:ss and relevance from 0 to 1), "segments"
    (every segment's index, start, end and relevance, in time order), "duration" (seconds), "model"}.
    """
    request = server.request(server.handed_video(video), question, ranged(start, end))
    compression = server.compression(request, reporter(progress))
    segments = [Segment(index, *compression.plan.span(index), round(score, 4))
                for index, score in enumerate(compression.relevance)]
    return json.dumps({"moments": [moment.to_dict() for moment in find_moments(segments)],
                       "looked_at": looked_at(segments),
                       "segments": [{"index": s.index, "start": s.start, "end": s.end, "relevance": s.relevance}
                                    for s in segments],
                       "duration": compression.video.duration, "model": server.model.spec.name}, ensure_ascii=False)


@refused
def wait_for(server: Server, stream: str, question: str, timeout: float | None = None,
             threshold: float | None = None, progress: gr.Progress = gr.Progress()) -> str:
    """Watch a live stream with a standing question until what it describes happens, and say when: Tempo scores
    each 8-frame segment (4 s) as it arrives and raises an alert when a segment's relevance rises clearly above the
    stream's recent level. Returns at the first alert, or after `timeout` seconds, or when the stream ends.
    Returns JSON text: {"seen": true, "moment": {"time" (seconds into the stream), "at" (m:ss), "clock" (UTC),
    "start", "end", "relevance", "rise"}, "watched" (seconds of stream), "segments", "source", "model"}, or
    {"seen": false, "answer": "not seen", "reason", "watched", "segments", "source", "model"}.

    Args:
        stream: the stream, as one string: an HLS playlist URL (.m3u8), an rtsp:// camera or an http(s) video that never ends, on a public address; or a video uploaded to this server first (the path /gradio_api/upload returned), played as if live at real time; on the embedded model, synthetic or synthetic:<seed> for a synthetic world that never ends.
        question: the standing question, e.g. 'When does the delivery van arrive?'
        timeout: optional; seconds to watch at most, 1 to 300 (default 120).
        threshold: optional; how far a segment's relevance must rise above the stream's recent level to count, in log-odds, 0.5 to 20 (default: the page's).
    """  # noqa: E501 (gradio reads each Args entry from its own line: a wrapped one would lose its tail)
    def report(watched: float, total: float) -> None:
        progress((round(watched), round(total)), desc="stream watched", unit="seconds")

    return json.dumps(first_alert(server, stream, question, timeout, threshold, report), ensure_ascii=False)


def mend_mcp_progress() -> None:
    """gradio 6.31's MCP path with progress can stop reading a finished job before its final output (the client's
    worker thread fills an asyncio queue, and a 0.5 s wait that times out on a done job ends the loop), then fails
    with UnboundLocalError; such a call now takes the job's final output as the path without progress does."""
    from gradio.mcp import GradioMCPServer

    with_progress = GradioMCPServer._execute_tool_with_progress
    if hasattr(with_progress, "unmended"):
        return

    async def mended(self: GradioMCPServer, job: Any, progress_token: str | int) -> Any:
        try:
            return await with_progress(self, job, progress_token)
        except UnboundLocalError:  # the loop ended without the final output: the job holds it
            return await self._execute_tool_without_progress(job)

    mended.unmended = with_progress  # type: ignore[attr-defined]
    GradioMCPServer._execute_tool_with_progress = mended  # type: ignore[method-assign]
