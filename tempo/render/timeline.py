"""The page's timeline of a run: relevance per segment while the video streams in, then the tokens each segment
kept, on the time axis every page figure shares."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, overload

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..allocation import scaled_relevance
from ..events import Segment, VideoProbed, Zoomed
from ..moments import Moment, shown
from ..times import clock, span, time_mentions
from .points import POINT_HOVER, PointData, relevance_text
from .progress import RunProgress
from .style import GREEN, GUIDE, INDIGO, ORANGE, RELEVANCE_SCALE, TOKEN_SCALE, page_layout

TICK_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400)


def time_ticks(duration: float, target: int = 8, start: float = 0.0) -> tuple[list[float], list[str]]:
    """Round video times (1 s ... 4 h apart) from `start` to `duration` for at most about `target` ticks,
    labelled m:ss."""
    step = next((s for s in TICK_STEPS if (duration - start) / s <= target), TICK_STEPS[-1])
    values: list[float] = [i * step for i in range(math.ceil(start / step - 1e-9), int(duration // step) + 1)]
    return values, [clock(v) for v in values]


def time_axis(fig: go.Figure, duration: float, start: float = 0.0, **where: Any) -> None:
    """x in video time from `start` to `duration`, ticked at round m:ss times (`where`: the subplot, if not all)."""
    ticks, labels = time_ticks(duration, start=start)
    fig.update_xaxes(range=[start, duration], tickvals=ticks, ticktext=labels, showgrid=False, zeroline=False,
                     showline=False, ticks="", **where)


@overload
def axis_of(video: VideoProbed) -> tuple[float, float]: ...
@overload
def axis_of(video: VideoProbed | None) -> tuple[float, float] | None: ...
def axis_of(video: VideoProbed | None) -> tuple[float, float] | None:
    """The stretch of video a figure's time axis spans: the range sampled, or the whole video."""
    if video is None:
        return None
    return video.window or (0.0, video.duration)


def window_of(video: VideoProbed | None) -> float | None:
    """The whole video's length when only a window of it was sampled (what `within` draws), else None."""
    return video.duration if video is not None and video.window else None


EVIDENCE_MIN_SHARE = 0.006  # an evidence band is at least this share of the axis wide (4 px on a 700 px plot)


def _guide(fig: go.Figure, y: float, text: str, dash: str, left: bool = False) -> None:
    """A labelled horizontal line on the tokens axis (labelled at the right end, or the left one)."""
    fig.add_shape(type="line", xref="x domain", x0=0, x1=1, yref="y2", y0=y, y1=y,
                  line=dict(color=GUIDE, width=1, dash=dash), layer="below")
    fig.add_annotation(xref="x domain", x=0 if left else 1, yref="y2", y=y, text=text, showarrow=False,
                       xanchor="left" if left else "right", yanchor="bottom", font=dict(size=10, color=GUIDE))


def _evidence(fig: go.Figure, evidence: Sequence[tuple[float, float]], axis: float) -> None:
    """Where the answer is known to be, shaded green (never thinner than EVIDENCE_MIN_SHARE of the axis), named in
    the legend so that no label sits on the plot."""
    least = axis * EVIDENCE_MIN_SHARE
    for start, end in evidence:
        middle, half = (start + end) / 2, max(end - start, least) / 2
        fig.add_vrect(x0=middle - half, x1=middle + half, fillcolor=GREEN, opacity=0.18, line_width=0,
                      layer="below", row="all", col=1)
    if evidence:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="evidence",
                                 marker=dict(symbol="square", size=10, color=GREEN, opacity=0.35),
                                 hoverinfo="skip"), row=1, col=1)


MOMENT_FILL = "rgba(99, 102, 241, 0.13)"  # the moments' shade: the palette's indigo, light enough for the curve


def _moments(fig: go.Figure, moments: Sequence[Moment], start: float, end: float, zoomed: bool) -> None:
    """The run's moments shown, shaded over the relevance with their rank on top where the axis (`start` to
    `end`) shows them, and on the whole video's row where an answer zoomed; named in the legend."""
    least = (end - start) * EVIDENCE_MIN_SHARE
    for worded in shown(moments):
        moment = worded.moment
        middle, half = (moment.start + moment.end) / 2, max(moment.end - moment.start, least) / 2
        for row in (1, 3) if zoomed else (1,):
            fig.add_vrect(x0=middle - half, x1=middle + half, fillcolor=MOMENT_FILL, line_width=0, layer="below",
                          row=row, col=1)
        if not start <= middle <= end:
            continue
        fig.add_annotation(x=middle, xref="x", yref="y domain", y=1, text=f"<b>{worded.rank}</b>",
                           showarrow=False, yanchor="bottom", font=dict(size=11, color=INDIGO), hovertext=worded.label)
    if moments:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="moments",
                                 marker=dict(symbol="square", size=10, color=MOMENT_FILL.replace("0.13", "0.45")),
                                 hoverinfo="skip"), row=1, col=1)


