"""The soaked server: app.py on loopback, or behind a planted cache bug, and what it holds against the cache's cap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.local_app import start_app


def within_cache_cap(report: dict) -> dict:
    """The server's growth against its per-video cache's cap (the goal: within the cap + 10 %)."""
    from tempo.settings import limits_from_env

    cap = limits_from_env().cache_mb
    growth = report["main_rss_end_mb"] - report["main_rss_start_mb"]
    return {"cache_cap_mb": cap, "main_rss_growth_mb": growth, "main_rss_growth_within_cap": growth <= 1.1 * cap}


def folder_mb(folder: Path) -> float:
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return round(total / 2**20, 2)


def start_soaked_app(scratch: Path, planted: bool) -> tuple[subprocess.Popen, str]:
    """app.py on loopback (with `planted`, behind a per-video cache that ignores which video it is)."""
    return start_app(scratch, [sys.executable, "-m", "benchmarks.soak", "--serve-planted"] if planted else None)


def serve_planted() -> None:
    """app.py behind a planted bug: the per-video cache's key ignores the file, so two videos share an entry."""
    import spaces  # noqa: F401  (as app.py: before torch)

    from tempo.engine import VideoCache
    from tempo.engine.steps import VideoKey

    VideoCache.key = lambda self, path, sampling: VideoKey("any video", 0, 0, sampling)
    from demo.launch import main

    main()
