"""The evaluation's report as text: the README's accuracy table, the margins and the budget sweep, and the answers
naming a time outside the video (`tempo eval synthetic` prints them)."""

from __future__ import annotations

from ..render.figures import fraction_label
from ..synthetic import ALL_FAMILIES


def format_table(report: dict) -> str:
    """The README table: one row per strategy, head vs tail truncation for ATA, then the oracle."""
    families = [f for f in ALL_FAMILIES if f in report["oracle"]["per_family"]]
    header = ["allocation", "accuracy", *families, "localization", "tokens/frame"]
    rows = [("ATA" if name == "ata" else name, r) for name, r in report["strategies"].items()]
    rows += [(f"ATA, {t} truncation", report["truncation"][t]) for t in ("head", "tail")]
    rows.append(("ATA on true relevance (oracle)", report["oracle"]))
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, r in rows:
        cells = [name, f"{r['accuracy']:.1%}", *[_percent(r["per_family"].get(f)) for f in families],
                 "-" if r["localization"] is None else f"{r['localization']:.0%}", f"{r['tokens_per_frame']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_margins(report: dict) -> str:
    """The paired-bootstrap intervals, and the sweep's accuracy and localisation per budget, as text."""
    lines = []
    for key, label in (("ata_minus_uniform", "ATA - uniform"), ("head_minus_tail", "head - tail truncation")):
        m = report["intervals"][key]
        lines.append(f"{label}: {m['difference']:+.1%} accuracy, 95% interval [{m['low']:+.1%}, {m['high']:+.1%}] "
                     f"({m['resamples']:,} resamples of {m['videos']} videos)")
    sweep = report.get("budget_sweep")
    if sweep:
        lines += ["", "| budget (of all memory tokens) | ATA accuracy | uniform accuracy "
                      "| ATA - uniform (95% interval) | ATA localization | uniform localization "
                      "| ATA tokens on the evidence | uniform tokens on the evidence |",
                  "|---|---|---|---|---|---|---|---|"]
        for i, fraction in enumerate(sweep["fractions"]):
            ata, uniform, m = sweep["strategies"]["ata"][i], sweep["strategies"]["uniform"][i], \
                sweep["ata_minus_uniform"][i]
            lines.append(f"| {fraction_label(fraction)} | {ata['accuracy']:.1%} | {uniform['accuracy']:.1%} | "
                         f"{m['difference']:+.1%} [{m['low']:+.1%}, {m['high']:+.1%}] | "
                         f"{_percent(ata['localization'])} | {_percent(uniform['localization'])} | "
                         f"{_percent(ata['evidence_share'])} | {_percent(uniform['evidence_share'])} |")
    return "\n".join(lines)


def format_outside(counts: dict) -> str:
    """One line: how many timed answers named a time outside the video, overall and per family."""
    families = ", ".join(f"{family} {c['answers']} of {c['of']}" for family, c in counts["per_family"].items())
    return (f"ATA's answers naming a time outside the video: {counts['answers']} of {counts['of']}"
            + (f" ({families})" if families else ""))


def format_zoom(zoom: dict) -> str:
    """Zoom against ATA over the whole video, by video length: accuracy, "when" within tolerance, and the
    compressor passes it cost."""
    lines = [f"zoom {zoom['mode']}: {zoom['zoomed']} of {zoom['questions']} questions looked closer "
             f"({zoom['compressor_passes']['zoom']} compressor passes against {zoom['compressor_passes']['no_zoom']}); "
             f"the window held the evidence {_percent(zoom['window_has_evidence'])} of the time",
             "| video length | questions | zoomed | accuracy, no zoom | accuracy, zoom | \"when\", no zoom | "
             "\"when\", zoom |", "|---|---|---|---|---|---|---|"]
    for name, row in zoom["by_length"].items():
        before, after = row["no_zoom"], row["zoom"]
        lines.append(f"| {name} | {row['questions']} | {row['zoomed']} | {_percent(before['accuracy'])} | "
                     f"{_percent(after['accuracy'])} | {_percent(before['per_family'].get('grounding'))} | "
                     f"{_percent(after['per_family'].get('grounding'))} |")
    for key, label in (("zoom_minus_no_zoom", "zoom - no zoom"), ("when_zoom_minus_no_zoom", '"when": zoom - no zoom')):
        if key in zoom:
            m = zoom[key]
            lines.append(f"{label}: {m['difference']:+.1%}, 95% interval [{m['low']:+.1%}, {m['high']:+.1%}]")
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def print_report(report: dict) -> None:
    """The accuracy table, the margins, ATA's answers naming a time outside the video, and how peaked ATA's
    allocations are on needle and global questions."""
    print(format_table(report))
    print(format_margins(report))
    print(format_outside(report["strategies"]["ata"]["outside_video"]))
    if "zoom" in report:
        print(format_zoom(report["zoom"]))
    shape = report["allocation_shape"]
    for family in ("needle", "global"):
        if family in shape:
            s = shape[family]
            print(f"ATA on {family} questions: {s['at_k_min']:.0%} of segments at k_min, "
                  f"{s['near_k_max']:.0%} near k_max, allocation entropy {s['entropy']:.2f}")
