"""`tempo figures results.jsonl --out DIR`: the paper's allocation figures for a batch's results.

1. tokens per segment: the share of all segments of all jobs that kept each number of tokens (the paper: strongly
   right-skewed, most segments at k_min, a thin tail near k_max, stable across budgets), split by question
   family or by budget when the jobs differ in those;
2. budget utilisation: each job's average tokens per segment against its video's limit, min(k_max, B / segments),
   and the dataset's average capacity, (jobs x B) / sum of segments, one panel per budget;
3. allocation shape: each job's share of segments left at k_min against the normalised entropy of its
   allocation (`analysis.allocation_shape`), which sets needle questions (a few segments kept) apart from global
   ones (spread out).

Each is written as PNG and as HTML that opens offline, with the numbers behind all three in figures.json.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import defaultdict
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from ..analysis import allocation_shape
from ..errors import InputError
from .style import GREEN, GUIDE, INDIGO, INK, RED, SERIES, print_layout

KEPT, LIMIT, CAPACITY = RED, GUIDE, GREEN
NAMES = ("tokens_per_segment", "budget_utilisation", "allocation_shape")


def read_results(path: str | os.PathLike) -> list[dict]:
    """The answered jobs of a batch's results (lines with an error are left out)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"Cannot read {path}: {exc.strerror or exc}.") from None
    results = []
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            raise InputError(f"{Path(path).name} line {number} is not JSON; is it a batch's results?") from None
        if isinstance(entry, dict) and "segments" in entry and "answer" in entry:
            results.append(entry)
    if not results:
        raise InputError(f"{Path(path).name} holds no answered jobs.")
    return results


def k_min_of(line: dict) -> int:
    """A batch result line's k_min: from its settings, else the fewest tokens a segment kept."""
    return int(line.get("settings", {}).get("k_min", min((s["tokens"] for s in line["segments"]), default=0)))


def split_key(results: list[dict], split: str) -> str | None:
    """What to split the histogram by: `split` if given, else family when jobs carry one, else budget when the
    budgets differ, else nothing."""
    if split != "auto":
        return None if split == "none" else split
    if all("family" in r for r in results):
        return "family"
    return "budget" if len({r["budget"] for r in results}) > 1 else None


def numbers(results: list[dict], split: str = "auto") -> dict:
    """Everything the three figures show, computed from the results alone."""
    k_max = max(r["k_max"] for r in results)
    by = split_key(results, split)
    groups: dict[str, list[int]] = defaultdict(list)
    for r in results:
        groups[str(r.get(by, "all")) if by else "all"] += [s["tokens"] for s in r["segments"]]
    histogram = {group: {"segments": len(tokens),
                         "share": [sum(k == t for k in tokens) / len(tokens) for t in range(k_max + 1)]}
                 for group, tokens in sorted(groups.items())}

    utilisation = {}
    for budget in sorted({r["budget"] for r in results}):
        jobs = [r for r in results if r["budget"] == budget]
        segments = sum(len(r["segments"]) for r in jobs)
        per_job = [{"id": r.get("id"), "video": r.get("video"), "segments": len(r["segments"]),
                    "tokens_per_segment": r["tokens_used"] / len(r["segments"]),
                    "limit": min(r["k_max"], budget / len(r["segments"]))} for r in jobs]
        used = sorted(job["tokens_per_segment"] for job in per_job)
        quartiles = statistics.quantiles(used, n=4, method="inclusive") if len(used) > 1 else used * 3
        utilisation[str(budget)] = {"capacity": len(jobs) * budget / segments, "jobs": per_job,
                                    "quartiles": quartiles}

    shapes = [{"id": r.get("id"), "family": r.get("family"),
               **allocation_shape([s["tokens"] for s in r["segments"]], k_min_of(r), r["k_max"])} for r in results]
    return {"jobs": len(results), "k_max": k_max, "split_by": by, "histogram": histogram,
            "utilisation": utilisation, "allocation_shape": shapes}


