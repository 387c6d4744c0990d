"""What moments cost a request: `find_moments` (and the answer's interval) timed against one whole request with
Tempo-Tiny on the 10-minute example of `examples/`, with zoom as the page sets it. Moments are computed from the
relevance a run already has, on the CPU; the GPU does nothing for them.

    python -m benchmarks.moments_cost [--repeats 200] [--json benchmarks/results/moments-cost-cpu.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

from tempo.config import RunConfig
from tempo.engine import answer
from tempo.model import from_pretrained
from tempo.moments import answer_interval, find_moments

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=200, help="times find_moments is run (default 200)")
    parser.add_argument("--json", dest="json_out", type=Path, help="also write the results here")
    args = parser.parse_args()
    entries = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))
    example = next(e for e in entries if e["label"].startswith("10 min"))
    model = from_pretrained(device="cpu")
    started = time.perf_counter()
    finished = answer(model, str(ROOT / "examples" / example["video"]), example["question"], RunConfig())
    request = time.perf_counter() - started
    whole = finished.zoom.segments if finished.zoom else finished.segments
    window = finished.segments if finished.zoom else []
    seconds = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        found = find_moments(whole, window)
        answer_interval(finished.answer)
        seconds.append(time.perf_counter() - started)
    moments = statistics.median(seconds)
    result = {"example": example["label"], "question": example["question"], "request_s": round(request, 3),
              "segments": len(whole), "window_segments": len(window), "moments": [m.to_dict() for m in found],
              "find_moments_median_s": moments, "find_moments_max_s": max(seconds), "repeats": args.repeats,
              "share_of_request": moments / request, "gpu": "none: moments are computed on the host",
              "machine": f"{platform.machine()}, {platform.python_version()}"}
    print(f"{example['label']}: request {request:.2f} s; find_moments median {1000 * moments:.3f} ms over "
          f"{args.repeats} ({100 * moments / request:.4f}% of the request), {len(whole)} + {len(window)} segments")
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
