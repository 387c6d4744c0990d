"""The evaluation's JSON report: what a run collects (`Tally`), each row's accuracy, localisation, evidence share and
tokens per frame, the answers naming a time outside the video, and paired-bootstrap margins between rows."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import allocation
from ..synthetic import ALL_FAMILIES, TIMED_FAMILIES

STRATEGIES = tuple(s for s in allocation.STRATEGIES if s != "off")  # the ones held to the budget
SWEEP_FRACTIONS = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)  # of all memory tokens (num_segments * k_max)
SWEEP_STRATEGIES = ("ata", "uniform")
BOOTSTRAP_RESAMPLES = 10_000


@dataclass
class Tally:
    """What an evaluation collects: each (strategy, truncation)'s records, the budget sweep's, ATA's allocation
    shapes by family, and ATA's answers as examples. A pass over a closer window (zoom) gets keys of its own in
    `outcomes`, so the whole-video rows stay as they are."""

    outcomes: dict[tuple[str, str], list[dict]] = field(default_factory=lambda: defaultdict(list))
    swept: dict[tuple[str, float], list[dict]] = field(default_factory=lambda: defaultdict(list))
    shapes: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    examples: list[dict] = field(default_factory=list)


def summary(records: list[dict]) -> dict:
    """Accuracy, localisation, evidence share and tokens per frame over `records`, accuracy and localisation per
    family, and the answers naming a time outside the video."""
    localized = [r["localized"] for r in records if r["localized"] is not None]
    shares = [r["evidence_share"] for r in records if r["evidence_share"] is not None]
    asked = [family for family in ALL_FAMILIES if any(r["family"] == family for r in records)]
    return {"accuracy": float(np.mean([r["correct"] for r in records])),
            "localization": float(np.mean(localized)) if localized else None,
            "evidence_share": float(np.mean(shares)) if shares else None,
            "tokens_per_frame": float(np.mean([r["tokens_per_frame"] for r in records])),
            "per_family": {family: float(np.mean([r["correct"] for r in records if r["family"] == family]))
                           for family in asked},
            "questions": len(records),
            "localization_per_family": {
                family: float(np.mean([r["localized"] for r in records if r["family"] == family]))
                for family in asked if family != "global"},
            "outside_video": outside_video(records)}


def outside_video(records: list[dict]) -> dict:
    """How many answers of the timed families name a time outside the video, of how many, overall and per family
    ('At 114.0 seconds.' in a 2-minute video)."""
    timed = [r for r in records if r.get("outside") is not None]
    return {"answers": sum(r["outside"] for r in timed), "of": len(timed),
            "per_family": {family: {"answers": sum(r["outside"] for r in timed if r["family"] == family),
                                    "of": sum(r["family"] == family for r in timed)}
                           for family in TIMED_FAMILIES if any(r["family"] == family for r in timed)}}


def paired_bootstrap(first: Sequence[bool], second: Sequence[bool], videos: Sequence[int],
                     resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> dict[str, float]:
    """Mean of first - second (paired per question) with a 95% percentile interval. Whole videos are resampled,
    since the questions about one video share its compression and are not independent."""
    difference = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    groups = np.unique(np.asarray(videos), return_inverse=True)[1]
    sums, counts = np.bincount(groups, weights=difference), np.bincount(groups).astype(float)
    drawn = np.random.default_rng(seed).integers(0, len(sums), size=(resamples, len(sums)))
    means = sums[drawn].sum(axis=1) / counts[drawn].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"difference": float(difference.mean()), "low": float(low), "high": float(high),
            "resamples": resamples, "videos": len(sums)}


def margin(first: list[dict], second: list[dict]) -> dict[str, float]:
    """First's accuracy minus second's on the same questions, with its paired-bootstrap interval."""
    return paired_bootstrap([r["correct"] for r in first], [r["correct"] for r in second],
                            [r["video"] for r in first])


def report_of(tally: Tally, settings: dict, k_min: int, sweep: bool) -> dict:
    """The JSON-ready report of a finished tally."""
    outcomes = tally.outcomes
    report = {
        "strategies": {strategy: summary(outcomes[(strategy, "head")]) for strategy in STRATEGIES},
        "truncation": {truncation: summary(outcomes[("ata", truncation)]) for truncation in ("head", "tail")},
        "intervals": {"ata_minus_uniform": margin(outcomes[("ata", "head")], outcomes[("uniform", "head")]),
                      "head_minus_tail": margin(outcomes[("ata", "head")], outcomes[("ata", "tail")])},
        "oracle": summary(outcomes[("oracle", "head")]),
        "allocation_shape": {family: {key: float(np.mean([s[key] for s in values])) for key in values[0]}
                             for family, values in tally.shapes.items()},
        "settings": settings,
        "examples": tally.examples,
    }
    if sweep:
        swept = tally.swept
        report["budget_sweep"] = {
            "fractions": list(SWEEP_FRACTIONS), "k_min": k_min,
            "strategies": {strategy: [summary(swept[(strategy, f)]) for f in SWEEP_FRACTIONS]
                           for strategy in SWEEP_STRATEGIES},
            "ata_minus_uniform": [margin(swept[("ata", f)], swept[("uniform", f)]) for f in SWEEP_FRACTIONS],
        }
    return report