def _answer_marks(fig: go.Figure, times: Sequence[float]) -> None:
    """The times the answer names, as dashed lines labelled at their foot."""
    for seconds in times:
        fig.add_vline(x=seconds, line=dict(color=INDIGO, width=1.5, dash="dash"), row=1, col=1)
        fig.add_annotation(x=seconds, xref="x", yref="y domain", y=0, text=f"answer {clock(seconds)}",
                           showarrow=False, xanchor="left", yanchor="bottom", font=dict(size=10, color=INDIGO))


def _timeline(segments: Sequence[Segment], tokens: Sequence[int] | None = None, *,
              duration: float | None = None, num_segments: int | None = None, budget: int | None = None,
              k_min: int | None = None, k_max: int | None = None, note: str | None = None,
              evidence: Sequence[tuple[float, float]] = (), answer_times: Sequence[float] = (),
              moments: Sequence[Moment] = (), start: float = 0.0, within: float | None = None,
              zoom: Zoomed | None = None) -> go.Figure:
    """Relevance curve over bars of tokens kept (once allocated), a heatmap strip below, x in video time.

    Pass the segments compressed so far and `num_segments` / `duration` while streaming: the rest of the
    timeline is greyed out as pending. `note` replaces the empty-state message. `evidence` shades where the
    answer is known to be (the examples' ground truth); `answer_times` marks the times the answer names; `moments`
    (the finished run's, best first) are shaded and numbered. The
    relevance axis is [0, 1] from the first segment on; the time axis runs from `start` to `duration`; `within` (the
    whole video's length, for a window of it) draws where the window sits in the video above the plot; `zoom` (the
    first pass of an answer that looked closer) draws the whole video's relevance above it instead, the window
    marked. Every point carries its `PointData`, which the page reads when a segment is clicked.
    """
    done = len(segments)
    duration = duration or (segments[-1].end if segments else 60.0)
    raw = [s.relevance for s in segments]
    has_relevance = bool(segments) and all(r is not None for r in raw)
    relevance = scaled_relevance(raw)  # what ATA reads: a tiny model's raw relevance can all sit near zero
    token_text = [f"{k} / {k_max}" if k_max else str(k) for k in tokens] if tokens else ["pending"] * done
    points = [list(PointData(span(s.start, s.end), relevance_text(r, scaled), t, s.index, s.start))
              for s, r, scaled, t in zip(segments, raw, relevance, token_text)]

    fig = _grid(zoom is not None)
    if tokens:
        _token_bars(fig, segments, tokens, points, budget, k_min, k_max)
    if has_relevance:
        _relevance_curve(fig, segments, relevance, points)
    _strip(fig, segments, list(tokens) if tokens else relevance if has_relevance else None, bool(tokens), k_max,
           points)

    _evidence(fig, evidence, duration - start)
    _moments(fig, moments, start, duration, zoom is not None)
    _answer_marks(fig, answer_times)
    total = num_segments or done
    if done < total:  # the part of the video still being compressed
        fig.add_vrect(x0=segments[-1].end if segments else start, x1=duration, fillcolor=GUIDE, opacity=0.12,
                      line_width=0, layer="below", row="all", col=1)
    if not segments:
        fig.add_annotation(xref="paper", yref="paper", x=0.5, y=0.5, xanchor="center", yanchor="middle",
                           text=note or "relevance per segment will appear here", showarrow=False,
                           font=dict(size=13, color=GUIDE))
    _timeline_axes(fig, duration, start, tokens, k_max)
    if zoom:
        _whole_video(fig, zoom)
    elif within:
        _window_in_video(fig, start, duration, within)
    return page_layout(fig, ZOOMED_HEIGHT if zoom else 430, "timeline", showlegend=bool(segments),
                       barmode="overlay", bargap=0)


