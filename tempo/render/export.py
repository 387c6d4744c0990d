"""A run as files: everything the API returns as JSON, and the per-segment table as CSV."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path

from ..events import Finished

SEGMENT_FIELDS = ("index", "start", "end", "relevance", "tokens")


def export(result: Finished, directory: str | Path, stem: str = "tempo-segments") -> tuple[Path, Path]:
    """Write the run as JSON (everything the API returns) and the per-segment table as CSV."""
    directory = Path(directory)
    json_path, csv_path = directory / f"{stem}.json", directory / f"{stem}.csv"
    json_path.write_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False), encoding="utf-8")
    with csv_path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=SEGMENT_FIELDS)
        writer.writeheader()
        writer.writerows({k: v for k, v in asdict(s).items() if k in SEGMENT_FIELDS} for s in result.segments)
    return json_path, csv_path
