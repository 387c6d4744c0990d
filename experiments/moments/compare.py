"""Candidate rules for moments, compared on what Tempo-Tiny's compressor saw on the tuning seeds.

    tempo eval export --seed 200000 --n 16 --out DIR
    python -m tempo.eval.grounding --annotations DIR/annotations.jsonl --videos DIR --no-answer \
        --observations experiments/moments/tuning-observations.jsonl
    PYTHONPATH=. python experiments/moments/compare.py --annotations DIR/annotations.jsonl \
        --observations experiments/moments/tuning-observations.jsonl --json experiments/moments/comparison.json

Each rule turns a sequence of segments (start, end, relevance) into ranked, non-overlapping moments; each is scored
on the whole video's segments (relevance alone) and with zoom's window (two ways of using it). The rule library
`tempo.moments` ships is checked to give the same moments as its candidate here."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import asdict, dataclass

import numpy as np

from tempo.eval.formats import CLIP_SECONDS, Prediction, read_annotations
from tempo.eval.grounding import load_observations
from tempo.eval.highlights import hit_at_one
from tempo.eval.metrics import MAX_INTERVALS, Scores, score
from tempo.eval.observe import Observation, clip_saliency
from tempo.moments import find_moments

Span = tuple[float, float, float]  # start, end, relevance


@dataclass(frozen=True)
class Rule:
    space: str  # "raw" relevance or its "logit"
    detect: str  # "mad": median + k * MAD of the video's values; "range": min + k * (max - min) (the placeholder)
    k: float
    extent: str  # "run": the run above the detection level; "peak": the peak segment; "cross": where the curve
    # through the segments' middles crosses baseline + alpha * (peak - baseline), baseline the median
    alpha: float
    gap: int  # runs this many segments apart or fewer are one
    score: str  # "peak" or "mean" relevance of the run
    zoom: str  # "replace": the window's moments replace the whole video's inside it; "combined": one sequence

    def name(self) -> str:
        extent = f"cross {self.alpha}" if self.extent == "cross" else self.extent
        return (f"{self.space}, {self.detect} k={self.k}, {extent}, gap {self.gap}, score {self.score}, "
                f"zoom {self.zoom}")


EXTENTS = (("run", 0.0), ("peak", 0.0)) + tuple(("cross", a) for a in (0.5, 0.6, 0.7, 0.8, 0.9))
PLACEHOLDER = Rule("raw", "range", 0.5, "run", 0.0, 0, "peak", "replace")


def values(spans: list[Span], space: str) -> np.ndarray:
    r = np.clip(np.array([s[2] for s in spans], dtype=float), 1e-6, 1 - 1e-6)
    return np.log(r / (1 - r)) if space == "logit" else r


def level(v: np.ndarray, rule: Rule) -> float:
    if rule.detect == "range":
        return float(v.min() + rule.k * (v.max() - v.min()))
    median = float(np.median(v))
    return median + rule.k * float(np.median(np.abs(v - median)))


def moments(spans: list[Span], rule: Rule) -> list[Span]:
    """Greedy: the highest segment above the level not yet in a moment starts one, over its run (and, for the
    crossing extent, the segments whose middles its edges take in); a moment's edges stop at earlier moments."""
    if not spans:
        return []
    v = values(spans, rule.space)
    threshold = level(v, rule)
    above = v >= threshold - 1e-12 if rule.detect == "range" else v > threshold  # the placeholder: "reaches"
    baseline = float(np.median(v))
    used = np.zeros(len(spans), dtype=bool)
    found: list[Span] = []
    for p in sorted(range(len(spans)), key=lambda i: (-v[i], i)):
        if used[p] or not above[p]:
            continue
        low = high = p
        while True:  # the run, bridging up to `gap` segments below the level
            step = next((j for j in range(low - 1, max(-1, low - 2 - rule.gap), -1)
                         if above[j] and not used[j:low].any() and _chained(spans, j, low)), None)
            if step is None:
                break
            low = step
        while True:
            step = next((j for j in range(high + 1, min(len(spans), high + 2 + rule.gap))
                         if above[j] and not used[high + 1:j + 1].any() and _chained(spans, high, j)), None)
            if step is None:
                break
            high = step
        if rule.extent == "run":
            start, end = spans[low][0], spans[high][1]
        elif rule.extent == "peak":
            start, end = spans[p][0], spans[p][1]
        else:
            start, end = _crossing(spans, v, used, p, baseline + rule.alpha * (v[p] - baseline))
        for i in range(len(spans)):
            if low <= i <= high or start <= (spans[i][0] + spans[i][1]) / 2 <= end:
                used[i] = True
        for other in found:
            if start < other[1] <= end:
                start = other[1]
            if start <= other[0] < end:
                end = other[0]
        run = [spans[i][2] for i in range(low, high + 1)]
        found.append((start, end, spans[p][2] if rule.score == "peak" else float(np.mean(run))))
    return sorted(found, key=lambda m: (-m[2], m[0]))


