"""The temporal-grounding metrics as QVHighlights' and Charades-STA's papers compute them: recall at one (R1@t),
mean IoU of the top interval, mean average precision over IoU thresholds (mAP@t), and HIT@1 on saliency.

R1@t and mIoU take the top-ranked interval against the true interval it overlaps most (the benchmarks call both
"windows"). mAP@t is, for each query, the area under the interpolated precision-recall curve of its (at most 10)
ranked intervals, one being a true positive when it reaches IoU t with a true interval not matched by a
higher-ranked one; then the mean over queries. HIT@1 asks whether the clip with the highest predicted saliency is
one an annotator scored "very good" (4 of 4), taking the best of the annotators, averaged over queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..synthetic import temporal_iou
from .formats import CLIP_SECONDS, SALIENCY_MAX, Annotation, Prediction

RECALL_IOUS = (0.3, 0.5, 0.7)
AP_IOUS = (0.5, 0.75)
MAX_INTERVALS = 10  # QVHighlights ranks at most this many intervals per query


@dataclass(frozen=True)
class Scores:
    """The metrics over a set of queries, each a fraction (0 to 1); `hit1` None where no saliency is annotated
    (or predicted)."""

    recall: dict[float, float]  # R1@t for t in RECALL_IOUS
    mean_iou: float
    average_precision: dict[float, float]  # mAP@t for t in AP_IOUS
    hit1: float | None
    queries: int
    per_query_iou: list[float] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        return {**{f"R1@{t}": v for t, v in self.recall.items()}, "mIoU": self.mean_iou,
                **{f"mAP@{t}": v for t, v in self.average_precision.items()}, "HIT@1": self.hit1,
                "queries": self.queries}


def best_iou(interval: tuple[float, float], truths: Sequence[tuple[float, float]]) -> float:
    """IoU of `interval` with the true interval it overlaps most (0 when there is none)."""
    return max((temporal_iou(interval, truth) for truth in truths), default=0.0)


def top_iou(prediction: Prediction, annotation: Annotation) -> float:
    """IoU of the top-ranked interval with the truth; 0 when nothing was predicted."""
    if not prediction.intervals:
        return 0.0
    start, end, _ = prediction.intervals[0]
    return best_iou((start, end), annotation.intervals)


def average_precision(intervals: Sequence[tuple[float, float, float]], truths: Sequence[tuple[float, float]],
                      threshold: float) -> float:
    """One query's average precision at IoU `threshold`: intervals ranked by score (stable for ties), each matched
    to the unmatched true interval it overlaps most, precision made non-increasing, summed over the recall steps."""
    if not truths or not intervals:
        return 0.0
    ranked = sorted(intervals[:MAX_INTERVALS], key=lambda w: -w[2])  # the first ten as submitted, as QVHighlights
    matched: set[int] = set()
    hits = []
    for start, end, _ in ranked:
        overlaps = sorted(((temporal_iou((start, end), truth), i) for i, truth in enumerate(truths)),
                          key=lambda pair: -pair[0])
        hit = False
        for iou, i in overlaps:
            if iou < threshold:
                break
            if i not in matched:
                matched.add(i)
                hit = True
                break
        hits.append(hit)
    true_positives = np.cumsum(hits)
    recall = true_positives / len(truths)
    precision = true_positives / np.arange(1, len(hits) + 1)
    recall = np.concatenate([[0.0], recall, [1.0]])
    precision = np.concatenate([[0.0], precision, [0.0]])
    precision = np.maximum.accumulate(precision[::-1])[::-1]  # the best precision at this recall or beyond
    steps = np.flatnonzero(recall[1:] != recall[:-1]) + 1
    return float(np.sum((recall[steps] - recall[steps - 1]) * precision[steps]))


def hit_at_one(saliency: Sequence[float], annotation: Annotation, duration: float,
               clip_seconds: float = CLIP_SECONDS) -> float:
    """1 when the clip of highest predicted saliency (the first of ties) was scored very good by an annotator."""
    clips = int(duration / clip_seconds)
    scores = annotation.clip_scores(clips)
    best = int(np.argmax(saliency))
    return float(best < len(scores) and any(score >= SALIENCY_MAX for score in scores[best]))


def score(predictions: Sequence[Prediction], annotations: Sequence[Annotation],
          durations: dict[str, float] | None = None) -> Scores:
    """The metrics of `predictions` against the annotations with the same qid; `durations` (by qid) stand in for
    annotations without one, for HIT@1."""
    by_qid = {p.qid: p for p in predictions}
    missing = [a.qid for a in annotations if a.qid not in by_qid]
    if missing:
        raise ValueError(f"{len(missing)} queries have no prediction (first: qid {missing[0]})")
    if not annotations:
        raise ValueError("no annotations to score")
    ious = [top_iou(by_qid[a.qid], a) for a in annotations]
    recall = {t: float(np.mean([iou >= t for iou in ious])) for t in RECALL_IOUS}
    precision = {t: float(np.mean([average_precision(by_qid[a.qid].intervals, a.intervals, t) for a in annotations]))
                 for t in AP_IOUS}
    hits = []
    for a in annotations:
        saliency = by_qid[a.qid].saliency
        duration = a.duration if a.duration is not None else (durations or {}).get(a.qid)
        if a.saliency and saliency and duration:
            hits.append(hit_at_one(saliency, a, duration))
    return Scores(recall, float(np.mean(ious)), precision, float(np.mean(hits)) if hits else None,
                  len(annotations), ious)
