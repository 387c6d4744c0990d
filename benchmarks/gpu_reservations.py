"""GPU seconds a ZeroGPU Space reserves for each shipped example, from the app's own formula (`demo.device`).

For every example: a first ask (the video compressed, one answer), the same question again (the compression
comes from the server's cache: answers only), a comparison (two answers) and a budget sweep (six), at the page's
defaults. A reservation covers answers of the full 512 max new tokens; the last columns use the same formula for
answers of 30 tokens (a short answer, what these questions get), which is closer to what a visit uses. Then the
same for 2-minute, 10-minute and 1-hour videos at 2 fps (the frame cap makes an hour 128 segments). The formula's
constants are estimates for Tempo-6B on half an RTX Pro 6000 Blackwell until measured on one.

    python benchmarks/gpu_reservations.py [--json reservations.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from demo.device import COST, gpu_seconds  # noqa: E402
from tempo.config import RunConfig, SamplingConfig  # noqa: E402
from tempo.events import VideoProbed  # noqa: E402
from tempo.engine import Compression, Job  # noqa: E402
from tempo.timing import StageTimer  # noqa: E402
from tempo.video import open_video, segment_ranges  # noqa: E402
from tempo.video.segments import video_plan  # noqa: E402

LENGTHS = {"2 min": 120, "10 min": 600, "1 h": 3600}
SHORT_ANSWER = 30  # tokens


def reservations(probed: VideoProbed, plan) -> dict[str, int]:

    def seconds(answers: int, compressed: bool, tokens: int | None = None) -> int:
        config = RunConfig()
        if tokens is not None:
            config = config.with_settings({"max_new_tokens": tokens})
        known = Compression("q", probed, plan) if compressed else None
        job = Job("q", probed, plan, config, (config,) * answers, StageTimer(), compression=known)
        return gpu_seconds(job)

    return {"first ask": seconds(1, False), "asked again": seconds(1, True), "compare": seconds(2, True),
            "sweep": seconds(6, True), "first ask, short answer": seconds(1, False, SHORT_ANSWER),
            "asked again, short answer": seconds(1, True, SHORT_ANSWER)}


def of_length(seconds: float) -> tuple[VideoProbed, object]:
    """The probe and plan of a `seconds`-long video (frames sampled at 2 fps, capped as the page caps them)."""
    frames = min(round(2 * seconds), SamplingConfig().max_frames)
    segments = len(segment_ranges(frames))
    return VideoProbed("", seconds, 30.0, round(30 * seconds), 1280, 720, frames, frames / seconds, segments, ""), None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the table here too")
    args = parser.parse_args()
    rows = {}
    examples = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))
    for video in sorted({example["video"] for example in examples}):
        reader = open_video(ROOT / "examples" / video)
        try:
            probed, plan = video_plan(reader, SamplingConfig())
        finally:
            reader.close()
        rows[f"{video} ({probed.num_segments} segments)"] = reservations(probed, plan)
    for name, seconds in LENGTHS.items():
        probed, plan = of_length(seconds)
        rows[f"{name} video ({probed.num_segments} segments)"] = reservations(probed, plan)
    columns = list(next(iter(rows.values())))
    print(f"GPU seconds reserved (at most {COST.cap:g} s a request)")
    print("| video | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(str(row[c]) for c in columns) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
