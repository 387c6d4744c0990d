"""Seconds per analysis request (/compare, /sweep, /segment) once /answer has compressed the video.

Drives a running app through gradio_client, as a script or notebook would. Without --url it starts `app.py` on a
free loopback port and stops it afterwards. The first /answer compresses the shipped 2.5-minute example; every
later request reuses that compression from the per-video cache, which is what the numbers show.

    python -m benchmarks.analysis_tools [--url http://127.0.0.1:7860] [--runs 3] [--json result.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from contextlib import nullcontext
from pathlib import Path

from benchmarks.app_first_segment import local_app

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "synthetic-900001-2min.mp4"
QUESTION = "What colour is the triangle?"
REQUESTS = {  # endpoint -> its settings beyond the video and the question
    "/compare": dict(other_strategy="uniform", other_budget=1024, other_k_min=4, other_truncation="head"),
    "/sweep": {},
    "/segment": dict(segment=30),
}


def timed(client, endpoint: str, video, settings: dict) -> float:
    started = time.perf_counter()
    client.predict(video, QUESTION, max_new_tokens=8, api_name=endpoint, **settings)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running app (default: start app.py on a free loopback port)")
    parser.add_argument("--runs", type=int, default=3, help="requests per endpoint (default 3)")
    parser.add_argument("--json", dest="json_out", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    from gradio_client import Client, handle_file

    with (local_app() if args.url is None else nullcontext(args.url)) as url:
        client = Client(url, verbose=False, download_files=False)
        video = handle_file(str(EXAMPLE))
        first_answer = timed(client, "/answer", video, {})
        seconds = {endpoint: [round(timed(client, endpoint, video, settings), 3) for _ in range(args.runs)]
                   for endpoint, settings in REQUESTS.items()}

    print(f"{EXAMPLE.name}, {url}: first /answer (compresses) {first_answer:.2f} s")
    print(f"{'endpoint':<10} {'median (s)':>10}  runs")
    for endpoint, runs in seconds.items():
        print(f"{endpoint:<10} {statistics.median(runs):>10.2f}  {', '.join(f'{s:.2f}' for s in runs)}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"video": EXAMPLE.name, "question": QUESTION,
                                             "first_answer_s": round(first_answer, 3), "runs": seconds,
                                             "median_s": {e: statistics.median(r) for e, r in seconds.items()}},
                                            indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
