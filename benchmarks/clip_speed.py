"""How long a 10-second clip of the 45-minute example takes to cut, and whether its first and last frames are the
span's: ten spans spread over the video (each from a segment's start at the page's default 1,024 frames, where a
moment starts), each cut three times (the median is kept). A clip's first and last frames are compared with the
source's frames around the span's first and last (mean absolute difference over RGB); the offset is how many frames
from the expected one the best match lies (0: the expected frame, or one identical to it).

    python -m benchmarks.clip_speed            # writes benchmarks/results/clip-speed-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np

from tempo.video.clip import cut_clip

ROOT = Path(__file__).resolve().parent.parent
VIDEO = ROOT / "examples" / "synthetic-900004-45min.mp4"
LENGTH_S, SPANS, ROUNDS = 10.0, 10, 3
SEGMENT_S = 2700 / 128  # the 45-minute example's segments at 1,024 frames
NEIGHBOURS = 3  # source frames either side that a clip's frame is compared with


def source_frames(video: Path, start: float, end: float) -> list[tuple[float, np.ndarray]]:
    """(time, RGB) of the source's frames from a little before `start` to a little after `end`."""
    with av.open(str(video)) as source:
        stream = source.streams.video[0]
        unit, origin = float(stream.time_base), stream.start_time or 0
        source.seek(int(origin + max(start - 2, 0) / unit), stream=stream, backward=True)
        frames = []
        for frame in source.decode(stream):
            seconds = (frame.pts - origin) * unit
            if seconds > end + 2:
                break
            if seconds >= start - 2:
                frames.append((seconds, frame.to_ndarray(format="rgb24").astype(np.int16)))
    return frames


def clip_ends(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    with av.open(str(path)) as clip:
        frames = [frame.to_ndarray(format="rgb24").astype(np.int16) for frame in clip.decode(video=0)]
    return frames[0], frames[-1], len(frames)


def offset(frame: np.ndarray, frames: list[tuple[float, np.ndarray]], expected: int) -> dict:
    """Where `frame` best matches among the source frames around `expected` (ties go to the expected one)."""
    errors = {i - expected: float(np.abs(frames[i][1] - frame).mean())
              for i in range(max(0, expected - NEIGHBOURS), min(len(frames), expected + NEIGHBOURS + 1))}
    best = min(errors.values())
    found = 0 if errors[0] <= best + 1e-9 else min((k for k, e in errors.items() if e == best), key=abs)
    return {"offset": found, "error_expected": round(errors[0], 3), "error_best": round(best, 3)}


def measure(start: float, workdir: Path) -> dict:
    end = start + LENGTH_S
    times, clip = [], None
    for round_ in range(ROUNDS):
        target = workdir / f"clip-{start:.0f}-{round_}.mp4"
        began = time.perf_counter()
        clip = cut_clip(VIDEO, start, end, target)
        times.append(time.perf_counter() - began)
    assert clip is not None
    frames = source_frames(VIDEO, start, end)
    first = next(i for i, (t, _) in enumerate(frames) if t >= start - 1e-3)
    last = max(i for i, (t, _) in enumerate(frames) if t < end - 1e-3)
    head, tail, count = clip_ends(clip.path)
    return {"start": round(start, 3), "end": round(end, 3), "seconds": round(statistics.median(times), 4),
            "copied": clip.copied, "frames": count, "expected_frames": last - first + 1,
            "first": offset(head, frames, first), "last": offset(tail, frames, last)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "clip-speed-cpu.json"))
    args = parser.parse_args()
    starts = [round(k * SEGMENT_S, 4) for k in np.linspace(1, 120, SPANS).round().astype(int)]
    with av.open(str(VIDEO)) as source:  # one span from a key frame too, where the packets can be copied
        stream = source.streams.video[0]
        keys = [float(p.pts * stream.time_base) for p in source.demux(stream) if p.is_keyframe and p.pts is not None]
    starts.append(next(k for k in keys if k > 600))
    with tempfile.TemporaryDirectory() as workdir:
        spans = []
        for start in starts:
            spans.append(measure(start, Path(workdir)))
            row = spans[-1]
            print(f"{row['start']:8.2f} s: {row['seconds']:.3f} s, {'copied' if row['copied'] else 'encoded'}, "
                  f"{row['frames']} frames (expected {row['expected_frames']}), first frame offset "
                  f"{row['first']['offset']}, last {row['last']['offset']}", flush=True)
    worst = max(row["seconds"] for row in spans)
    result = {"video": VIDEO.name, "length_s": LENGTH_S, "rounds": ROUNDS, "machine": platform.processor() or
              platform.machine(), "cpus": os.cpu_count(), "worst_seconds": worst,
              "median_seconds": statistics.median(row["seconds"] for row in spans),
              "all_frames_exact": all(row["first"]["offset"] == 0 and row["last"]["offset"] == 0
                                      and row["frames"] == row["expected_frames"] for row in spans),
              "spans": spans}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"worst {worst:.3f} s, median {result['median_seconds']:.3f} s; every clip's ends exact: "
          f"{result['all_frames_exact']} -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
