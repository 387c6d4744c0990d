"""Live mode for programs: the /watch endpoint (one JSON update per segment, for `gradio_client`) and the work of
the `wait_for` tool (the first moment that raised an alert, or "not seen"). Both read what the page reads
(`live_sources`), take a watch of this server's cap while they run, and free it when they end or are cancelled."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit
from weakref import WeakKeyDictionary

from tempo.errors import InputError
from tempo.live import Alert, LiveWatch, SegmentWatched, WatchEnded, WatchStarted
from tempo.live.events import LiveEvent
from tempo.render.progress import STAGE
from tempo.times import clock

from . import handover
from .live_sources import (
    NOT_ON_ZEROGPU,
    SYNTHETIC,
    Source,
    Watches,
    Watching,
    config_of,
    file_source,
    synthetic_source,
    url_source,
    zerogpu_live_cost,
)
from .refusals import refused
from .server import Server

MAX_WAIT_S = 300.0  # wait_for watches at most five minutes: a tool call an agent's host keeps open
DEFAULT_WAIT_S = 120.0
KEPT_ALERTS = 100  # alerts /watch's final update lists
STREAM = ("the stream, as one string: an HLS playlist URL (.m3u8), an rtsp:// camera, an http(s) video that never "
          "ends (each on a public address), a video uploaded to this server first (the path /gradio_api/upload "
          "returned), played as if live at real time")
_watches: WeakKeyDictionary[Server, Watches] = WeakKeyDictionary()
_made = threading.Lock()


def watches_of(server: Server) -> Watches:
    """The server's watches (made once, with its cap)."""
    with _made:
        if server not in _watches:
            _watches[server] = Watches(server.limits.live_watches)
        return _watches[server]


def synthetic_allowed(server: Server) -> bool:
    """The synthetic world is offered on the embedded model, the only one that knows it."""
    return server.model.spec.trained_world == "synthetic"


def refuse_on_zerogpu(server: Server) -> None:
    if server.device.remote:
        raise InputError(NOT_ON_ZEROGPU.format(minutes=zerogpu_live_cost()[1]))


def named_source(server: Server, text: object) -> Source:
    """The source a program names in one string (see STREAM), or "synthetic[:seed]" on the embedded model."""
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"Please give a stream: {STREAM}.")
    text = text.strip()
    if text == SYNTHETIC or text.startswith(SYNTHETIC + ":"):
        if not synthetic_allowed(server):
            raise InputError("The synthetic world is offered with the embedded Tempo-Tiny only.")
        seed = text.partition(":")[2]
        if seed and not seed.isdigit():
            raise InputError(f"A synthetic stream is named synthetic or synthetic:<seed> (got {text!r}).")
        return synthetic_source(int(seed) if seed else None)
    if urlsplit(text).scheme.lower() in ("http", "https"):
        own = handover.own_upload(text, server.uploads)
        if own is not None:
            return file_source(server.visitor_video(own))
    if "://" in text:
        return url_source(text, server.limits)
    return file_source(server.visitor_video(text))


def begin(server: Server, owner: str, source: Source, question: str, threshold: float | None) -> Watching:
    """A watch of `source` for `owner`, within the server's cap (its question and threshold checked)."""
    refuse_on_zerogpu(server)
    live = LiveWatch(server.model, question, config_of(server.limits, threshold), source.name)
    return watches_of(server).open(owner, Watching(live, source))


def moment(started_at: float, alert: Alert) -> dict:
    """An alert as JSON: its times in the stream (seconds, m:ss) and by the clock (UTC)."""
    return alert.to_dict() | {"at": clock(alert.time), "clock": utc(started_at + alert.time)}


def utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def followed(watching: Watching) -> Iterator[LiveEvent]:
    """A pulled source's events, at real time."""
    if watching.source.frames is None:
        raise InputError("A camera is watched from the page.")
    return watching.live.follow(watching.source.frames(), paced=True, stop=watching.stop)


