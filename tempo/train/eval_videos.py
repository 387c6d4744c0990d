"""The evaluation's videos and questions: each seed's synthetic video written once as an mp4, its questions, the
seeds kept apart from training, and the questions as `tempo batch` jobs."""

from __future__ import annotations

import json
import os

import numpy as np

from ..synthetic import FAMILIES, Question, SyntheticVideo, all_questions, generate_video, write_mp4
from .recipe import TRAINING_SEEDS

VIDEO_FPS = 2.0  # the rate the pipeline samples at: denser files only cost encoding time


def video_file(seed: int, min_duration: float, max_duration: float, directory: str) -> tuple[str, SyntheticVideo]:
    """The synthetic video for `seed`, written once to `directory` and reused afterwards."""
    video = generate_video(seed, min_duration=min_duration, max_duration=max_duration)
    path = os.path.join(directory, video.name + ".mp4")
    if not os.path.isfile(path):
        os.makedirs(directory, exist_ok=True)
        write_mp4(video, path + ".partial.mp4", fps=VIDEO_FPS)
        os.replace(path + ".partial.mp4", path)
    return path, video


def questions_of(video: SyntheticVideo, video_seed: int, families: tuple[str, ...]) -> list[Question]:
    """The evaluation's questions about one video: `all_questions` on the video's own seed, of these families."""
    return [q for q in all_questions(video, np.random.default_rng(video_seed)) if q.family in families]


def check_seeds(seed: int, n: int) -> None:
    """Evaluation videos must never be training videos."""
    if seed < 0 or seed + n > TRAINING_SEEDS:
        raise ValueError(f"evaluation seeds must stay below {TRAINING_SEEDS} (training videos start there)")


def write_jobs(path: str, n: int, seed: int, budgets: list[int], min_duration: float, max_duration: float,
               directory: str, families: tuple[str, ...] = FAMILIES) -> int:
    """The evaluation's questions as `tempo batch` jobs, once per budget, with their family, expected answer and
    evidence; returns how many jobs were written. By default the four families before interval and order: the batch
    and lmms integrations are tested on exactly those."""
    check_seeds(seed, n)
    lines = []
    for video_seed in range(seed, seed + n):
        video_path, video = video_file(video_seed, min_duration, max_duration, directory)
        for question in questions_of(video, video_seed, families):
            for budget in budgets:
                lines.append({"id": f"{video_seed}-{question.family}-{budget}", "video": os.path.abspath(video_path),
                              "question": question.text, "budget": budget, "family": question.family,
                              "expected": question.answer, "evidence": [list(span) for span in question.evidence]})
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    return len(lines)
