"""The soak's traffic: synthetic videos rendered once, and the planned requests about them and hostile files."""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

VIDEOS = ROOT / "outputs" / "soak-videos"
MIX = {"answer": 25, "chat": 15, "compare": 10, "segment": 15, "mcp_locate": 20, "mcp_answer": 15}  # weights
HOSTILE_SHARE = 0.03


@dataclass(frozen=True)
class Video:
    path: Path
    duration: float
    questions: tuple[str, ...]


@dataclass(frozen=True)
class Job:
    number: int
    kind: str  # a MIX key, or "hostile"
    video: Video | None
    question: str
    path: Path | None = None  # a hostile file


def render_videos(count: int, seed: int, short: bool) -> list[Video]:
    """`count` synthetic videos from seeds `seed`, `seed` + 1, ...: 20-38 s apart by 2 s (--short), else 1-60
    minutes drawn log-uniformly; rendered once into VIDEOS and reused."""
    from tempo.synthetic import generate_video, make_questions, write_mp4

    VIDEOS.mkdir(parents=True, exist_ok=True)
    videos, lengths = [], set()
    for number in range(count):
        duration = 20.0 + 2 * number if short else None
        synthetic = generate_video(seed + number, duration, min_duration=60.0, max_duration=3600.0)
        while round(synthetic.duration) in lengths:  # distinct lengths: a result names its video by its length
            synthetic = generate_video(seed + number, synthetic.duration + 2.0)
        lengths.update(range(round(synthetic.duration) - 1, round(synthetic.duration) + 2))
        path = VIDEOS / f"soak-{seed + number}-{synthetic.duration:g}s.mp4"
        if not path.is_file():
            print(f"rendering video {number + 1}/{count}: {path.name}", file=sys.stderr, flush=True)
            partial = path.with_suffix(".partial.mp4")
            write_mp4(synthetic, str(partial))
            partial.rename(path)
        questions = make_questions(synthetic, np.random.default_rng(seed + number))
        videos.append(Video(path, synthetic.duration, tuple(q.text for q in questions)))
    return videos


def plan(videos: list[Video], total: int, hostile: list[Path], rng: random.Random) -> list[Job]:
    """`total` requests: every (video, question) pair with its endpoint asked about equally often, shuffled so that
    a pair's repeats come at different times; hostile files sprinkled in."""
    pairs = [(kind, video, question) for video in videos for question in video.questions for kind in MIX]
    rng.shuffle(pairs)
    weights = [MIX[kind] for kind, _, _ in pairs]
    n_hostile = min(len(hostile), round(total * HOSTILE_SHARE)) if hostile else 0
    # Half as many distinct pairs as requests, each drawn by its endpoint's weight: most are asked twice or more.
    chosen = rng.choices(pairs, weights, k=max(1, (total - n_hostile) // 2))
    picks = chosen + rng.choices(chosen, k=total - n_hostile - len(chosen))
    rng.shuffle(picks)
    jobs = [Job(0, kind, video, question) for kind, video, question in picks]
    for path in rng.sample(hostile, n_hostile):
        jobs.insert(rng.randrange(len(jobs) + 1), Job(0, "hostile", None, "What moves across the screen?", path))
    return [Job(n, job.kind, job.video, job.question, job.path) for n, job in enumerate(jobs)]
