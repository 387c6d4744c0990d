"""Runs as files: everything the API returns as JSON (one entry per question), and the per-segment table as CSV."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from ..events import Finished

SEGMENT_FIELDS = ("index", "start", "end", "relevance", "tokens")
TURN_FIELDS = ("turn", "question")


def export(turns: Sequence[tuple[str, Finished]], directory: str | Path,
           stem: str = "tempo-segments") -> tuple[Path, Path]:
    """Write (question, run) pairs about one video as JSON ({"turns": [{question, ...the API's result}]}) and their
    per-segment tables as one CSV (turn numbered from 1, question, then the segment's fields)."""
    directory = Path(directory)
    json_path, csv_path = directory / f"{stem}.json", directory / f"{stem}.csv"
    document = {"turns": [{"question": question, **result.to_dict()} for question, result in turns]}
    json_path.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=TURN_FIELDS + SEGMENT_FIELDS)
        writer.writeheader()
        for number, (question, result) in enumerate(turns, 1):
            writer.writerows({"turn": number, "question": question} |
                             {k: v for k, v in asdict(s).items() if k in SEGMENT_FIELDS} for s in result.segments)
    return json_path, csv_path
