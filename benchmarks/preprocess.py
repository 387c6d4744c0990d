"""The frame resizes (steps 0 and 1 of tempo.patches) against per-frame PIL, and file -> compressor-ready tensors.

1. One 8-frame segment through both Pillow-exact resizes (long edge 512, then multiples of 64), for frames of
   common sizes: PIL frame by frame (what the release does and what tempo did before) against
   `tempo.patches.fit_long_edge` + the snap in `tempo.resample`, whole segment at once, on one thread (as on each
   decoding worker). Best of 10.
2. `tempo.bench`'s "file -> compressor-ready tensors" for its 10-minute and 1-hour 720p videos (generated once
   under $TEMPO_CACHE/bench), best of 2.

    python -m benchmarks.preprocess [--skip-files] [--json result.json]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from functools import partial
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from tempo.bench.runs import ours_tensors
from tempo.bench.videos import VIDEOS, make_video
from tempo.config import RunConfig
from tempo.paths import cache_folder
from tempo.video import long_edge_size
from tempo.video.patches import PatchGeometry, fit_long_edge, frame_size
from tempo.video.resample import resize

ROOT = Path(__file__).resolve().parent.parent

SIZES = {"720p": (1280, 720), "1080p": (1920, 1080), "480p": (854, 480), "portrait 1080x1920": (1080, 1920),
         "QCIF": (176, 144)}


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def segment_resizes(runs: int = 10) -> dict:
    geometry = PatchGeometry()
    figures = {}
    for name, (width, height) in SIZES.items():
        frames = np.random.default_rng(0).integers(0, 256, (8, height, width, 3), dtype=np.uint8)
        fitted = long_edge_size(width, height, 512)
        snapped = frame_size(fitted[1], fitted[0], geometry)

        def pil(frames: np.ndarray = frames, fitted: tuple = fitted, snapped: tuple = snapped) -> list:
            return [Image.fromarray(f).resize(fitted, Image.Resampling.BICUBIC)
                    .resize(snapped[::-1], Image.Resampling.BICUBIC) for f in frames]

        def ours(frames: np.ndarray = frames, snapped: tuple = snapped) -> np.ndarray:
            return resize(fit_long_edge(frames, 512), *snapped)

        ours()  # compile (or load the compiled kernel) first
        figures[name] = {"pil_ms": round(best(pil, runs) * 1000, 1), "ours_ms": round(best(ours, runs) * 1000, 1)}
        print(f"{name:>20}: PIL per frame {figures[name]['pil_ms']:6.1f} ms, ours {figures[name]['ours_ms']:6.1f} ms "
              "(8 frames)", flush=True)
    return figures


def file_to_tensors(runs: int = 2) -> dict:
    cache = cache_folder("bench")
    figures = {}
    for name, seconds in VIDEOS.items():
        path = make_video(os.path.join(cache, f"testsrc2-720p30-{seconds}s.mp4"), seconds)
        seconds_taken = best(partial(ours_tensors, path, RunConfig(), PatchGeometry()), runs)
        figures[name] = round(seconds_taken, 2)
        print(f"{name} video -> compressor-ready tensors: {seconds_taken:.2f} s", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-files", action="store_true", help="only the segment resizes (seconds, not minutes)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    figures = {"segment_resizes": segment_resizes()}
    torch.set_num_threads(threads)
    if not args.skip_files:
        figures["file_to_tensors_s"] = file_to_tensors()
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
