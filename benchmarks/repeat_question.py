"""Asking the same question again: the page's own endpoint (/analyze, everything the page shows) against the JSON
API (/answer), on the 10-minute example of `examples/`. The compression comes from the cache both times; the page
also draws the timeline, the filmstrip and writes the downloads.

    python -m benchmarks.repeat_question [--url http://127.0.0.1:7860] [--repeats 3] [--json result.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from benchmarks.app_first_segment import ROOT, local_app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start app.py on a free loopback port)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats per endpoint after the first ask")
    parser.add_argument("--json", dest="json_out", type=Path, help="also write the results here")
    args = parser.parse_args()

    from gradio_client import Client, handle_file

    entries = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))
    example = next(e for e in entries if e["label"].startswith("10 min"))
    with (local_app() if args.url is None else nullcontext(args.url)) as url:
        client = Client(url, verbose=False, download_files=False)  # as a browser: downloads only on a click
        video = handle_file(str(ROOT / "examples" / example["video"]))
        started = time.perf_counter()
        client.predict(video, example["question"], api_name="/answer")
        first = time.perf_counter() - started
        seconds: dict[str, list[float]] = {"/answer": [], "/analyze": []}
        for _ in range(args.repeats):
            for endpoint in seconds:
                started = time.perf_counter()
                client.predict(video, example["question"], api_name=endpoint)
                seconds[endpoint].append(time.perf_counter() - started)
    medians = {endpoint: statistics.median(times) for endpoint, times in seconds.items()}
    print(f"{example['label']}: first ask {first:.2f} s; asked again, median of {args.repeats}: "
          + ", ".join(f"{endpoint} {s:.2f} s" for endpoint, s in medians.items())
          + f" (the page {medians['/analyze'] - medians['/answer']:+.2f} s)")
    if args.json_out:
        args.json_out.write_text(json.dumps({"first_s": first, "repeats_s": seconds, "median_s": medians}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
