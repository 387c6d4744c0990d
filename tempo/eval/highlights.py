"""Highlight detection as QVHighlights scores it: per 2-second clip, a predicted saliency against the annotators'
0-4 scores, read at three levels (a clip is relevant when an annotator gave it at least Fair 2, Good 3 or
VeryGood 4). HIT@1 asks whether the most salient predicted clip is relevant to one annotator or more; the highlight
mAP is each annotator's average precision of the clips ranked by predicted saliency, averaged over annotators."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .formats import CLIP_SECONDS, SALIENCY_MAX, Annotation

LEVELS = {"Fair": 2, "Good": 3, "VeryGood": SALIENCY_MAX}  # QVHighlights' names for the least score that counts


def _clips(annotation: Annotation, duration: float, clip_seconds: float) -> np.ndarray:
    """The annotators' scores of every clip of the video, one row per clip (zeros where the clip is not relevant)."""
    return np.array(annotation.clip_scores(int(duration / clip_seconds)), dtype=float).reshape(
        int(duration / clip_seconds), -1)


def hit_at_one(saliency: Sequence[float], annotation: Annotation, duration: float,
               clip_seconds: float = CLIP_SECONDS, level: int = SALIENCY_MAX) -> float:
    """1 when the clip of highest predicted saliency (the first of ties) got `level` or more from an annotator."""
    scores = _clips(annotation, duration, clip_seconds)
    best = int(np.argmax(saliency))
    return float(best < len(scores) and bool(np.any(scores[best] >= level)))


def ranking_precision(relevant: np.ndarray, predicted: np.ndarray) -> float:
    """Average precision of clips ranked by `predicted` against the boolean `relevant`, as the benchmark reads it:
    one term per distinct predicted score that brings in a relevant clip (tied clips enter together), each the best
    precision at that recall or beyond, the terms averaged; 1 when every clip is relevant, 0 when none is."""
    if relevant.all():
        return 1.0
    if not relevant.any():
        return 0.0
    levels = np.unique(predicted)[::-1]
    found = np.array([np.count_nonzero(relevant & (predicted >= s)) for s in levels])
    taken = np.array([np.count_nonzero(predicted >= s) for s in levels])
    best = np.maximum.accumulate((found / taken)[::-1])[::-1]
    return float(np.mean(best[np.diff(found, prepend=0) > 0]))


def highlight_precision(saliency: Sequence[float], annotation: Annotation, duration: float,
                        clip_seconds: float = CLIP_SECONDS, level: int = SALIENCY_MAX) -> float:
    """One query's highlight AP at `level`: the mean over annotators of `ranking_precision`, the predicted saliency
    cut to the video's clips or filled with zeros to them (as the benchmark does)."""
    scores = _clips(annotation, duration, clip_seconds)
    predicted = np.zeros(len(scores))
    given = np.asarray(saliency, dtype=float)[:len(scores)]
    predicted[:len(given)] = given
    return float(np.mean([ranking_precision(scores[:, j] >= level, predicted) for j in range(scores.shape[1])]))


def highlight_scores(pairs: Sequence[tuple[Sequence[float], Annotation, float]]) -> dict[str, tuple[float, float]]:
    """By level name, (highlight mAP, HIT@1) over `pairs` of (predicted saliency, annotation, duration)."""
    return {name: (float(np.mean([highlight_precision(s, a, d, level=level) for s, a, d in pairs])),
                   float(np.mean([hit_at_one(s, a, d, level=level) for s, a, d in pairs])))
            for name, level in LEVELS.items()}
