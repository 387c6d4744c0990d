"""The temporal-grounding metrics as QVHighlights' evaluation and Charades-STA's papers compute them: recall at one
(R1@t), mean IoU of the top interval, mean average precision over IoU thresholds (mAP@t; their mean over 0.5:0.95
is QVHighlights' headline, also by length of the true interval), and the highlight metrics (`highlights`).

R1@t and mIoU take the top interval as submitted against the true interval it overlaps most (the benchmarks call
both "windows"). mAP@t is, for each query, the area under the interpolated precision-recall curve of its first 10
intervals ranked by score, one being a hit when it reaches IoU t with a true interval no higher-ranked one took;
then the mean over queries. Two protocols say which queries count (`PROTOCOLS`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..synthetic import temporal_iou
from .formats import CLIP_SECONDS, Annotation, Prediction
from .highlights import LEVELS, highlight_scores

RECALL_IOUS = (0.3, 0.5, 0.7)  # QVHighlights reports 0.5 and 0.7; Charades-STA papers add 0.3
AP_IOUS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)  # QVHighlights' 0.5:0.95
MAX_INTERVALS = 10  # QVHighlights ranks at most this many intervals per query
LENGTHS = {"short": (0.0, 10.0), "middle": (10.0, 30.0), "long": (30.0, 150.0)}  # (low, high]: true interval, s
PROTOCOLS = ("ours", "official")  # ours: every query counts; official: those QVHighlights' functions can read


@dataclass(frozen=True)
class Scores:
    """The metrics over a set of queries, each a fraction (0 to 1); None where no query could be scored for it (no
    true interval of that length, no saliency annotated or predicted)."""

    recall: dict[float, float]  # R1@t for t in RECALL_IOUS
    mean_iou: float
    average_precision: dict[float, float]  # mAP@t for t in AP_IOUS
    by_length: dict[str, float | None]  # mAP averaged over AP_IOUS, on the true intervals of each of LENGTHS
    highlights: dict[str, tuple[float, float]] | None  # per level of LEVELS: (highlight mAP, HIT@1)
    queries: int
    refused: dict[str, str] = field(default_factory=dict)  # qid: why QVHighlights' own command would stop on it
    per_query_iou: dict[str, float] = field(default_factory=dict, repr=False)

    @property
    def full_precision(self) -> float:
        """The headline: mAP averaged over the IoU thresholds 0.5:0.95."""
        return float(np.mean(list(self.average_precision.values())))

    @property
    def hit1(self) -> float | None:
        """HIT@1 at the VeryGood level, the one the benchmark's tables quote."""
        return None if self.highlights is None else self.highlights["VeryGood"][1]

    def brief(self) -> dict[str, float | None]:
        """QVHighlights' brief by its own keys, in percent to two decimals as its command writes them, with
        Charades-STA's R1@0.3 and mIoU beside them."""
        values: dict[str, float | None] = {
            "MR-full-mAP": self.full_precision, "MR-full-mAP@0.5": self.average_precision[0.5],
            "MR-full-mAP@0.75": self.average_precision[0.75], "MR-full-R1@0.5": self.recall[0.5],
            "MR-full-R1@0.7": self.recall[0.7], **{f"MR-{name}-mAP": v for name, v in self.by_length.items()}}
        for name in LEVELS:
            pair = self.highlights[name] if self.highlights else (None, None)
            values |= {f"HL-min-{name}-mAP": pair[0], f"HL-min-{name}-Hit1": pair[1]}
        values |= {"MR-full-R1@0.3": self.recall[0.3], "MR-full-mIoU": self.mean_iou}
        return {key: None if v is None else round(100 * v, 2) for key, v in values.items()}

    def to_dict(self) -> dict:
        return {**self.brief(), "queries": self.queries, "refused": self.refused}


def overlap_iou(first: tuple[float, float], second: tuple[float, float]) -> float:
    """IoU as QVHighlights' mAP computes it: the overlap over the sum of the lengths less the overlap. Equal to
    `temporal_iou` in exact arithmetic, the last bit can differ, which decides a hit exactly on a threshold."""
    inter = max(0.0, min(first[1], second[1]) - max(first[0], second[0]))
    union = (first[1] - first[0]) + (second[1] - second[0]) - inter
    return inter / union if union > 0 else 0.0


def top_iou(prediction: Prediction, annotation: Annotation) -> float:
    """The top interval's IoU as QVHighlights' R1 takes it: with the true interval `overlap_iou` ranks first (the
    first of ties), measured over the span of the two (`temporal_iou`); 0 when either side has none."""
    if not prediction.intervals or not annotation.intervals:
        return 0.0
    top = prediction.intervals[0][:2]
    closest = max(annotation.intervals, key=lambda truth: overlap_iou(top, truth))
    return temporal_iou(top, closest)


