"""The Live tab's handlers: a standing question over the visitor's camera, a stream URL, a file played as if live or
(on the embedded model) a synthetic world that never ends. Each segment's relevance joins a scrolling timeline as it
arrives; a clear rise raises an alert in the conversation (with a browser notification if asked), which replays
the moment from the replay buffer; "Ask now" answers over the recent memories. Handlers take the server, the
request's values and the visitor's session (`owner`), and return named updates, as `handlers` do; `live_layout`
builds the tab and wires them."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import gradio as gr

from tempo.config import RunConfig
from tempo.errors import InputError
from tempo.events import AnswerToken, Finished
from tempo.live import Alert, SegmentWatched, WatchEnded
from tempo.times import clock, span

from .live_api import begin, followed, refuse_on_zerogpu, synthetic_allowed, watches_of
from .live_sources import Source, Watching, camera, config_of, file_source, synthetic_source, url_source
from .live_view import View, answer_html, question_html
from .refusals import refusal
from .server import Server

CAMERA_SILENCE_S = 6.0  # a camera that has sent nothing for this long was stopped or unplugged
REPLAY_LEAD_S = 6.0  # a replay starts this long before the moment
ANSWER_REFRESH_S = 0.1
Updates = dict[str, object]
camera_clock = time.monotonic  # when a camera's frames arrive (their stream time) and when it last sent one


def updates(view: View, note: str = "") -> Updates:
    return {"status": view.status(note), "timeline": view.figure(), "film": view.film_html(), "chat": view.chat()}


def kind_changed(server: Server, kind: str, seed: object, *, owner: str) -> Updates:
    """The source's own control shown; the synthetic world suggests its question."""
    shown: Updates = {"cam": gr.Image(visible=kind == "camera"), "url": gr.Textbox(visible=kind == "url"),
             "upload": gr.File(visible=kind == "file"), "seed": gr.Number(visible=kind == "synthetic")}
    if kind == "synthetic" and synthetic_allowed(server):
        shown["question"] = synthetic_source(checked_seed(seed)).suggestion
    return shown


def checked_seed(seed: object) -> int | None:
    if seed in (None, ""):
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, float)) or not float(seed).is_integer():
        raise InputError(f"The world's seed must be a whole number (got {seed!r}).")
    return int(seed)


def page_source(server: Server, kind: str, url: str, upload: object, seed: object) -> Source:
    if kind == "url":
        return url_source(url or "", server.limits)
    if kind == "file":
        return file_source(server.visitor_video(upload))
    if kind == "synthetic" and synthetic_allowed(server):
        return synthetic_source(checked_seed(seed))
    raise InputError("Choose a source: a stream URL, a file, or the camera (press its record button).")


def start_watch(server: Server, kind: str, url: str, upload: object, seed: object, question: str,
                threshold: float, *, owner: str) -> Iterator[Updates]:
    """Start watching a pulled source (a stream URL, a file, the synthetic world) and show each segment as it
    arrives, until it ends, dies or is stopped. What was seen stays askable and replayable until Stop."""
    watches_of(server).resume(owner)
    if kind == "camera":
        refuse_on_zerogpu(server)
        yield {"status": "<div class='tempo-status'>Press the camera's record button: the watch starts with its "
                         "first frame.</div>"}
        return
    watching = begin(server, owner, page_source(server, kind, url, upload, seed), question, threshold)
    view = watching.view = View(source=watching.source.name)
    yield updates(view) | {"chat": [], "timer": gr.Timer(active=False)}
    for event in followed(watching):
        view.update(event)
        if isinstance(event, (SegmentWatched, Alert, WatchEnded)):
            yield updates(view)


def camera_frame(server: Server, frame: object, question: str, threshold: float, *, owner: str) -> Updates:
    """A frame from the visitor's camera: the first starts a watch; a segment's worth shows on the page."""
    watches = watches_of(server)
    if frame is None or watches.is_halted(owner):  # after Stop, a camera still recording starts nothing
        return {}
    watching = watches.get(owner)
    if watching is None or watching.source.frames is not None or watching.view.ended is not None:
        watching = begin(server, owner, camera(), question, threshold)
        watching.view, watching.origin = View(source=watching.source.name), camera_clock()
        watching.view.update(watching.live.start())
        watching.last_frame = watching.origin
        watching.live.push(0.0, frame)
        return updates(watching.view) | {"chat": [], "timer": gr.Timer(active=True)}
    with watching.lock:
        watching.last_frame = camera_clock()
        events = watching.live.push(watching.last_frame - watching.origin, frame)
    for event in events:
        watching.view.update(event)
    return updates(watching.view) if events else {}