def _chained(spans: list[Span], left: int, right: int) -> bool:
    """Segments left..right follow one another with no hole in time."""
    return all(abs(spans[i + 1][0] - spans[i][1]) < 1e-3 for i in range(left, right))


def _crossing(spans: list[Span], v: np.ndarray, used: np.ndarray, p: int, at: float) -> tuple[float, float]:
    middle = [(s[0] + s[1]) / 2 for s in spans]
    low = high = p
    while low > 0 and not used[low - 1] and v[low - 1] >= at and _chained(spans, low - 1, low):
        low -= 1
    while high < len(spans) - 1 and not used[high + 1] and v[high + 1] >= at and _chained(spans, high, high + 1):
        high += 1
    start, end = spans[low][0], spans[high][1]
    if low > 0 and not used[low - 1] and _chained(spans, low - 1, low):
        start = middle[low - 1] + (at - v[low - 1]) / (v[low] - v[low - 1]) * (middle[low] - middle[low - 1])
    if high < len(spans) - 1 and not used[high + 1] and _chained(spans, high, high + 1):
        end = middle[high + 1] - (at - v[high + 1]) / (v[high] - v[high + 1]) * (middle[high + 1] - middle[high])
    return start, end


def with_zoom(whole: list[Span], window: list[Span], rule: Rule) -> list[Span]:
    if not window:
        return moments(whole, rule)
    low, high = window[0][0], window[-1][1]
    if rule.zoom == "combined":
        outside = [s for s in whole if s[1] <= low or s[0] >= high]
        return moments(sorted(outside + window), rule)
    kept = [m for m in moments(whole, rule) if m[1] <= low or m[0] >= high]
    return sorted(kept + moments(window, rule), key=lambda m: (-m[2], m[0]))


def spans_of(segments) -> list[Span]:
    return [(s.start, s.end, s.relevance) for s in segments]


def row_metrics(scores: Scores) -> dict:
    """The metrics this comparison ranks by, as fractions (the brief's percent keys came later)."""
    return {**{f"R1@{t}": v for t, v in scores.recall.items()}, "mIoU": scores.mean_iou,
            "mAP@0.5": scores.average_precision[0.5], "mAP@0.75": scores.average_precision[0.75],
            "HIT@1": scores.hit1, "queries": scores.queries}


def evaluate(rule: Rule, observations: list[Observation], annotations) -> dict:
    rows = {}
    for row in ("relevance", "zoom"):
        predicted = []
        for o in observations:
            whole, window = spans_of(o.segments), spans_of(o.window) if row == "zoom" else []
            ranked = with_zoom(whole, window, rule)[:MAX_INTERVALS]
            predicted.append(Prediction(o.qid, tuple(ranked)))  # HIT@1: for the shipped rule only (slow in Python)
        rows[row] = row_metrics(score(predicted, annotations, {o.qid: o.duration for o in observations}))
    return rows


def candidates() -> list[Rule]:
    rules = [PLACEHOLDER]
    for space, (detect, k), extent, gap, value, zoom in itertools.product(
            ("raw", "logit"), (("mad", 1.0), ("mad", 2.0), ("mad", 3.0), ("mad", 5.0), ("range", 0.5)),
            EXTENTS, (0, 1), ("peak", "mean"),
            ("replace", "combined")):
        rules.append(Rule(space, detect, k, extent[0], extent[1], gap, value, zoom))
    return list(dict.fromkeys(rules))


