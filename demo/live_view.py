"""What the Live tab shows of a watch, folded from its events: the status line with the lag, the timeline of
relevance in stream time (the last minutes, scrolling), the key frames of the latest segments, and the conversation
of alerts and answers. Each part is bounded; times are links into the replay buffer (`data-live-seconds`)."""

from __future__ import annotations

import html
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import plotly.graph_objects as go

from tempo.live import Alert, Gap, LiveEvent, SegmentWatched, WatchEnded, WatchStarted
from tempo.render.report import data_uri
from tempo.render.style import GUIDE, ORANGE, RED, page_layout
from tempo.render.timeline import time_ticks
from tempo.times import clock, time_mentions

SHOWN_S = 600.0  # the timeline shows the last ten minutes of stream
FILM = 10  # key frames of the latest segments under it
FILM_EDGE = 120
ALERT_EDGE = 240
MESSAGES = 60  # the conversation keeps its latest messages
LAGS = 30  # the status line's lag figures: the last two minutes' segments


@dataclass
class Point:
    """A segment as the timeline draws it (no frame)."""

    start: float
    end: float
    relevance: float
    level: float
    alert: bool


@dataclass
class View:
    """The page's picture of one watch; every part capped."""

    source: str = ""
    started_at: float = field(default_factory=time.time)
    points: deque[Point] = field(default_factory=lambda: deque(maxlen=int(SHOWN_S // 4)))
    film: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=FILM))
    messages: deque[dict] = field(default_factory=lambda: deque(maxlen=MESSAGES))
    lags: deque[float] = field(default_factory=lambda: deque(maxlen=LAGS))
    segments: int = 0
    alerts: int = 0
    ended: WatchEnded | None = None
    gap: Gap | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def update(self, event: LiveEvent) -> None:
        with self.lock:
            if isinstance(event, WatchStarted):
                self.source, self.started_at = event.source, event.started_at
            elif isinstance(event, SegmentWatched):
                segment = event.segment
                assert segment.relevance is not None and segment.frame_time is not None  # a watch's segments have both
                assert segment.frame is not None  # and their key frame
                self.points.append(Point(segment.start, segment.end, segment.relevance, event.level, event.alert))
                self.film.append((segment.frame_time, data_uri(segment.frame, FILM_EDGE)))
                if event.lag is not None:
                    self.lags.append(event.lag)
                self.segments += 1
            elif isinstance(event, Alert):
                self.alerts += 1
                self.messages.append({"role": "assistant", "content": alert_html(event, self.started_at)})
            elif isinstance(event, Gap):
                self.gap = event
            elif isinstance(event, WatchEnded):
                self.ended = event

    def say(self, role: str, content: str) -> int:
        """A message added to the conversation; returns its position (for `replace`)."""
        with self.lock:
            self.messages.append({"role": role, "content": content})
            return len(self.messages) - 1

    def replace(self, position: int, content: str) -> None:
        with self.lock:
            if position < len(self.messages):
                self.messages[position] = {"role": self.messages[position]["role"], "content": content}

    def chat(self) -> list[dict]:
        with self.lock:
            return list(self.messages)

    def status(self, note: str = "") -> str:
        with self.lock:
            if self.ended is not None:
                cls = " error" if self.ended.failed else ""
                text = (f"{html.escape(self.ended.reason)} · {self.segments} segments · {self.alerts} "
                        f"alert{'s' * (self.alerts != 1)}")
                return f"<div class='tempo-status{cls}' id='tempo-live-ended'>{text}</div>"
            if not self.points:
                return (f"<div class='tempo-status'>Watching {html.escape(self.source)} · "
                        f"{html.escape(note or 'waiting for the first segment…')}</div>")
            reached = self.points[-1].end
            text = (f"Watching {html.escape(self.source)} · {clock(reached)} of stream · {self.segments} segments · "
                    f"{self.alerts} alert{'s' * (self.alerts != 1)}")
            if self.lags:
                lags = sorted(self.lags)
                p95 = lags[min(len(lags) - 1, int(0.95 * len(lags)))]
                text += (f" · <span id='tempo-live-lag'>{self.lags[-1]:.1f} s behind real time</span> (95% of the "
                         f"last {len(lags)} segments within {p95:.1f} s)")
            if self.gap is not None:
                text += f" · skipped {clock(self.gap.start)}–{clock(self.gap.end)} to keep up"
            return f"<div class='tempo-status'>{text}</div>"

    def figure(self) -> go.Figure:
        with self.lock:
            points = list(self.points)
        return live_figure(points)

    def film_html(self) -> str:
        with self.lock:
            cells = [f"<a class='tempo-live-seek' data-live-seconds='{t:.2f}' title='Watch again from {clock(t)}'>"
                     f"<img src='{uri}' alt=''><span>{clock(t)}</span></a>" for t, uri in self.film]
        return f"<div class='tempo-live-film'>{''.join(cells)}</div>" if cells else ""


def live_figure(points: list[Point]) -> go.Figure:
    """Relevance per segment against stream time over the last SHOWN_S, the stream's recent level dotted under it
    and the segments that raised an alert marked."""
    end = max(points[-1].end if points else 0.0, 60.0)
    start = max(0.0, end - SHOWN_S)
    fig = go.Figure()
    if points:
        mids = [(p.start + p.end) / 2 for p in points]
        hover = [f"{clock(p.start)}–{clock(p.end)}<br>relevance {p.relevance:.3g}" for p in points]
        fig.add_trace(go.Scatter(x=mids, y=[p.relevance for p in points], mode="lines+markers", name="relevance",
                                 line=dict(color=ORANGE, width=2), marker=dict(size=4), text=hover,
                                 hovertemplate="%{text}<extra></extra>"))
        fig.add_trace(go.Scatter(x=mids, y=[p.level for p in points], mode="lines", name="recent level",
                                 line=dict(color=GUIDE, width=1, dash="dot"), hoverinfo="skip"))
        alerted = [(m, p) for m, p in zip(mids, points) if p.alert]
        if alerted:
            fig.add_trace(go.Scatter(x=[m for m, _ in alerted], y=[p.relevance for _, p in alerted], mode="markers",
                                     name="alert", marker=dict(color=RED, size=12, symbol="triangle-down"),
                                     hoverinfo="skip"))
    else:
        fig.add_annotation(xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, text="relevance per segment "
                           "will appear here as the stream arrives", font=dict(size=13, color=GUIDE))
    ticks, labels = time_ticks(end, start=start)
    fig.update_xaxes(range=[start, end], tickvals=ticks, ticktext=labels, showgrid=False, zeroline=False,
                     title_text="stream time")
    fig.update_yaxes(range=[0, 1.05], title_text="relevance", title_font=dict(color=ORANGE),
                     gridcolor="rgba(148, 163, 184, 0.18)", zeroline=False)
    return page_layout(fig, 300, "live", showlegend=bool(points))


def when(seconds: float, started_at: float) -> str:
    """A stream time and the clock time it was (the server's clock)."""
    return f"{clock(seconds)} ({time.strftime('%H:%M:%S', time.localtime(started_at + seconds))})"


def alert_html(alert: Alert, started_at: float) -> str:
    """An alert in the conversation: the moment's key frame and time, a link into the replay buffer."""
    segment = alert.segment
    assert segment.frame is not None  # a watch keeps every segment's key frame
    return (f"<div class='tempo-live-alert' data-live-seconds='{alert.time:.2f}' title='Watch it again'>"
            f"<img src='{data_uri(segment.frame, ALERT_EDGE)}' alt=''><div><b>Alert at "
            f"{when(alert.time, started_at)}</b><br>relevance {segment.relevance:.2f}, {alert.rise:.1f} above the "
            "stream's recent level (log-odds) · click to watch it again</div></div>")


def answer_html(answer: str, started_at: float) -> str:
    """An answer over the window, each time it names (stream time) a link into the replay buffer."""
    out, last = [], 0
    for start, end, seconds in time_mentions(answer):
        out += [html.escape(answer[last:start]),
                f"<a class='tempo-live-seek' data-live-seconds='{seconds:.2f}' title='Watch again from "
                f"{clock(seconds)}'>{html.escape(answer[start:end])}</a>"]
        last = end
    return "<div class='tempo-live-answer'>" + "".join(out) + html.escape(answer[last:]) + "</div>"


def question_html(question: str) -> str:
    return f"<div class='tempo-question'>{html.escape(question)}</div>"

