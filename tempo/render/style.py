"""One look for every figure, page and report: system fonts, one palette, and the two figure layouts (on the page,
and in print) built from them."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

# System fonts only: the page and the reports must render with no internet at all.
FONTS = ("ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "Helvetica Neue", "Arial", "sans-serif")
MONO_FONTS = ("ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace")


def css_fonts(fonts: tuple[str, ...]) -> str:
    """A CSS font-family list, names with spaces quoted."""
    return ", ".join(f"'{font}'" if " " in font else font for font in fonts)


FONT = css_fonts(FONTS)

# The palette: relevance is orange, tokens indigo-to-purple, evidence green, guides slate.
INDIGO, ORANGE, GREEN, RED, PINK, TEAL, OCHRE, SLATE = ("#6366f1", "#f97316", "#16a34a", "#dc2626", "#db2777",
                                                        "#0891b2", "#a16207", "#475569")
GUIDE = "#94a3b8"  # guide lines, pending video, secondary series
MUTED_TEXT, INK = "#64748b", "#334155"
SERIES = (INDIGO, ORANGE, GREEN, PINK, TEAL, OCHRE, SLATE)
RELEVANCE_SCALE = [[0.0, "#ffedd5"], [1.0, "#ea580c"]]
TOKEN_SCALE = [[0.0, "#e0f2fe"], [0.35, "#7dd3fc"], [0.7, INDIGO], [1.0, "#a21caf"]]
SQUEEZED_RGB, KEPT_RGB = (203, 213, 225), (220, 38, 38)  # a segment at k_min (grey) and at k_max (red)


def page_layout(fig: go.Figure, height: int, revision: str, **layout: Any) -> go.Figure:
    """Figures on the page: transparent, the timeline's margins (so stacked figures line up), legend on top;
    `revision` keeps a figure's zoom when it is redrawn."""
    fig.update_layout(
        height=height, margin=dict(l=60, r=60, t=40, b=30), paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)", hovermode="closest", font=dict(family=FONT, size=12, color=MUTED_TEXT),
        hoverlabel=dict(font_family=FONT), uirevision=revision,
        legend=dict(orientation="h", x=0, y=1.02, xanchor="left", yanchor="bottom", bgcolor="rgba(0,0,0,0)"),
        modebar=dict(orientation="v", bgcolor="rgba(0,0,0,0)"),  # down the right margin, off the legend
        **layout)
    return fig


def print_layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    """Figures for files (PNG and HTML): white, a fixed width, a title and the legend above the panels."""
    fig.update_layout(title=dict(text=title, x=0.01, y=0.98, yanchor="top", font=dict(size=15)), height=height,
                      width=960, margin=dict(l=70, r=30, t=130, b=60), paper_bgcolor="white", plot_bgcolor="white",
                      font=dict(family=FONT, size=12, color=INK),
                      legend=dict(orientation="h", x=0, y=1.1, xanchor="left", yanchor="bottom"))
    fig.update_xaxes(gridcolor="rgba(148, 163, 184, 0.25)", zeroline=False)
    fig.update_yaxes(gridcolor="rgba(148, 163, 184, 0.25)", zeroline=False)
    return fig