def _grid(zoomed: bool) -> go.Figure:
    """The figure's rows: the timeline over its heat strip, and where an answer zoomed a third row for the whole
    video, on its own time axis (placed on top by `_whole_video`)."""
    if not zoomed:
        return make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.84, 0.16], vertical_spacing=0.05,
                             specs=[[{"secondary_y": True}], [{}]])
    fig = make_subplots(rows=3, cols=1, specs=[[{"secondary_y": True}], [{}], [{}]])
    fig.update_xaxes(matches="x", row=2, col=1)
    fig.update_xaxes(showticklabels=False, row=1, col=1)
    return fig


def _strip(fig: go.Figure, segments: Sequence[Segment], strip: Sequence[float | None] | None, tokens: bool,
           k_max: int | None, points: list) -> None:
    """The heat strip under the timeline: tokens kept once allocated (`tokens`), else the scaled relevance."""
    if not strip:
        return
    edges = [s.start for s in segments] + [segments[-1].end]
    fig.add_trace(go.Heatmap(z=[strip], x=edges, y=[0], colorscale=TOKEN_SCALE if tokens else RELEVANCE_SCALE,
                             zmin=0 if tokens else None, zmax=(k_max or None) if tokens else None,
                             showscale=False, customdata=[points], hovertemplate=POINT_HOVER, xgap=1,
                             name="tokens" if tokens else "relevance"),
                  row=2, col=1)


ZOOMED_HEIGHT = 560
# Where each row sits when an answer zoomed (paper fractions, bottom up): the heat strip, the window's timeline,
# then the whole video above them. Drawn as rows 2, 1 and 3, so the single-pass figure's axes keep their names.
ZOOMED_DOMAINS = {"strip": (0.0, 0.09), "window": (0.14, 0.68), "whole": (0.80, 0.97)}


def _whole_video(fig: go.Figure, zoom: Zoomed) -> None:
    """The first pass above the window's timeline: the whole video's relevance (scaled as ATA reads it), the window
    looked at closer shaded and named; its points seek the preview but pick no segment of the window's pass."""
    whole = zoom.segments
    scaled = scaled_relevance([s.relevance for s in whole])
    points = [list(PointData(span(s.start, s.end), relevance_text(s.relevance, r), f"{s.tokens} (whole video)", -1,
                             s.start)) for s, r in zip(whole, scaled)]
    fig.add_trace(go.Scatter(x=[(s.start + s.end) / 2 for s in whole], y=scaled, mode="lines", name="whole video",
                             line=dict(color=ORANGE, width=1.5), fill="tozeroy", fillcolor="rgba(249, 115, 22, 0.12)",
                             customdata=points, hovertemplate=POINT_HOVER, showlegend=False), row=3, col=1)
    fig.add_vrect(x0=zoom.window[0], x1=zoom.window[1], fillcolor=INDIGO, opacity=0.16, line_width=0, row=3, col=1)
    low, high = ZOOMED_DOMAINS["whole"]
    fig.add_annotation(xref="paper", yref="paper", x=0, y=high + 0.005, xanchor="left", yanchor="bottom",
                       showarrow=False, font=dict(size=11, color=INDIGO),
                       text=f"the whole video's relevance · looked closer at {span(*zoom.window)}, as {zoom.reason}")
    whole_end = zoom.video.window[1] if zoom.video.window else zoom.video.duration
    whole_start = zoom.video.window[0] if zoom.video.window else 0.0
    time_axis(fig, whole_end, whole_start, row=3, col=1)
    fig.update_yaxes(range=[0, 1.05], visible=False, fixedrange=True, domain=[low, high], row=3, col=1)
    fig.update_yaxes(domain=list(ZOOMED_DOMAINS["window"]), row=1, col=1)
    fig.update_yaxes(domain=list(ZOOMED_DOMAINS["strip"]), row=2, col=1)


def _window_in_video(fig: go.Figure, start: float, end: float, video: float) -> None:
    """A thin track above the plot for the whole video, the window the axis spans marked on it."""
    track = dict(type="rect", xref="paper", yref="paper", y0=1.045, y1=1.065, line_width=0, layer="above")
    fig.add_shape(**track, x0=0, x1=1, fillcolor="rgba(148, 163, 184, 0.35)")
    fig.add_shape(**track, x0=start / video, x1=max(end, start) / video, fillcolor=INDIGO)
    fig.add_annotation(xref="paper", yref="paper", x=0, y=1.07, xanchor="left", yanchor="bottom", showarrow=False,
                       text=f"a closer look: {span(start, end)} of the video's {clock(video)}",
                       font=dict(size=11, color=INDIGO))


