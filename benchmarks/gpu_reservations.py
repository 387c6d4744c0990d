"""GPU seconds a ZeroGPU Space reserves, and is expected to use, for each shipped example, from the app's own
formula (`demo.device`: `gpu_seconds` on the job each request builds, `GpuCost.used`).

For every example: a first ask (the video compressed, one answer), the same question again (the compression
comes from the server's cache: answers only), a comparison (two answers) and a budget sweep (six), as
"reserved / used" seconds: before, at the library's 512 max new tokens; after, at the Space's own default (the
settings table's max_new_tokens on a ZeroGPU Space). Used assumes answers of 64 tokens, the GPU check's. Then the
same for 2-minute, 10-minute and 1-hour videos at 2 fps (the frame cap makes an hour 128 segments), and the 1-hour
first questions each kind of visitor can ask a day (`GpuCost.questions_a_day`), and what the start, the token and
the compression would have to cost for an anonymous visitor's day to start `GOAL` of them at 512 max new tokens.
The formula's constants are the GPU check's figures carried to half an RTX Pro 6000 Blackwell by data-sheet ratios,
until measured on one.

    python -m benchmarks.gpu_reservations [--json reservations.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from demo.device import COST, ZEROGPU, GpuCost, gpu_seconds
from tempo.config import RunConfig, SamplingConfig
from tempo.engine import Job
from tempo.events import Compression, VideoProbed
from tempo.settings import setting_named, with_settings
from tempo.timing import Timer
from tempo.video import open_video, segment_ranges
from tempo.video.segments import video_plan

ROOT = Path(__file__).resolve().parent.parent

LENGTHS = {"2 min": 120, "10 min": 600, "1 h": 3600}
ANSWER_TOKENS = 64  # what an answer is taken to use (the GPU check's answers)
BEFORE = RunConfig().generation.max_new_tokens
AFTER = setting_named("max_new_tokens").default(place="zero_gpu")
REQUESTS = {"first ask": (1, False), "asked again": (1, True), "compare": (2, True), "sweep": (6, True)}
GOAL = 10  # 1-hour first questions an anonymous visitor's day should start at 512 max new tokens (issue 68)
COLD_GOAL = 1.5  # the goal for the start: a cold call within warm + 1.5 s


def largest(cost: GpuCost, field: str, goal: int = GOAL) -> float | None:
    """The largest value of `cost`'s `field` (seconds) at which the day starts `goal` questions, to 0.1 ms, or None
    when not even zero does. Fewer questions never follow from a cheaper part, so halving the interval finds it."""
    def enough(value: float) -> bool:
        changed: dict[str, Any] = {field: value}
        return replace(cost, **changed).questions_a_day(max_new_tokens=BEFORE) >= goal

    low, high = 0.0, getattr(cost, field)
    if not enough(low):
        return None
    if enough(high):
        return high
    while high - low > 1e-4:
        low, high = ((low + high) / 2, high) if enough((low + high) / 2) else (low, (low + high) / 2)
    return round(low, 4)


def needed(cost: GpuCost = COST) -> dict[str, float | None]:
    """What each part of a question's cost would have to be, the others as fitted or with the start at its goal."""
    at_goal = replace(cost, start=COLD_GOAL)
    return {"start": largest(cost, "start"), "token": largest(cost, "token"), "segment": largest(cost, "segment"),
            "token, start at goal": largest(at_goal, "token"), "segment, start at goal": largest(at_goal, "segment")}


def reservations(probed: VideoProbed, plan) -> dict[str, str]:
    """'reserved / used' seconds per kind of request, before and after."""

    def seconds(answers: int, compressed: bool, max_new_tokens: int) -> str:
        config = with_settings(RunConfig(), {"max_new_tokens": max_new_tokens})
        known = Compression("q", probed, plan) if compressed else None
        job = Job("q", probed, plan, config.micro_batch, (config,) * answers, Timer(), compression=known)
        used = COST.used(job.to_compress, answers, ANSWER_TOKENS * answers)
        return f"{gpu_seconds(job)} / {used:.0f}"

    return {f"{name}, {tokens}": seconds(answers, compressed, tokens)
            for tokens in (BEFORE, AFTER) for name, (answers, compressed) in REQUESTS.items()}


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
    print(f"GPU seconds reserved / used (answers of {ANSWER_TOKENS} tokens), at max new tokens {BEFORE} (before) "
          f"and {AFTER} (after); at most {COST.cap:g} s a request")
    print("| video | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(str(row[c]) for c in columns) + " |")
    visitors = {visitor: {tokens: COST.questions_a_day(visitor, 128, ANSWER_TOKENS, tokens)
                          for tokens in (BEFORE, AFTER)} for visitor, _ in ZEROGPU.daily_minutes}
    print(f"\n1-hour first questions a day (ZeroGPU page read {ZEROGPU.read}, size {COST.size}, counted "
          f"{ZEROGPU.counted(COST.size):g}x):")
    for visitor, asked in visitors.items():
        print(f"  {visitor}: {asked[BEFORE]} at {BEFORE} max new tokens, {asked[AFTER]} at {AFTER}")
    wanted = needed()
    print(f"\nFor {GOAL} a day at {BEFORE} (now {visitors['anonymous'][BEFORE]}; start {COST.start} s, token "
          f"{COST.token * 1e3:g} ms, segment {COST.segment} s), each alone or with the start at {COLD_GOAL} s, "
          "at most:")
    for part, value in wanted.items():
        print(f"  {part}: {'out of reach' if value is None else f'{value:g} s'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"requests": rows, "questions_a_day": visitors, "needed": wanted},
                                              indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