def histogram_figure(figures: dict) -> go.Figure:
    fig = go.Figure()
    for (group, data), color in zip(figures["histogram"].items(), SERIES * 8):
        name = group if figures["split_by"] is None else f"{figures['split_by']} {group}"
        fig.add_trace(go.Bar(x=list(range(figures["k_max"] + 1)), y=[100 * s for s in data["share"]],
                             name=f"{name} ({data['segments']:,} segments)", marker_color=color, opacity=0.85,
                             hovertemplate="%{x} tokens: %{y:.1f}% of segments<extra></extra>"))
    fig.update_layout(barmode="group", bargap=0.15)
    fig.update_xaxes(title_text="tokens kept by a segment")
    fig.update_yaxes(title_text="share of segments (%)")
    return print_layout(fig, "Tokens per segment", 420)


def utilisation_figure(figures: dict) -> go.Figure:
    budgets = list(figures["utilisation"])
    fig = make_subplots(rows=1, cols=len(budgets), shared_yaxes=True,
                        subplot_titles=[f"budget {int(b):,}" for b in budgets])
    for column, budget in enumerate(budgets, 1):
        data = figures["utilisation"][budget]
        jobs = sorted(data["jobs"], key=lambda job: job["segments"])
        segments = [job["segments"] for job in jobs]
        fig.add_trace(go.Scatter(x=segments, y=[job["limit"] for job in jobs], mode="lines", name="per-video limit",
                                 line=dict(color=LIMIT, width=2, shape="hv"), showlegend=column == 1,
                                 hovertemplate="%{x} segments: limit %{y:.1f}<extra></extra>"), row=1, col=column)
        fig.add_trace(go.Scatter(x=segments, y=[job["tokens_per_segment"] for job in jobs], mode="markers",
                                 name="average tokens per segment (a job)", marker=dict(color=KEPT, size=7,
                                                                                        opacity=0.75),
                                 text=[str(job["id"]) for job in jobs], showlegend=column == 1,
                                 hovertemplate="%{text}: %{y:.1f} tokens per segment, %{x} segments<extra></extra>"),
                      row=1, col=column)
        fig.add_hline(y=data["capacity"], line=dict(color=CAPACITY, dash="dash", width=2), row=1, col=column,
                      annotation_text=f"average capacity {data['capacity']:.1f}", annotation_position="top right",
                      annotation_font=dict(color=CAPACITY, size=11))
        low, middle, high = data["quartiles"]
        fig.add_trace(go.Scatter(x=[max(segments) * 1.08] * 3, y=[low, middle, high], mode="lines+markers",
                                 marker=dict(color=LIMIT, symbol="line-ew-open", size=14), line=dict(color=LIMIT),
                                 name="quartiles", showlegend=column == 1,
                                 hovertemplate="quartile %{y:.1f}<extra></extra>"), row=1, col=column)
        fig.update_xaxes(title_text="segments in the video", rangemode="tozero", row=1, col=column)
    fig.update_yaxes(title_text="tokens per segment", row=1, col=1)
    return print_layout(fig, "Budget utilisation", 440)


def shape_figure(figures: dict) -> go.Figure:
    fig = go.Figure()
    families = sorted({str(job["family"]) for job in figures["allocation_shape"]})
    for family, color in zip(families, SERIES * 8):
        jobs = [job for job in figures["allocation_shape"] if str(job["family"]) == family]
        fig.add_trace(go.Scatter(x=[100 * job["at_k_min"] for job in jobs], y=[job["entropy"] for job in jobs],
                                 mode="markers", name=family if family != "None" else "jobs",
                                 marker=dict(color=color, size=9, opacity=0.8), text=[str(j["id"]) for j in jobs],
                                 hovertemplate="%{text}: %{x:.0f}% at k_min, entropy %{y:.2f}<extra></extra>"))
    fig.update_xaxes(title_text="segments left at k_min (%)", range=[-3, 103])
    fig.update_yaxes(title_text="allocation entropy (normalised)", range=[0, 1.03])
    return print_layout(fig, "Allocation shape per job", 440)


SWEEP_COLORS = {"ata": INDIGO, "uniform": GUIDE}


def fraction_label(fraction: float) -> str:
    """A sweep's budget as a share of all memory tokens: 1/32 ... 1/2, 1."""
    return "1" if fraction >= 1 else f"1/{round(1 / fraction)}"


