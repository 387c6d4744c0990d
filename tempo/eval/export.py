"""`tempo eval export`: the synthetic world as a grounding benchmark, in QVHighlights' and Charades-STA's formats,
with exact truth: the evidence spans of each video's needle, grounding and interval questions, and per 2-second
clip a saliency of 4 for a clip whose middle shows the event (less for one partly inside)."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from ..command_line import run_alone
from ..errors import InputError
from ..synthetic import Question, generate_video
from ..train.eval_videos import check_seeds, questions_of, video_file
from .formats import CLIP_SECONDS, SALIENCY_MAX, Annotation, write_charades, write_qvhighlights

FAMILIES = ("needle", "grounding", "interval")  # the questions whose evidence is where the answer is
DESCRIPTION = "The synthetic world as a grounding benchmark, in QVHighlights' and Charades-STA's formats."
ANNOTATORS = 3  # as QVHighlights: three scores per clip (here all the same, since the truth is exact)


def clip_saliency(evidence: tuple[tuple[float, float], ...], duration: float) -> tuple[tuple[int, int], ...]:
    """(clip id, score) for every clip that overlaps the evidence: 4 when the clip's middle shows the event (every
    span of 2 s or more holds a clip's middle), else the share of the clip inside it, 1 to 3."""
    clips = []
    for clip in range(int(duration / CLIP_SECONDS)):
        low, high = clip * CLIP_SECONDS, (clip + 1) * CLIP_SECONDS
        if any(start <= (low + high) / 2 <= end for start, end in evidence):
            clips.append((clip, SALIENCY_MAX))
            continue
        inside = sum(max(0.0, min(high, end) - max(low, start)) for start, end in evidence) / CLIP_SECONDS
        value = min(SALIENCY_MAX - 1, max(1, round(SALIENCY_MAX * inside))) if inside > 0 else 0
        if value:
            clips.append((clip, value))
    return tuple(clips)


def annotation(question: Question, seed: int, vid: str, duration: float) -> Annotation:
    """One question as a benchmark's record: its text as the query, its evidence as the relevant intervals."""
    clips = clip_saliency(question.evidence, duration)
    return Annotation(f"{seed}-{question.family}", question.text, vid,
                      tuple((round(s, 2), round(e, 2)) for s, e in question.evidence), round(duration, 2),
                      tuple(c for c, _ in clips), tuple((v,) * ANNOTATORS for _, v in clips))


def export(seed: int, n: int, directory: str, min_duration: float, max_duration: float,
           families: tuple[str, ...] = FAMILIES, videos: bool = True) -> list[Annotation]:
    """Videos `seed`..`seed + n - 1` written to `directory` (kept when there already; none without `videos`) and
    their annotations, written there as `annotations.jsonl` (QVHighlights) and `charades.txt` (Charades-STA)."""
    check_seeds(seed, n)
    os.makedirs(directory, exist_ok=True)
    annotations = []
    for video_seed in range(seed, seed + n):
        if videos:
            video = video_file(video_seed, min_duration, max_duration, directory)[1]
        else:
            video = generate_video(video_seed, min_duration=min_duration, max_duration=max_duration)
        annotations += [annotation(q, video_seed, video.name, video.duration)
                        for q in questions_of(video, video_seed, families)]
    write_qvhighlights(annotations, os.path.join(directory, "annotations.jsonl"))
    write_charades(annotations, os.path.join(directory, "charades.txt"))
    return annotations


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, required=True, help="first video seed (below 1,000,000: unseen)")
    parser.add_argument("--n", type=int, default=20, help="number of videos (default 20)")
    parser.add_argument("--out", required=True, help="folder for the videos and the two annotation files")
    parser.add_argument("--min-duration", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--max-duration", type=float, default=3600.0, help="seconds (default 3600)")
    parser.add_argument("--no-videos", action="store_true",
                        help="the annotation files only: scoring kept --observations needs no video")


def run(args: argparse.Namespace) -> int:
    """Render and annotate the videos; a bad count or length range is an `InputError`."""
    if args.n < 1:
        raise InputError("--n must be at least 1")
    try:
        annotations = export(args.seed, args.n, args.out, args.min_duration, args.max_duration,
                             videos=not args.no_videos)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    counts = np.unique([a.qid.rsplit("-", 1)[1] for a in annotations], return_counts=True)
    print(f"{len(annotations)} queries on {args.n} videos ({', '.join(f'{c} {f}' for f, c in zip(*counts))}) "
          f"in {args.out}: annotations.jsonl, charades.txt")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_alone("python -m tempo.eval.export", DESCRIPTION, add_arguments, run, argv)


if __name__ == "__main__":
    sys.exit(main())
