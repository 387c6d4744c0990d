"""`python -m tempo.eval_synthetic`: a model on unseen synthetic long videos, ATA against the paper's ablations.

Every video gets one question per family (needle, grounding, counting, global). Each (video, question) is
compressed once through the real pipeline (the video is written to mp4 and read back), then the same compression
is allocated by every strategy at the same budget (ablation B) and, for ATA, truncated at the head or the tail
(ablation C). An oracle row runs ATA on the ground-truth relevance instead of the model's: the gap between it and
ATA is what the compressor's relevance costs, and what is left below it is the decoder's. Seeds are below the
range used for training, so no video was seen in training.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from collections import defaultdict

import numpy as np

from . import allocation
from .config import AllocationConfig, GenerationConfig, RunConfig
from .events import Finished
from .model import TempoModel, from_pretrained
from .analysis import allocation_shape, compression, reanswer
from .pipeline import CompressedVideo
from .synthetic import (FAMILIES, Question, generate_video, is_correct, make_questions, segment_relevance,
                        write_mp4)
from .train.recipe import TRAINING_SEEDS

log = logging.getLogger(__name__)

STRATEGIES = tuple(s for s in allocation.STRATEGIES if s != "off")  # the ones held to the budget
VIDEO_FPS = 2.0  # the rate the pipeline samples at: denser files only cost encoding time


def video_file(seed: int, min_duration: float, max_duration: float, directory: str) -> tuple[str, object]:
    """The synthetic video for `seed`, written once to `directory` and reused afterwards."""
    video = generate_video(seed, min_duration=min_duration, max_duration=max_duration)
    path = os.path.join(directory, f"synthetic-{seed}-{video.duration:.1f}s.mp4")
    if not os.path.isfile(path):
        os.makedirs(directory, exist_ok=True)
        write_mp4(video, path + ".partial.mp4", fps=VIDEO_FPS)
        os.replace(path + ".partial.mp4", path)
    return path, video


def most_allocated_overlaps(finished: Finished, question: Question) -> bool:
    """Localisation: the segment with the most tokens (ties: the more relevant) overlaps the evidence."""
    best = max(finished.segments, key=lambda s: (s.tokens, s.relevance if s.relevance is not None else 0.0))
    return segment_relevance(question, best.start, best.end)


def oracle_relevance(compressed: CompressedVideo, question: Question) -> list[float]:
    """1 for the segments that overlap the question's evidence, else 0 (every segment for a global question)."""
    return [float(segment_relevance(question, *compressed.plan.span(i))) for i in range(len(compressed.relevance))]


def evaluate(model: TempoModel, n: int, seed: int, budget: int | None, min_duration: float, max_duration: float,
             directory: str, max_new_tokens: int = 24) -> dict:
    """Run the evaluation and return the JSON-ready report."""
    if seed < 0 or seed + n > TRAINING_SEEDS:
        raise ValueError(f"evaluation seeds must stay below {TRAINING_SEEDS} (training videos start there)")
    k_max = model.spec.num_memory_tokens
    variants = [(s, "head") for s in STRATEGIES] + [("ata", "tail"), ("oracle", "head")]
    outcomes: dict[tuple[str, str], list[dict]] = defaultdict(list)
    shapes: dict[str, list[dict]] = defaultdict(list)
    examples = []
    started = time.perf_counter()
    for video_seed in range(seed, seed + n):
        path, video = video_file(video_seed, min_duration, max_duration, directory)
        for question in make_questions(video, np.random.default_rng(video_seed)):
            base = RunConfig(generation=GenerationConfig(max_new_tokens=max_new_tokens))
            compressed = compression(model, path, question.text, base)
            video_budget = budget or compressed.video.num_segments * k_max // 4
            segment_seconds = base.sampling.segment_frames / compressed.video.real_fps
            oracle = dataclasses.replace(compressed, relevance=oracle_relevance(compressed, question))
            for name, truncation in variants:
                strategy, source = ("ata", oracle) if name == "oracle" else (name, compressed)
                config = RunConfig(allocation=AllocationConfig(budget=video_budget, strategy=strategy,
                                                               truncation=truncation),
                                   generation=base.generation)
                finished = reanswer(model, source, config)
                tokens = [s.tokens for s in finished.segments]
                outcomes[(name, truncation)].append({
                    "family": question.family,
                    "correct": is_correct(question, finished.answer, segment_seconds),
                    "localized": None if question.family == "global" else most_allocated_overlaps(finished, question),
                    "tokens_per_frame": finished.tokens_used / compressed.video.sampled_frames,
                })
                if (name, truncation) == ("ata", "head"):
                    shapes[question.family].append(allocation_shape(tokens, config.allocation.k_min, k_max))
                    examples.append({"seed": video_seed, "duration": round(video.duration, 1),
                                     "family": question.family, "question": question.text,
                                     "expected": question.answer, "answer": finished.answer,
                                     "correct": outcomes[(name, truncation)][-1]["correct"]})
        log.info("video %d/%d (seed %d, %.0f s): %.0f s elapsed", video_seed - seed + 1, n, video_seed,
                 video.duration, time.perf_counter() - started)

    def summary(records: list[dict]) -> dict:
        localized = [r["localized"] for r in records if r["localized"] is not None]
        return {"accuracy": float(np.mean([r["correct"] for r in records])),
                "localization": float(np.mean(localized)) if localized else None,
                "tokens_per_frame": float(np.mean([r["tokens_per_frame"] for r in records])),
                "per_family": {family: float(np.mean([r["correct"] for r in records if r["family"] == family]))
                               for family in FAMILIES if any(r["family"] == family for r in records)},
                "questions": len(records)}

    return {
        "strategies": {strategy: summary(outcomes[(strategy, "head")]) for strategy in STRATEGIES},
        "truncation": {truncation: summary(outcomes[("ata", truncation)]) for truncation in ("head", "tail")},
        "oracle": summary(outcomes[("oracle", "head")]),
        "allocation_shape": {family: {key: float(np.mean([s[key] for s in values])) for key in values[0]}
                             for family, values in shapes.items()},
        "settings": {"model": model.spec.name, "videos": n, "seeds": [seed, seed + n - 1],
                     "budget": budget or "a quarter of all memory tokens (num_segments * k_max / 4)",
                     "durations": [min_duration, max_duration], "k_max": k_max,
                     "seconds": round(time.perf_counter() - started, 1)},
        "examples": examples,
    }


