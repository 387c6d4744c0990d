"""The page's figures that compare allocations of one compression: two side by side, and each budget of a sweep."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..events import Finished, Segment
from ..times import span
from .style import GREEN, GUIDE, INDIGO, ORANGE, RED, TOKEN_SCALE, page_layout
from .timeline import time_axis

COMPARE_COLORS = (INDIGO, ORANGE)


def comparison_figure(segments: Sequence[Segment], before: Sequence[int], after: Sequence[int], *, duration: float,
                      k_max: int, labels: tuple[str, str], highlight: Sequence[int] = (),
                      start: float = 0.0) -> go.Figure:
    """Two allocations of one compression: tokens per segment side by side, then what each segment gained or
    lost, with the segments that changed most labelled (those not crowding a bigger change)."""
    mids = [(s.start + s.end) / 2 for s in segments]
    widths = [(s.end - s.start) * 0.45 for s in segments]
    changes = [b - a for a, b in zip(before, after)]
    hover = [[span(s.start, s.end), a, b, s.index] for s, a, b in zip(segments, before, after)]
    template = ("<b>%{customdata[0]}</b><br>" + labels[0] + ": %{customdata[1]} tokens<br>" + labels[1] +
                ": %{customdata[2]} tokens<extra></extra>")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.6, 0.4], vertical_spacing=0.08)
    for values, offset, color, label in ((before, -1, COMPARE_COLORS[0], labels[0]),
                                         (after, 0, COMPARE_COLORS[1], labels[1])):
        fig.add_trace(go.Bar(x=mids, y=list(values), width=widths, offset=[offset * w for w in widths],
                             marker=dict(color=color, line=dict(width=0)), name=label, customdata=hover,
                             hovertemplate=template), row=1, col=1)
    fig.add_trace(go.Bar(x=mids, y=changes, width=[w * 2 for w in widths], name="change",
                         marker=dict(color=[GREEN if c > 0 else RED for c in changes], line=dict(width=0)),
                         customdata=hover, hovertemplate=template, showlegend=False), row=2, col=1)
    labelled: list[float] = []
    for i in sorted(highlight, key=lambda i: -abs(changes[i])):  # the biggest first; none on top of another
        if any(abs(mids[i] - x) < (duration - start) * 0.06 for x in labelled):
            continue
        labelled.append(mids[i])
        share = (mids[i] - start) / max(duration - start, 1e-9)  # at an edge, the label leans inwards
        fig.add_annotation(x=mids[i], y=changes[i], text=f"{changes[i]:+d}", showarrow=False, row=2, col=1,
                           xanchor="left" if share < 0.05 else "right" if share > 0.95 else "center",
                           yanchor="bottom" if changes[i] > 0 else "top", font=dict(size=11, color="#334155"))
    time_axis(fig, duration, start)
    fig.update_yaxes(title_text="tokens kept", range=[0, k_max * 1.08], gridcolor="rgba(148, 163, 184, 0.18)",
                     row=1, col=1)
    fig.update_yaxes(title_text="change", zeroline=True, zerolinecolor=GUIDE, showgrid=False, row=2, col=1)
    return page_layout(fig, 380, "comparison", barmode="overlay", bargap=0)


def sweep_heatmap(segments: Sequence[Segment], sweep: Sequence[Finished], *, duration: float,
                 k_max: int, start: float = 0.0) -> go.Figure:
    """Tokens kept per segment (x: video time) at each budget of a sweep (y, smallest at the bottom)."""
    edges = [s.start for s in segments] + [segments[-1].end]
    rows = [f"{finished.budget:,}" for finished in sweep]
    hover = [[[span(s.start, s.end), row, s.index] for s in segments] for row in rows]
    fig = go.Figure(go.Heatmap(
        z=[[s.tokens for s in finished.segments] for finished in sweep], x=edges, y=rows, colorscale=TOKEN_SCALE,
        zmin=0, zmax=k_max, xgap=1, ygap=2, customdata=hover,
        colorbar=dict(title=dict(text="tokens", side="right"), thickness=12, len=0.9),
        hovertemplate="<b>%{customdata[0]}</b><br>budget %{customdata[1]}<br>%{z} tokens kept<extra></extra>"))
    time_axis(fig, duration, start)
    fig.update_yaxes(title_text="budget", type="category")
    return page_layout(fig, 90 + 44 * len(rows), "sweep")
