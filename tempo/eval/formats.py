"""The temporal-grounding benchmarks' files: QVHighlights' annotations and submissions (jsonl) and Charades-STA's
annotation lines (`vid start end##sentence`), read into one record and written back out."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import InputError

CLIP_SECONDS = 2.0  # QVHighlights scores saliency per clip of 2 seconds
SALIENCY_MAX = 4  # each annotator scores a clip 0 (very bad) to 4 (very good)


@dataclass(frozen=True)
class Annotation:
    """One query about one video and its truth: the relevant intervals (seconds; QVHighlights' `relevant_windows`),
    and where annotated the relevant clips' saliency, one score per annotator."""

    qid: str
    query: str
    vid: str
    intervals: tuple[tuple[float, float], ...]
    duration: float | None = None  # Charades-STA's lines carry none: it is read from the video
    clip_ids: tuple[int, ...] = ()
    saliency: tuple[tuple[int, ...], ...] = ()  # per clip in clip_ids

    def clip_scores(self, clips: int) -> list[tuple[int, ...]]:
        """The saliency of each of the video's first `clips` clips (zeros where the clip is not relevant)."""
        annotators = len(self.saliency[0]) if self.saliency else 0
        scores = [(0,) * annotators for _ in range(clips)]
        for clip, score in zip(self.clip_ids, self.saliency):
            if clip < clips:
                scores[clip] = score
        return scores


@dataclass(frozen=True)
class Prediction:
    """What a method returns for one query: ranked intervals (start, end, score), best first, and optionally a
    saliency score per 2-second clip."""

    qid: str
    intervals: tuple[tuple[float, float, float], ...]
    saliency: tuple[float, ...] | None = None


def read_annotations(path: str) -> list[Annotation]:
    """A QVHighlights jsonl file (by its `.jsonl` ending) or Charades-STA's lines (any other file)."""
    if not os.path.isfile(path):
        raise InputError(f"No annotation file at {path}.")
    with open(path, encoding="utf-8") as f:
        lines = [(number, line.strip()) for number, line in enumerate(f, 1) if line.strip()]
    if not lines:
        raise InputError(f"{path} holds no annotations.")
    reader = _qvhighlights_line if path.endswith(".jsonl") else _charades_line
    return [reader(path, number, line) for number, line in lines]


def interval(values: Sequence[float | str]) -> tuple[float, float]:
    """A [start, end] pair of finite seconds, the end not before the start; else a ValueError that names it."""
    start, end = float(values[0]), float(values[1])
    if not (math.isfinite(start) and math.isfinite(end)) or end < start:
        raise ValueError(f"the window {list(values)} is not a start and an end of finite seconds, the end not "
                         f"before the start")
    return start, end


def _qvhighlights_line(path: str, number: int, line: str) -> Annotation:
    try:
        record = json.loads(line)
        return Annotation(str(record["qid"]), record["query"], record["vid"],
                          tuple(interval(w) for w in record.get("relevant_windows") or ()),
                          float(record["duration"]) if "duration" in record else None,
                          tuple(int(c) for c in record.get("relevant_clip_ids") or ()),
                          tuple(tuple(int(v) for v in s) for s in record.get("saliency_scores") or ()))
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}, line {number}: not a QVHighlights record (qid, query, vid, duration, "
                         f"relevant_windows, ...): {exc}") from None


def _charades_line(path: str, number: int, line: str) -> Annotation:
    head, separator, sentence = line.partition("##")
    parts = head.split()
    try:
        if not separator or len(parts) != 3:
            raise ValueError("expected 'vid start end##sentence'")
        start, end = interval(parts[1:])
    except ValueError as exc:
        raise InputError(f"{path}, line {number}: not a Charades-STA line (vid start end##sentence): {exc}") \
            from None
    return Annotation(str(number), sentence.strip(), parts[0], ((start, end),))


def write_qvhighlights(annotations: Iterable[Annotation], path: str) -> None:
    """Annotations as QVHighlights' jsonl (duration, clip ids and saliency included where known)."""
    with open(path, "w", encoding="utf-8") as f:
        for a in annotations:
            record: dict = {"qid": a.qid, "query": a.query, "duration": a.duration, "vid": a.vid,
                            "relevant_windows": [list(w) for w in a.intervals]}
            if a.clip_ids:
                record |= {"relevant_clip_ids": list(a.clip_ids), "saliency_scores": [list(s) for s in a.saliency]}
            f.write(json.dumps(record) + "\n")


def write_charades(annotations: Iterable[Annotation], path: str) -> None:
    """Annotations as Charades-STA's lines, one per interval (its format has one a line)."""
    with open(path, "w", encoding="utf-8") as f:
        for a in annotations:
            for start, end in a.intervals:
                f.write(f"{a.vid} {start:.2f} {end:.2f}##{a.query}\n")


def read_predictions(path: str) -> list[Prediction]:
    """A QVHighlights submission: per line qid, pred_relevant_windows ([start, end, score], best first) and
    optionally pred_saliency_scores (one per 2-second clip)."""
    predictions = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                saliency = record.get("pred_saliency_scores")
                predictions.append(Prediction(str(record["qid"]), tuple(
                    (*interval(w), _finite(w[2]) if len(w) > 2 else 1.0) for w in record["pred_relevant_windows"]),
                    None if saliency is None else tuple(_finite(s) for s in saliency)))
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise InputError(f"{path}, line {number}: not a QVHighlights submission record (qid, "
                                 f"pred_relevant_windows, pred_saliency_scores): {exc}") from None
    return predictions


def _finite(value: float) -> float:
    if not math.isfinite(float(value)):
        raise ValueError(f"the score {value} is not a finite number")
    return float(value)


def write_predictions(predictions: Sequence[Prediction], path: str) -> None:
    """Predictions as a QVHighlights submission file, which the benchmark's own evaluation also reads; at full
    precision, since rounding ties clips whose saliency differs in the seventh digit and moves IoUs off thresholds."""
    with open(path, "w", encoding="utf-8") as f:
        for p in predictions:
            record: dict = {"qid": p.qid, "pred_relevant_windows": [list(w) for w in p.intervals]}
            if p.saliency is not None:
                record["pred_saliency_scores"] = list(p.saliency)
            f.write(json.dumps(record) + "\n")