def accuracy_sweep_figure(report: dict) -> go.Figure:
    """An evaluation's budget sweep: accuracy, ATA's accuracy margin over uniform allocation with its 95%
    paired-bootstrap interval, localisation, and the share of the kept tokens that landed on the evidence."""
    sweep = report["budget_sweep"]
    labels = [fraction_label(f) for f in sweep["fractions"]]
    panels = {(1, 1): ("accuracy", "accuracy (%)"), (2, 1): ("localization", "localisation (%)"),
              (2, 2): ("evidence_share", "tokens on the evidence (% of those kept)")}
    fig = make_subplots(rows=2, cols=2, horizontal_spacing=0.1, vertical_spacing=0.2,
                        subplot_titles=[panels[1, 1][1], "ATA - uniform accuracy (points, 95% interval)",
                                        panels[2, 1][1], panels[2, 2][1]])
    for strategy, color in SWEEP_COLORS.items():
        rows = sweep["strategies"][strategy]
        name = "ATA" if strategy == "ata" else strategy
        for (row, column), (key, _) in panels.items():
            fig.add_trace(go.Scatter(x=labels, y=[None if r[key] is None else 100 * r[key] for r in rows],
                                     mode="lines+markers", name=name, legendgroup=strategy,
                                     showlegend=(row, column) == (1, 1),
                                     line=dict(color=color, width=3 if strategy == "ata" else 2), marker=dict(size=8),
                                     hovertemplate=f"{name}, budget %{{x}}: %{{y:.1f}}%<extra></extra>"),
                          row=row, col=column)
    margins = sweep["ata_minus_uniform"]
    fig.add_trace(go.Bar(x=labels, y=[100 * m["difference"] for m in margins], name="ATA - uniform",
                         marker_color=[SWEEP_COLORS["ata"] if m["low"] > 0 else "#c7d2fe" for m in margins],
                         error_y=dict(type="data", symmetric=False, color=INK,
                                      array=[100 * (m["high"] - m["difference"]) for m in margins],
                                      arrayminus=[100 * (m["difference"] - m["low"]) for m in margins]),
                         hovertemplate="budget %{x}: %{y:+.1f} points<extra></extra>", showlegend=False),
                  row=1, col=2)
    fig.add_hline(y=0, line=dict(color=INK, width=1), row=1, col=2)
    fig.update_xaxes(title_text="budget, share of all memory tokens", type="category")
    for row, column in panels:
        fig.update_yaxes(rangemode="tozero", row=row, col=column)
    settings = report["settings"]
    title = (f"Budget sweep: {settings['model']}, {settings['videos']} unseen videos, k_min {sweep['k_min']}, "
             f"k_max {settings['k_max']} (dark bars: interval above 0)")
    return print_layout(fig, title, 760)


def write_png(fig: go.Figure, path: str | os.PathLike, html_done: str) -> None:
    """Draw `fig` to a PNG with kaleido, or say what is missing (`html_done`: what was written already)."""
    try:
        fig.write_image(path, scale=2)
    except Exception as exc:  # kaleido needs Chrome or Chromium to draw PNGs
        raise InputError(f"{html_done}, but the PNG could not be drawn: {str(exc).splitlines()[0]} (kaleido draws "
                         "PNGs with Chrome or Chromium; install one, e.g. `apt install chromium`).") from None


def write_sweep_figure(report: dict, path: str | os.PathLike) -> None:
    """The budget sweep as a PNG at `path`, with the same figure as offline HTML beside it."""
    fig = accuracy_sweep_figure(report)
    html = Path(path).with_suffix(".html")
    pio.write_html(fig, html, include_plotlyjs=True, full_html=True, config={"displaylogo": False})
    write_png(fig, path, f"The budget sweep is in {html}")


def write_figures(results: list[dict], directory: str | os.PathLike, split: str = "auto") -> dict:
    """Write the three figures (PNG and offline HTML) and figures.json into `directory`; returns the numbers."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    figures = numbers(results, split)
    (directory / "figures.json").write_text(json.dumps(figures, indent=1), encoding="utf-8")
    drawn = dict(zip(NAMES, (histogram_figure(figures), utilisation_figure(figures), shape_figure(figures))))
    for name, fig in drawn.items():
        pio.write_html(fig, directory / f"{name}.html", include_plotlyjs=True, full_html=True,
                       config={"displaylogo": False})
    for name, fig in drawn.items():
        write_png(fig, directory / f"{name}.png", f"The HTML figures and figures.json are in {directory}")
    return figures
