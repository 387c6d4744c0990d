"""What choosing each segment's sharpest frame (variance of OpenCV's Laplacian) costs in a segment's preprocessing,
against taking its middle frame: 8 frames of 720p video per segment, best of several rounds, one thread (as on each
decoding worker).

    python -m benchmarks.sharpest_frame
"""

from __future__ import annotations

import sys
import time

import numpy as np
import torch

from tempo.config import SamplingConfig
from tempo.timing import Timer
from tempo.video import segments
from tempo.video.patches import PatchGeometry

ROUNDS, SEGMENTS = 5, 20


def best(prepare) -> float:
    frames = [np.random.default_rng(i).integers(0, 256, (720, 1280, 3), dtype=np.uint8) for i in range(8)]
    geometry, sampling = PatchGeometry.from_processor_config({}), SamplingConfig()
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for index in range(SEGMENTS):
            prepare(index, frames, sampling, geometry, Timer())
        times.append((time.perf_counter() - started) / SEGMENTS)
    return min(times)


def main() -> int:
    torch.set_num_threads(1)
    chosen = best(segments.prepare_segment)
    sharpest = segments.sharpest
    segments.sharpest = lambda frames: len(frames) // 2  # the middle frame, as before
    try:
        middle = best(segments.prepare_segment)
    finally:
        segments.sharpest = sharpest
    frames = np.random.default_rng(0).integers(0, 256, (8, 288, 512, 3), dtype=np.uint8)
    started = time.perf_counter()
    for _ in range(200):
        sharpest(frames)
    alone = (time.perf_counter() - started) / 200
    print(f"a 720p segment's preprocessing: {middle * 1000:.1f} ms with the middle frame, {chosen * 1000:.1f} ms with "
          f"the sharpest ({(chosen - middle) / middle:+.1%}); choosing alone: {alone * 1000:.2f} ms a segment")
    return 0


if __name__ == "__main__":
    sys.exit(main())
