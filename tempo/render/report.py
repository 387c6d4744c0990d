"""HTML that stands on its own: a run's report as one file that opens offline, and the filmstrip of segments.

Images are data URIs and the report embeds Plotly's JavaScript, so nothing is fetched from anywhere. `write_report`
is the one recipe every caller uses (page, API, CLI, batch): fold the run's events into a `RunProgress`, then write.
"""

from __future__ import annotations

import base64
import functools
import html
import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from PIL import Image
from plotly.offline import get_plotlyjs

from ..events import Segment
from ..settings import summary
from ..times import clock, span
from .gallery import highlights
from .progress import RunProgress, headlines, key_frames
from .style import FONT, GUIDE, KEPT_RGB, MUTED_TEXT, SQUEEZED_RGB
from .text import answer_text, timings_text
from .timeline import timeline_figure

FILMSTRIP_EDGE = 112  # long edge of a filmstrip thumbnail
FILMSTRIP_CELLS = 128  # past this many segments, neighbours share a cell (no sideways scrolling)
REPORT_FRAME_EDGE = 320


@dataclass(frozen=True)
class Truth:
    """What a known example should give: the expected answer and where in the video it is."""

    expected: str
    evidence: tuple[tuple[float, float], ...]
    correct: bool


def data_uri(frame: np.ndarray, long_edge: int) -> str:
    """An RGB frame as a JPEG data URI, shrunk to `long_edge` (for display only)."""
    image = Image.fromarray(frame)
    image.thumbnail((long_edge, long_edge))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=82)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def token_colour(tokens: int, k_min: int, k_max: int) -> str:
    """Grey at k_min (squeezed) to red at k_max (kept), as in the paper's filmstrip."""
    share = 0.0 if k_max <= k_min else min(1.0, max(0.0, (tokens - k_min) / (k_max - k_min)))
    r, g, b = (round(low + (high - low) * share) for low, high in zip(SQUEEZED_RGB, KEPT_RGB))
    return f"rgb({r}, {g}, {b})"


def filmstrip_html(segments: Sequence[Segment], k_min: int, k_max: int, max_cells: int = FILMSTRIP_CELLS) -> str:
    """Key frames in time order under the timeline, bordered by the tokens kept: one per segment, or past
    `max_cells` one per group of neighbours, showing the group's segment that kept the most. Each carries that
    segment's index (`data-segment`) for the page's segment inspector and the time of the frame it shows
    (`data-seconds`; the group's start where that is not known)."""
    size = max(1, math.ceil(len(segments) / max_cells))
    cells = []
    for first in range(0, len(segments), size):
        group = segments[first:first + size]
        shown = max(group, key=lambda s: (s.tokens or 0, s.relevance or 0.0, -s.index))
        if shown.frame is None:
            continue
        assert shown.tokens is not None  # a filmstrip is of allocated segments
        start, end = group[0].start, group[-1].end
        seconds = start if shown.frame_time is None else shown.frame_time
        title = f"{span(start, end)} · {shown.tokens} tokens"
        if size > 1:
            title += f" (most of {len(group)} segments)"
        cells.append(f"<button class='tempo-film' data-segment='{shown.index}' data-seconds='{seconds:.2f}' "
                     f"title='{html.escape(title)}' style='border-color:{token_colour(shown.tokens, k_min, k_max)}'>"
                     f"<img src='{data_uri(shown.frame, FILMSTRIP_EDGE)}' alt='segment {shown.index}'>"
                     f"<span>{clock(seconds)}</span></button>")
    return f"<div class='tempo-filmstrip'>{''.join(cells)}</div>"


REPORT_STYLE = """
body { font-family: FONT; color: #1e293b; max-width: 1100px; margin: 2rem auto; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } h1 span { font-weight: 400; color: MUTED; font-size: 1rem; }
.question { font-size: 1.15rem; margin: 1rem 0 0.3rem; } .answer { font-size: 1.15rem; background: #eef2ff;
            border-radius: 8px; padding: 0.6rem 0.9rem; white-space: pre-wrap; }
.truth { margin: 0.4rem 0; } .truth.right { color: #15803d; } .truth.wrong { color: #b91c1c; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.9rem; }
td, th { padding: 0.2rem 0.8rem 0.2rem 0; text-align: left; } th { color: MUTED; font-weight: 500; }
.frames { display: grid; grid-template-columns: repeat(auto-fill, minmax(220px, 1fr)); gap: 10px; }
figure { margin: 0; } figure img { width: 100%; border-radius: 6px; } figcaption { font-size: 0.8rem; color: MUTED; }
section + section { border-top: 1px solid #e2e8f0; margin-top: 2rem; }
footer { margin-top: 2rem; font-size: 0.8rem; color: GUIDE; }
.moments { display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: 10px; padding: 0;
           list-style: none; } .moments b { color: #4f46e5; margin-right: 0.3rem; }
""".replace("FONT", FONT).replace("MUTED", MUTED_TEXT).replace("GUIDE", GUIDE)