def with_status(status: str, **fields: Any) -> dict[str, Any]:
    """One of `/watch`'s updates: its status (also as `stage`, the key's first name, for older clients), then
    `fields`."""
    return {"status": status, STAGE: status, **fields}


@refused
def watch(server: Server, stream: str, question: str, threshold: float | None = None,
          minutes: float | None = None) -> Iterator[dict]:
    """Watch a stream with a standing question: {"status": "started", ...}, then one update per segment as it is
    scored ({"status": "watching", "segment": {index, start, end (stream seconds), relevance, level, rise, lag,
    alert}, "alert": the moment or null, "alerts": how many so far}), and at the end {"status": "ended", "reason",
    "failed", "segments", "alerts": [every moment]}; each also says its status as `stage`, for older clients. It
    runs until the stream ends, `minutes` of stream have passed, or the caller cancels; `threshold` is the alert
    rule's rise (log-odds above the recent level)."""
    if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or minutes <= 0):
        raise InputError(f"minutes must be a positive number (got {minutes!r}).")
    owner = "api-" + uuid.uuid4().hex
    watching = begin(server, owner, named_source(server, stream), question, threshold)
    started_at = time.time()
    alerts: list[dict] = []
    latest: dict[str, Any] = {}  # the newest segment's update, which an alert repeats
    try:
        for event in followed(watching):
            if isinstance(event, WatchStarted):
                started_at = event.started_at
                yield with_status("started", source=event.source, question=event.question,
                                  started_at=utc(started_at), model=server.model.spec.name)
            elif isinstance(event, SegmentWatched):
                latest = with_status("watching", segment=event.to_dict(), alert=None, alerts=len(alerts))
                if minutes is not None and event.segment.end >= minutes * 60:
                    watching.stop.set()
                if not event.alert:
                    yield latest
            elif isinstance(event, Alert):
                alerts.append(moment(started_at, event))
                yield with_status("watching", segment=latest["segment"] | {"alert": True}, alert=alerts[-1],
                                  alerts=len(alerts))
            elif isinstance(event, WatchEnded):
                reason = "The watch reached its minutes." if minutes is not None and watching.stop.is_set() \
                    else event.reason
                yield with_status("ended", reason=reason, failed=event.failed, segments=event.segments,
                                  alerts=alerts[-KEPT_ALERTS:])
    finally:
        watches_of(server).close(owner, watching)


def first_alert(server: Server, stream: str, question: str, timeout: float | None,
                threshold: float | None, report: Callable[[float, float], None]) -> dict:
    """Watch `stream` until its first alert, for at most `timeout` seconds: that moment, or "not seen" and why.
    `report(watched, timeout)` after each segment."""
    timeout = DEFAULT_WAIT_S if timeout in (None, "") else timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_WAIT_S:
        raise InputError(f"The timeout is a number of seconds from 1 to {MAX_WAIT_S:.0f} (got {timeout!r}).")
    owner = "tool-" + uuid.uuid4().hex
    watching = begin(server, owner, named_source(server, stream), question, threshold)
    deadline = threading.Timer(timeout, watching.stop.set)
    deadline.start()
    started_at, watched, segments = time.time(), 0.0, 0
    base = {"source": watching.source.name, "model": server.model.spec.name}
    try:
        for event in followed(watching):
            if isinstance(event, WatchStarted):
                started_at = event.started_at
            elif isinstance(event, SegmentWatched):
                watched, segments = event.segment.end, segments + 1
                report(min(time.time() - started_at, timeout), timeout)
            elif isinstance(event, Alert):
                return base | {"seen": True, "moment": moment(started_at, event), "watched": round(watched, 1),
                               "segments": segments}
            elif isinstance(event, WatchEnded):
                reason = (f"no alert in the {timeout:g} s allowed" if watching.stop.is_set() and not event.failed
                          else event.reason)
                return base | {"seen": False, "answer": "not seen", "reason": reason, "watched": round(watched, 1),
                               "segments": segments}
        raise InputError("The watch ended without saying why.")
    finally:
        deadline.cancel()
        watches_of(server).close(owner, watching)
