"""What a cached video really costs the server: RSS growth per video against what the cache counts for it.

Serves distinct videos one after another through the library as the app does on a CPU (malloc tuned, decoding in
child processes, the model in this process), with a cache large enough to keep them all, and reports the resident
memory each new video adds next to the bytes `VideoCache` counts for it; then shrinks the cap and checks that RSS
stops growing once the cache is full. With --app it also uploads them to a fresh `app.py` through its API and
reports the server's RSS growth per video against the same count. The videos (testsrc2, 640x360, 25 fps, each in
its own hue so that uploads differ) are made with imageio-ffmpeg's ffmpeg in a temporary directory.

    python -m benchmarks.cache_memory [--videos 40] [--seconds 30] [--app] [--json result.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import shutil
import statistics
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.app_first_segment import local_app

if TYPE_CHECKING:
    from tempo import TempoModel, VideoCache
    from tempo.config import RunConfig

ROOT = Path(__file__).resolve().parent.parent

QUESTION = "What colour is the pattern?"


def resident_bytes() -> int:
    """This process's RSS after a collection and giving freed heap back, as a steady state would show it."""
    gc.collect()
    from tempo.engine.steps import give_back_freed_memory

    give_back_freed_memory()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def hued_videos(folder: Path, count: int, seconds: int) -> list[Path]:
    """`count` distinct test-pattern videos, each in its own hue."""
    import imageio_ffmpeg

    paths = []
    for i in range(count):
        paths.append(folder / f"video{i:04d}.mp4")
        subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi",
                        "-i", f"testsrc2=size=640x360:rate=25:duration={seconds},hue=h={i * 360 / count:.2f}",
                        "-c:v", "libx264", "-preset", "veryfast", "-crf", "30", "-pix_fmt", "yuv420p", str(paths[-1])],
                       check=True)
    return paths


def slope(values: list[int]) -> float:
    """Least-squares growth per step of a series."""
    return statistics.linear_regression(range(len(values)), values).slope


def app_growth(paths: list[Path]) -> list[int]:
    """The RSS of a fresh app.py after each upload of `paths` through /answer."""
    import psutil
    from gradio_client import Client, handle_file

    with local_app() as url:
        server = next(psutil.Process(child.pid) for child in psutil.Process().children()
                      if "app.py" in " ".join(child.cmdline()))
        client = Client(url, verbose=False)
        rss = []
        for path in paths:
            client.predict(handle_file(str(path)), QUESTION, api_name="/answer")
            rss.append(server.memory_info().rss)
        return rss


def counted(cache: VideoCache) -> int:
    """The bytes the cache counts for what it holds."""
    return sum(e.nbytes for e in cache._entries.values())


def cached_growth(model: TempoModel, config: RunConfig, paths: list[Path]) -> dict[str, float]:
    """Every video of `paths` after the first three (which pay the model's and allocator's first-use costs) served
    into a cache that keeps them all, then again under a cap of a third: RSS against what the cache counts, in MB."""
    from tempo import VideoCache, answer

    cache = VideoCache(max_bytes=2**40)
    for path in paths[:3]:
        answer(model, path, QUESTION, config, cache)
    start_rss, start_counted = resident_bytes(), counted(cache)
    rss_steps, counted_steps = [], []
    for path in paths[3:]:
        before_rss, before_counted = resident_bytes(), counted(cache)
        answer(model, path, QUESTION, config, cache)
        rss_steps.append(resident_bytes() - before_rss)
        counted_steps.append(counted(cache) - before_counted)
    rss_total, counted_total = resident_bytes() - start_rss, counted(cache) - start_counted

    # A cap of a third of what was cached: serving them all again must not grow RSS past the cap's worth.
    cap = counted_total // 3
    cache.max_bytes = cap
    cache._evict()
    capped_start = resident_bytes()
    for path in paths[3:]:
        answer(model, path, QUESTION, config, cache)
    videos = len(paths) - 3
    return {"rss_per_video_mb": rss_total / videos / 2**20, "counted_per_video_mb": counted_total / videos / 2**20,
            "rss_over_counted": rss_total / counted_total,
            "median_step_rss_mb": statistics.median(rss_steps) / 2**20,
            "median_step_counted_mb": statistics.median(counted_steps) / 2**20,
            "cap_mb": cap / 2**20, "rss_growth_after_cap_mb": (resident_bytes() - capped_start) / 2**20}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, default=40, help="distinct videos to cache (default 40)")
    parser.add_argument("--seconds", type=int, default=30, help="length of each video (default 30)")
    parser.add_argument("--app", action="store_true", help="measure a running app.py's RSS too")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    from demo.launch import tune_malloc
    from tempo import from_pretrained
    from tempo.config import Limits, RunConfig
    from tempo.video import sandbox

    tune_malloc()
    sandbox.warm_up()
    model = from_pretrained(None)
    config = replace(RunConfig(), limits=replace(Limits(), isolate_decoding=True))
    folder = Path(tempfile.mkdtemp(prefix="tempo-cache-memory-"))
    try:
        paths = hued_videos(folder, args.videos + 3, args.seconds)
        figures = {"videos": args.videos, "seconds": args.seconds, **cached_growth(model, config, paths)}
        app_rss = app_growth(paths) if args.app else None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if app_rss is not None:
        figures["app_rss_per_video_mb"] = slope(app_rss[3:]) / 2**20
        figures["app_rss_over_counted"] = figures["app_rss_per_video_mb"] / figures["counted_per_video_mb"]
    print(f"{args.videos} distinct {args.seconds}-second videos cached: RSS grew "
          f"{figures['rss_per_video_mb']:.2f} MB a video, the cache counted {figures['counted_per_video_mb']:.2f} MB "
          f"(RSS / counted = {figures['rss_over_counted']:.3f}); with the cap cut to {figures['cap_mb']:.0f} MB, "
          f"serving them all again grew RSS by {figures['rss_growth_after_cap_mb']:.1f} MB")
    if app_rss is not None:
        print(f"app.py through /answer: RSS grew {figures['app_rss_per_video_mb']:.2f} MB a video (least squares over "
              f"{args.videos}; RSS / counted = {figures['app_rss_over_counted']:.3f})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    ratios = [figures["rss_over_counted"]] + ([figures["app_rss_over_counted"]] if app_rss is not None else [])
    return 0 if all(abs(ratio - 1) <= 0.10 for ratio in ratios) else 1


if __name__ == "__main__":
    raise SystemExit(main())
