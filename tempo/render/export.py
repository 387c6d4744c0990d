"""Runs as files: everything the API returns as JSON (one entry per question), and the per-segment table as CSV."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from ..events import Finished
from .progress import RunProgress

SEGMENT_FIELDS = ("index", "start", "end", "relevance", "tokens")
TURN_FIELDS = ("turn", "question")


def export(runs: Sequence[RunProgress], directory: str | Path, stem: str = "tempo-segments") -> tuple[Path, Path]:
    """Write finished runs about one video as JSON ({"turns": [{question, .../answer's JSON}]}) and their
    per-segment tables as one CSV (turn numbered from 1, question, then the segment's fields)."""
    directory = Path(directory)
    json_path, csv_path = directory / f"{stem}.json", directory / f"{stem}.csv"
    document = {"turns": [{"question": run.question, **finished(run).to_dict()} for run in runs]}
    json_path.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=TURN_FIELDS + SEGMENT_FIELDS)
        writer.writeheader()
        for number, run in enumerate(runs, 1):
            writer.writerows({"turn": number, "question": run.question} |
                             {k: v for k, v in s.to_dict().items() if k in SEGMENT_FIELDS} for s in run.segments)
    return json_path, csv_path


def finished(run: RunProgress) -> Finished:
    if run.finished is None:
        raise ValueError("the run has not finished: there is nothing to export yet")
    return run.finished