@dataclass(frozen=True)
class Asked:
    """One question's finished run in a report; `truth` for a shipped example."""

    run: RunProgress
    truth: Truth | None = None
    figure: go.Figure | None = None  # its timeline when the caller has drawn it already (else drawn here)

    @property
    def question(self) -> str:
        return self.run.question

    @functools.cached_property
    def section(self) -> str:
        """Its part of a report, made once (a conversation's report is written again after every turn)."""
        return report_section(self)


def report_section(asked: Asked) -> str:
    """One question's part of a report: question, answer, numbers, the interactive timeline (Plotly's script is
    the page's), key frames, settings and timings."""
    finished = asked.run.finished
    if finished is None:
        raise ValueError("the run has not finished: there is nothing to report yet")
    truth = asked.truth
    figure = asked.figure or timeline_figure(asked.run, truth.evidence if truth else ())
    timeline = pio.to_html(figure, include_plotlyjs=False, full_html=False, config={"displaylogo": False})
    settings = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                       for k, v in summary(finished.config, finished.budget).items())
    numbers_html = "".join(f"<tr><th>{html.escape(row.value)}</th><td>{html.escape(row.label)}</td></tr>"
                           for row in headlines(finished))
    timings = timings_text(finished.timings, finished.alongside)
    frames = "".join(f"<figure><img src='{data_uri(frame, REPORT_FRAME_EDGE)}' alt='{html.escape(caption)}'>"
                     f"<figcaption>{html.escape(caption)}</figcaption></figure>"
                     for frame, caption in key_frames(asked.run.segments))
    truth_html = ""
    moments = moments_html(asked.run)
    if truth is not None:
        verdict = "right" if truth.correct else "wrong"
        truth_html = (f"<p class='truth {verdict}'>Expected: {html.escape(truth.expected)} · the answer is "
                      f"{verdict}. The evidence is shaded green on the timeline.</p>")
    return (f"<p class='question'><b>Q:</b> {html.escape(asked.question)}</p>"
            f"<div class='answer'>{html.escape(answer_text(finished.answer))}</div>"
            f"{truth_html}<table>{numbers_html}</table>{timeline}{moments}"
            f"<h3>Key frames: the segments that kept the most tokens</h3><div class='frames'>{frames}</div>"
            f"<h3>Settings</h3><table>{settings}</table><p>Timings: {html.escape(timings)}</p>")


def moments_html(run: RunProgress) -> str:
    """The run's moments as `shown` picks them, best first, each with its key frame where the run kept one and its
    facts as `shown` words them."""
    finished = run.finished
    if finished is None or not finished.moments:
        return ""
    segments = (list(run.zoom.segments) if run.zoom else []) + run.segments  # a zoomed run's both passes
    cells = []
    for highlight in highlights(finished.moments, segments):
        worded = highlight.shown
        image = (f"<img src='{data_uri(highlight.frame, REPORT_FRAME_EDGE)}' alt='moment {worded.rank}'>"
                 if highlight.frame is not None else "")
        cells.append(f"<li><figure>{image}<figcaption><b>{worded.rank}</b>{html.escape(worded.words)}"
                     "</figcaption></figure></li>")
    return ("<h3>Moments: where the relevance stands out, best first (shaded on the timeline)</h3>"
            f"<ol class='moments'>{''.join(cells)}</ol>")


@functools.cache
def plotly_js() -> str:
    """Plotly's script, inlined once in every report so that it opens offline."""
    return get_plotlyjs()


def html_report(asked: Sequence[Asked], *, model: str) -> str:
    """One self-contained HTML page for finished runs on one video (a conversation's turns, or one question). It
    opens offline (Plotly inlined once, frames as data URIs)."""
    if not asked:
        raise ValueError("there is nothing to report: no question was answered")
    video = asked[0].run.finished.video.path.rsplit("/", 1)[-1] if asked[0].run.finished else ""
    numbered = len(asked) > 1
    body = "".join(f"<section>{f'<h2>Question {i + 1}</h2>' if numbered else ''}{a.section}</section>"
                   for i, a in enumerate(asked))
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>Tempo · {html.escape(asked[-1].question[:80])}</title><style>{REPORT_STYLE}</style>"
            f"<script>{plotly_js()}</script></head><body>"
            f"<h1>Tempo <span>{html.escape(video)} · {html.escape(model)}</span></h1>{body}"
            "<footer>Made with Tempo: query-aware compression for long videos.</footer></body></html>")


def write_report(asked: Asked | Sequence[Asked], path: str | os.PathLike, *, model: str) -> Path:
    """`html_report` of one question or several, written to `path` (UTF-8); returns the path."""
    path = Path(path)
    path.write_text(html_report([asked] if isinstance(asked, Asked) else list(asked), model=model),
                    encoding="utf-8")
    return path