def key(result: dict) -> tuple:
    """Ranked by R1@0.5 over both rows, then mIoU, mAP@0.5 and mAP@0.75."""
    rows = result["rows"].values()
    return tuple(-sum(r[m] for r in rows) for m in ("R1@0.5", "mIoU", "mAP@0.5", "mAP@0.75"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotations", required=True)
    parser.add_argument("--observations", required=True)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args(argv)
    seen = load_observations(args.observations)
    annotations = [a for a in read_annotations(args.annotations) if a.qid in seen]
    observations = [seen[a.qid] for a in annotations]
    results = [{"name": rule.name(), "rule": asdict(rule),
                "rows": {row: {m: v if m == "queries" or v is None else round(v, 4) for m, v in metrics.items()}
                         for row, metrics in evaluate(rule, observations, annotations).items()}}
               for rule in candidates()]
    results.sort(key=key)
    shipped = evaluate_shipped(observations, annotations)
    readings = saliency_readings(observations, annotations)
    print("HIT@1 by saliency reading:", json.dumps(readings))
    for r in results[:15] + [r for r in results if r["rule"] == asdict(PLACEHOLDER)]:
        print(f"{r['name']:<70}" + "  ".join(f"{row}: R1@0.5 {100 * m['R1@0.5']:.1f} mIoU {100 * m['mIoU']:.1f} "
                                             f"mAP@0.5 {100 * m['mAP@0.5']:.1f}" for row, m in r["rows"].items()))
    print("shipped (tempo.moments):", json.dumps(shipped))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"queries": len(annotations), "videos": len({a.vid for a in annotations}),
                       "qids": [a.qid for a in annotations],
                       "ranked_by": "R1@0.5 over both rows, then mIoU, mAP@0.5, mAP@0.75",
                       "shipped": shipped, "hit1_by_saliency_reading": readings,
                       "placeholder": PLACEHOLDER.name(), "candidates": results}, f)
    return 0


def evaluate_shipped(observations: list[Observation], annotations) -> dict:
    """The library's rule on the same observations (its rows must equal its candidate's)."""
    rows = {}
    for row in ("relevance", "zoom"):
        predicted = []
        for o in observations:
            window = o.window if row == "zoom" else ()
            found = find_moments(o.segments, window, count=MAX_INTERVALS)
            predicted.append(Prediction(o.qid, tuple((m.start, m.end, m.score) for m in found),
                                        clip_saliency(found, o.segments, window, o.duration)))
        rows[row] = row_metrics(score(predicted, annotations, {o.qid: o.duration for o in observations}))
    return rows


def saliency_readings(observations: list[Observation], annotations) -> dict:
    """HIT@1 of three ways to read saliency per 2-second clip: the segment's relevance, relevance linear between
    the segments' middles, and the shipped one (the moments' middles first: `clip_saliency`)."""
    by_qid = {a.qid: a for a in annotations}
    hits: dict[str, dict[str, list[float]]] = {}
    for o in observations:
        for row in ("relevance", "zoom"):
            window = o.window if row == "zoom" else ()
            points = [s for s in o.segments if not (window and window[0].start <= s.start and s.end <= window[-1].end)]
            points = sorted(points + list(window), key=lambda s: s.start)
            middles = (np.arange(int(o.duration / CLIP_SECONDS)) + 0.5) * CLIP_SECONDS
            holder = [min(points, key=lambda s: max(s.start - t, 0.0, t - s.end)).relevance for t in middles]
            linear = np.interp(middles, [(s.start + s.end) / 2 for s in points], [s.relevance for s in points])
            shipped = clip_saliency(find_moments(o.segments, window, count=MAX_INTERVALS), o.segments, window,
                                    o.duration)
            for name, saliency in (("segment", holder), ("linear", list(linear)), ("moments first", shipped)):
                hits.setdefault(name, {}).setdefault(row, []).append(
                    hit_at_one(saliency, by_qid[o.qid], o.duration))
    return {name: {row: float(np.mean(v)) for row, v in rows.items()} for name, rows in hits.items()}


if __name__ == "__main__":
    sys.exit(main())
