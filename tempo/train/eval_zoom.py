"""Zoom against no zoom in the evaluation: each question answered as the engine answers it with the zoom setting,
beside ATA over the whole video, graded the same way (a "when" within the whole video's tolerance either way), by
video length, with the compressor passes each costs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..config import AllocationConfig, RunConfig, Zoom
from ..engine import answer
from ..model import TempoModel
from ..synthetic import ALL_FAMILIES, Question
from .eval_report import margin

LENGTHS = (("up to 10 min", 0.0, 600.0), ("10-30 min", 600.0, 1800.0), ("30-60 min", 1800.0, 3600.0 + 1e-6))


def zoomed_answer(model: TempoModel, path: str, question: Question, base: RunConfig, allocation: AllocationConfig,
                  mode: str) -> tuple[str, tuple[float, float] | None]:
    """The answer as the engine gives it under zoom `mode` (the whole video's compression replays from the cache)
    and the window it read, None where it answered from the whole video."""
    config = replace(base, allocation=allocation, zoom=mode)
    finished = answer(model, path, question.text, config)
    return finished.answer, finished.zoom.window if finished.zoom else None


def zoom_record(whole: dict, question: Question, graded: dict, window: tuple[float, float] | None,
                duration: float) -> dict:
    """A zoom pass's record: the whole-video record's fields, this pass's grade, and whether its window held the
    evidence (None where it did not zoom)."""
    inside = None if window is None else all(window[0] <= s and e <= window[1] for s, e in question.evidence)
    return whole | graded | {"zoomed": window is not None, "window_has_evidence": inside, "duration": duration}


def zoom_report(zoomed: list[dict], whole: list[dict], mode: str) -> dict:
    """Zoom against ATA over the whole video on the same questions: accuracy per family by video length, "when"
    within tolerance, the answers outside the video, and the compressor passes (one per question, plus one per
    zoomed question)."""
    report: dict = {"mode": mode, "questions": len(zoomed), "zoomed": sum(r["zoomed"] for r in zoomed),
                    "compressor_passes": {"no_zoom": len(whole), "zoom": len(whole) + sum(r["zoomed"] for r in zoomed)},
                    "window_has_evidence": _mean([r["window_has_evidence"] for r in zoomed
                                                  if r["window_has_evidence"] is not None]),
                    "by_length": {}}
    for name, low, high in LENGTHS:
        picked = [i for i, r in enumerate(zoomed) if low <= r["duration"] < high]
        if picked:
            report["by_length"][name] = {
                "questions": len(picked), "zoomed": sum(zoomed[i]["zoomed"] for i in picked),
                "no_zoom": _accuracies([whole[i] for i in picked]), "zoom": _accuracies([zoomed[i] for i in picked])}
    report["zoom_minus_no_zoom"] = margin(zoomed, whole)
    when = [i for i, r in enumerate(zoomed) if r["family"] == "grounding"]
    if when:
        report["when_zoom_minus_no_zoom"] = margin([zoomed[i] for i in when], [whole[i] for i in when])
    return report


def _accuracies(records: list[dict]) -> dict:
    families = [f for f in ALL_FAMILIES if any(r["family"] == f for r in records)]
    return {"accuracy": _mean([r["correct"] for r in records]),
            "per_family": {f: _mean([r["correct"] for r in records if r["family"] == f]) for f in families},
            "outside_video": sum(bool(r.get("outside")) for r in records)}


def _mean(values: list) -> float | None:
    return float(np.mean(values)) if values else None


ZOOMS = tuple(z.value for z in Zoom)