def camera_check(server: Server, *, owner: str) -> Updates:
    """Every two seconds while the camera is watched: one that has gone silent ends the watch (kept)."""
    watching = watches_of(server).get(owner)
    if watching is None or watching.source.frames is not None or watching.view.ended is not None:
        return {"timer": gr.Timer(active=False)}
    return camera_silent(watching, camera_clock()) or {}


def camera_silent(watching: Watching, now: float) -> Updates | None:
    """The watch ended with its sentence if the camera has sent nothing for CAMERA_SILENCE_S, else None."""
    silent = now - watching.last_frame
    if silent <= CAMERA_SILENCE_S:
        return None
    reached = watching.last_frame - watching.origin
    with watching.lock:
        event = watching.live.ended(f"The camera stopped sending frames {clock(reached)} into the stream (stopped "
                                    "or unplugged), so the watch ended; what was seen is kept.", failed=True)
    watching.view.update(event)
    return updates(watching.view) | {"timer": gr.Timer(active=False)}


def stop_watch(server: Server, *, owner: str) -> Updates:
    """Stop: the watch ends and everything it kept is freed."""
    watches_of(server).halt(owner)
    return {"status": "<div class='tempo-status'>Stopped: the watch and everything it kept (its window of memories "
                      "and its replay) are freed. Press Start watching (for the camera: then record) to watch "
                      "again.</div>", "timer": gr.Timer(active=False)}


def set_threshold(server: Server, threshold: float, *, owner: str) -> Updates:
    """A new alert threshold, from the next segment on."""
    rule = config_of(server.limits, threshold).rule
    watching = watches_of(server).get(owner)
    if watching is not None:
        watching.live.alerting.rule = replace(watching.live.alerting.rule, rise=rule.rise)
    return {}


def ask_now(server: Server, question: str, *, owner: str) -> Iterator[Updates]:
    """A question answered now by the decoder over the recent memories (ATA over the budget); its times are stream
    times, links into the replay buffer."""
    watching = watches_of(server).get(owner)
    if watching is None or getattr(watching, "view", None) is None:
        raise InputError("Start a watch first: Ask now answers from what it has seen.")
    view = watching.view
    view.say("user", question_html(question))
    position = view.say("assistant", "<div class='tempo-live-answer'>…</div>")
    shown, partial = 0.0, ""
    yield {"chat": view.chat(), "ask": ""}
    try:
        for event in watching.live.ask(question, RunConfig(limits=server.limits)):
            if isinstance(event, AnswerToken):
                partial += event.text
                if time.perf_counter() - shown > ANSWER_REFRESH_S:
                    shown = time.perf_counter()
                    view.replace(position, answer_html(partial, view.started_at))
                    yield {"chat": view.chat()}
            elif isinstance(event, Finished):
                window = event.video.window or (0.0, event.video.duration)
                view.replace(position, answer_html(event.answer, view.started_at) +
                             f"<div class='tempo-meta'>over {span(*window)} of the stream · {len(event.segments)} "
                             f"segments · {event.tokens_used:,} of {event.budget:,} tokens</div>")
                yield {"chat": view.chat()}
    except Exception as exc:
        view.replace(position, f"<div class='tempo-live-answer'>⚠ {refusal(exc).message}</div>")
        yield {"chat": view.chat()}


def replay_at(server: Server, picked: object, *, owner: str) -> Iterator[Updates]:
    """The replay buffer from just before the moment clicked, to its end."""
    seconds = picked.get("seconds") if isinstance(picked, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return
    watching = watches_of(server).get(owner)
    if watching is None:
        raise InputError("The watch was stopped, and its replay with it.")
    workdir = tempfile.mkdtemp(prefix="tempo-live-")
    try:
        path = Path(workdir) / f"replay-{int(seconds)}.mp4"
        first, last = watching.live.replay.clip(path, seconds - REPLAY_LEAD_S, float("inf"), watching.live.config.fps)
        yield {"replay": gr.Video(value=str(path), label=f"Replay {span(first, last)} · the moment at "
                                                         f"{clock(seconds)}")}
    finally:  # Gradio has copied the clip into its cache by now
        shutil.rmtree(workdir, ignore_errors=True)