def average_precisions(intervals: Sequence[tuple[float, float, float]], truths: Sequence[tuple[float, float]],
                       thresholds: Sequence[float] = AP_IOUS) -> list[float]:
    """One query's average precision at each IoU threshold: its first ten intervals ranked by score (stable for
    ties), each matched to the untaken true interval it overlaps most (the last of ties, as the benchmark's
    reversed sort takes it), precision made non-increasing in recall and summed over the recall steps."""
    if not truths or not intervals:
        return [0.0] * len(thresholds)
    ranked = sorted(intervals[:MAX_INTERVALS], key=lambda w: -w[2])  # the first ten as submitted, then by score
    overlaps = []
    for start, end, _ in ranked:
        ious = [overlap_iou((start, end), truth) for truth in truths]
        overlaps.append(sorted(((iou, i) for i, iou in enumerate(ious)), reverse=True))
    return [_precision(_hits(overlaps, threshold), len(truths)) for threshold in thresholds]


def _hits(overlaps: list[list[tuple[float, int]]], threshold: float) -> list[bool]:
    """Whether each ranked interval takes a true interval at `threshold` (its overlaps best first)."""
    taken: set[int] = set()
    hits = []
    for ranking in overlaps:
        hit = False
        for iou, i in ranking:
            if iou < threshold:
                break
            if i not in taken:
                taken.add(i)
                hit = True
                break
        hits.append(hit)
    return hits


def _precision(hits: list[bool], truths: int) -> float:
    """The area under the interpolated precision-recall curve of ranked hits against `truths` true intervals."""
    true_positives = np.cumsum(hits)
    recall = np.concatenate([[0.0], true_positives / truths, [1.0]])
    precision = np.concatenate([[0.0], true_positives / np.arange(1, len(hits) + 1), [0.0]])
    precision = np.maximum.accumulate(precision[::-1])[::-1]  # the best precision at this recall or beyond
    steps = np.flatnonzero(recall[1:] != recall[:-1]) + 1
    return float(np.sum((recall[steps] - recall[steps - 1]) * precision[steps]))


def average_precision(intervals: Sequence[tuple[float, float, float]], truths: Sequence[tuple[float, float]],
                      threshold: float) -> float:
    """One query's average precision at one IoU threshold (`average_precisions`)."""
    return average_precisions(intervals, truths, (threshold,))[0]


def refusals(predictions: dict[str, Prediction], annotations: Sequence[Annotation]) -> dict[str, str]:
    """By qid, why QVHighlights' own command would stop on a query (it expects every part of every record)."""
    salient = any(predictions[a.qid].saliency is not None for a in annotations)
    why = {}
    for a in annotations:
        p = predictions[a.qid]
        if not p.intervals:
            why[a.qid] = "no predicted interval (its R1 stops with an IndexError)"
        elif not a.intervals:
            why[a.qid] = "no true interval (its R1 stops with an IndexError)"
        elif salient and p.saliency is None:
            why[a.qid] = ("no pred_saliency_scores where other queries have them (a KeyError, or no highlight "
                          "metrics at all when the file's first query is the one without)")
    return why


def _by_length(pairs: Sequence[tuple[Prediction, Annotation]]) -> dict[str, float | None]:
    """mAP over 0.5:0.95 on the true intervals of each length range, over the queries that have one there."""
    out: dict[str, float | None] = {}
    for name, (low, high) in LENGTHS.items():
        kept = [(p, [t for t in a.intervals if low < t[1] - t[0] <= high]) for p, a in pairs]
        aps = [np.mean(average_precisions(p.intervals, truths)) for p, truths in kept if truths]
        out[name] = float(np.mean(aps)) if aps else None
    return out


def score(predictions: Sequence[Prediction], annotations: Sequence[Annotation],
          durations: dict[str, float] | None = None, protocol: str = "ours") -> Scores:
    """The metrics of `predictions` against the annotations with the same qid; `durations` (by qid) stand in for
    annotations without one, for the highlights. Under `ours` a query with no interval is a miss; under
    `official` the interval metrics average over the queries that have one (and a true one). Highlights: over the
    queries with saliency both annotated and predicted, under both."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}: choose one of {', '.join(PROTOCOLS)}")
    by_qid = {p.qid: p for p in predictions}
    missing = [a.qid for a in annotations if a.qid not in by_qid]
    if missing:
        raise ValueError(f"{len(missing)} queries have no prediction (first: qid {missing[0]})")
    if not annotations:
        raise ValueError("no annotations to score")
    counted = [a for a in annotations if protocol == "ours" or (by_qid[a.qid].intervals and a.intervals)]
    if not counted:
        raise ValueError("no query has both a predicted and a true interval, so the official protocol has "
                         "nothing to score")
    pairs = [(by_qid[a.qid], a) for a in counted]
    ious = {a.qid: top_iou(p, a) for p, a in pairs}
    recall = {t: float(np.mean([iou >= t for iou in ious.values()])) for t in RECALL_IOUS}
    precisions = np.array([average_precisions(p.intervals, a.intervals) for p, a in pairs])
    salient = []
    for a in annotations:
        saliency = by_qid[a.qid].saliency
        duration = a.duration if a.duration is not None else (durations or {}).get(a.qid)
        if a.saliency and saliency and duration and duration >= CLIP_SECONDS:
            salient.append((saliency, a, duration))
    return Scores(recall, float(np.mean(list(ious.values()))), dict(zip(AP_IOUS, map(float, precisions.mean(0)))),
                  _by_length(pairs), highlight_scores(salient) if salient else None, len(counted),
                  refusals(by_qid, annotations), ious)