def _token_bars(fig: go.Figure, segments: Sequence[Segment], tokens: Sequence[int], points: list[list],
                budget: int | None, k_min: int | None, k_max: int | None) -> None:
    """Tokens kept per segment as bars on the right axis, with the k_min, k_max and even-share guides."""
    mids = [(s.start + s.end) / 2 for s in segments]
    fig.add_trace(go.Bar(x=mids, y=list(tokens), width=[(s.end - s.start) * 0.9 for s in segments],
                         name="tokens kept", marker=dict(color=list(tokens), colorscale=TOKEN_SCALE, cmin=0,
                                                         cmax=k_max or max(tokens) or 1, line=dict(width=0)),
                         customdata=points, hovertemplate=POINT_HOVER),
                  row=1, col=1, secondary_y=True)
    if k_max:
        _guide(fig, k_max, f"k_max {k_max}", "dash")
    if k_min:
        _guide(fig, k_min, f"k_min {k_min}", "dash")
    share = budget / len(tokens) if budget else None
    # The even share only means something when it lands inside the axis; otherwise the budget never binds.
    if share is not None and share <= (k_max or max(tokens)) * 1.05:
        _guide(fig, share, f"budget ÷ segments {share:.0f}", "dot", left=True)


def _relevance_curve(fig: go.Figure, segments: Sequence[Segment], relevance: Sequence[float | None],
                     points: list[list]) -> None:
    """Relevance per segment as a filled curve on the left axis (dots while they do not touch)."""
    mids = [(s.start + s.end) / 2 for s in segments]
    markers = "lines+markers" if len(segments) <= 160 else "lines"  # dots stop helping once they touch
    fig.add_trace(go.Scatter(x=mids, y=relevance, name="relevance (scaled)", mode=markers,
                             line=dict(color=ORANGE, width=2.5, shape="spline", smoothing=0.6),
                             marker=dict(size=5, color=ORANGE), fill="tozeroy",
                             fillcolor="rgba(249, 115, 22, 0.07)", customdata=points, hovertemplate=POINT_HOVER),
                  row=1, col=1, secondary_y=False)


def _timeline_axes(fig: go.Figure, duration: float, start: float, tokens: Sequence[int] | None,
                   k_max: int | None) -> None:
    """Time along x; relevance on the left, scaled as ATA reads it (least relevant 0, most 1); tokens kept (0 to
    k_max) on the right, once allocated."""
    time_axis(fig, duration, start)
    fig.update_yaxes(title_text="relevance, scaled", title_font=dict(color=ORANGE), range=[0, 1.04],
                     tickmode="array", tickvals=[0, 0.5, 1], ticktext=["least", "0.5", "most"],
                     gridcolor="rgba(148, 163, 184, 0.18)", zeroline=False, row=1, col=1, secondary_y=False)
    top = k_max or max(tokens or [1]) or 1
    fig.update_yaxes(title_text="tokens kept" if tokens else None, range=[0, top * 1.12], tickmode="array",
                     tickvals=sorted({round(top * f) for f in (0, 0.25, 0.5, 0.75, 1)}), showgrid=False,
                     zeroline=False, visible=bool(tokens), row=1, col=1, secondary_y=True)
    fig.update_yaxes(visible=False, fixedrange=True, row=2, col=1)


def timeline_figure(run: RunProgress, evidence: Sequence[tuple[float, float]] = ()) -> go.Figure:
    """The timeline of one run, live (what is compressed so far, the rest pending) or finished, from its record:
    relevance, then the tokens each segment kept, the answer's times and moments, and a zoomed answer's first pass
    above it."""
    allocation, probed = run.allocation, run.probed
    start, end = axis_of(probed) or (run.zoom.window if run.zoom else (0.0, None))
    return _timeline(
        run.segments, [s.tokens or 0 for s in run.segments] if allocation else None, start=start, zoom=run.zoom,
        duration=end, num_segments=run.num_segments or None, within=window_of(probed),
        budget=allocation.budget if allocation else None, k_min=allocation.k_min if allocation else None,
        k_max=allocation.k_max if allocation else None,
        note="waiting for the first segment…" if probed else None, evidence=evidence,
        moments=run.finished.moments if run.finished else (),
        answer_times=named_times(run.finished.answer, probed.duration) if run.finished and probed else ())


def named_times(answer: str, duration: float) -> list[float]:
    """The times in the video an answer names (see text.time_mentions), in order, each once."""
    return sorted({seconds for *_, seconds in time_mentions(answer) if 0 <= seconds <= duration})
