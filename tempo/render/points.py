"""What each point of the page's timeline carries (`PointData`) for its hover text and the page's click script."""

from __future__ import annotations

from typing import NamedTuple


class PointData(NamedTuple):
    """What every point of the timeline carries (Plotly's customdata), in this order: its span, relevance and tokens
    for the hover text, then its segment and start (seconds), which the page's script reads when it is clicked."""

    span: str
    relevance: str
    tokens: str
    segment: int  # -1: a point of a zoomed answer's whole-video pass, which seeks but picks no segment
    start: float


def point_field(name: str) -> int:
    """Where `name` sits in a point's customdata (the page's script is written with these)."""
    return PointData._fields.index(name)


POINT_HOVER = (f"<b>%{{customdata[{point_field('span')}]}}</b><br>%{{customdata[{point_field('relevance')}]}}"
               f"<br>tokens %{{customdata[{point_field('tokens')}]}}<extra></extra>")


def relevance_text(raw: float | None, scaled: float | None) -> str:
    """A segment's relevance in words for hover text: scaled as ATA reads it, then raw, as the compressor gave it."""
    if raw is None or scaled is None:
        return "relevance n/a (compression off)"
    return f"relevance {scaled:.2f} of the range (raw relevance {raw:.4g})"