def format_table(report: dict) -> str:
    """The README table: one row per strategy, head vs tail truncation for ATA, then the oracle."""
    families = list(FAMILIES)
    header = ["allocation", "accuracy", *families, "localization", "tokens/frame"]
    rows = [("ATA" if name == "ata" else name, r) for name, r in report["strategies"].items()]
    rows += [(f"ATA, {t} truncation", report["truncation"][t]) for t in ("head", "tail")]
    rows.append(("ATA on true relevance (oracle)", report["oracle"]))
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, r in rows:
        cells = [name, f"{r['accuracy']:.1%}", *[f"{r['per_family'].get(f, float('nan')):.0%}" for f in families],
                 "-" if r["localization"] is None else f"{r['localization']:.0%}", f"{r['tokens_per_frame']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_jobs(path: str, n: int, seed: int, budgets: list[int], min_duration: float, max_duration: float,
               directory: str) -> int:
    """The evaluation's questions as `python -m tempo batch` jobs, once per budget, with their family, expected
    answer and evidence; returns how many jobs were written."""
    if seed < 0 or seed + n > TRAINING_SEEDS:
        raise ValueError(f"evaluation seeds must stay below {TRAINING_SEEDS} (training videos start there)")
    lines = []
    for video_seed in range(seed, seed + n):
        video_path, video = video_file(video_seed, min_duration, max_duration, directory)
        for question in make_questions(video, np.random.default_rng(video_seed)):
            for budget in budgets:
                lines.append({"id": f"{video_seed}-{question.family}-{budget}", "video": os.path.abspath(video_path),
                              "question": question.text, "budget": budget, "family": question.family,
                              "expected": question.answer, "evidence": [list(span) for span in question.evidence]})
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    return len(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tempo.eval_synthetic", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="number of videos (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="first video seed (default 0)")
    parser.add_argument("--budget", type=int, help="fixed token budget (default: a quarter of all memory tokens)")
    parser.add_argument("--model", default=os.environ.get("TEMPO_MODEL"), help="default: the embedded Tempo-Tiny")
    parser.add_argument("--min-duration", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--max-duration", type=float, default=3600.0, help="seconds (default 3600)")
    parser.add_argument("--videos-dir", default=os.path.join(os.environ.get("TEMPO_CACHE", os.path.expanduser(
        "~/.cache/tempo")), "synthetic"), help="where the rendered mp4s are kept between runs")
    parser.add_argument("--json", dest="json_out", help="write the full report here")
    parser.add_argument("--write-jobs", metavar="JOBS", help="instead of evaluating, write the questions as "
                                                             "`python -m tempo batch` jobs to this file")
    parser.add_argument("--budgets", default="512,1024", help="with --write-jobs: one job per question and budget "
                                                              "(comma-separated; default 512,1024)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if args.n < 1:
        parser.error("--n must be at least 1")
    if args.write_jobs:
        try:
            budgets = [int(b) for b in args.budgets.split(",")]
            count = write_jobs(args.write_jobs, args.n, args.seed, budgets, args.min_duration, args.max_duration,
                               args.videos_dir)
        except ValueError as exc:
            parser.error(str(exc))
        print(f"wrote {count} jobs to {args.write_jobs}")
        return 0
    model = from_pretrained(args.model, device="cpu")
    try:
        report = evaluate(model, args.n, args.seed, args.budget, args.min_duration, args.max_duration,
                          args.videos_dir)
    except ValueError as exc:
        parser.error(str(exc))
    print(format_table(report))
    shape = report["allocation_shape"]
    for family in ("needle", "global"):
        if family in shape:
            s = shape[family]
            print(f"ATA on {family} questions: {s['at_k_min']:.0%} of segments at k_min, "
                  f"{s['near_k_max']:.0%} near k_max, allocation entropy {s['entropy']:.2f}")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
