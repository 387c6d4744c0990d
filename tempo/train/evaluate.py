"""`tempo eval synthetic`: a model on unseen synthetic long videos, ATA against the paper's ablations.

Every video gets one question per family (needle, grounding, counting, global, and since issue 47 interval and
order, drawn from a stream of their own so the first four stay as they were; `--families` picks). Each is
compressed once through the real pipeline (the video is written to mp4 and read back), then the same compression
is allocated by every strategy at the same budget (ablation B) and, for ATA, truncated at the head or the tail
(ablation C). An oracle row runs ATA on the ground-truth relevance instead of the model's: the gap between it and
ATA is what the compressor's relevance costs, and what is left below it is the decoder's. ATA's margins over
uniform allocation and head over tail truncation come with 95% paired-bootstrap intervals, and a budget sweep
runs ATA and uniform from 1/32 of all memory tokens to all of them. Answers naming a time outside the video
(grounding and interval) are counted. Seeds are below the range used for training, so no video was seen in
training.
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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import allocation
from ..analysis import allocation_shape
from ..command_line import run_alone
from ..config import AllocationConfig, GenerationConfig, RunConfig, Zoom
from ..engine import compress, reanswer
from ..errors import InputError
from ..events import Compression, Finished
from ..model import TempoModel, from_pretrained
from ..paths import cache_folder
from ..render.figures import write_sweep_figure
from ..synthetic import (
    ALL_FAMILIES,
    FAMILIES,
    TIMED_FAMILIES,
    Question,
    SyntheticVideo,
    all_questions,
    generate_video,
    is_correct,
    names_time_outside,
    segment_relevance,
    write_mp4,
)
from .eval_tables import format_margins, format_table, print_report  # noqa: F401 (format_* are read from here)
from .eval_zoom import ZOOMS, zoom_record, zoom_report, zoomed_answer
from .recipe import TRAINING_SEEDS

log = logging.getLogger(__name__)

STRATEGIES = tuple(s for s in allocation.STRATEGIES if s != "off")  # the ones held to the budget
VIDEO_FPS = 2.0  # the rate the pipeline samples at: denser files only cost encoding time
SWEEP_FRACTIONS = (1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0)  # of all memory tokens (num_segments * k_max)
SWEEP_STRATEGIES = ("ata", "uniform")
VARIANTS = [(s, "head") for s in STRATEGIES] + [("ata", "tail"), ("oracle", "head")]  # (allocation, truncation)
BOOTSTRAP_RESAMPLES = 10_000


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


def graded(question: Question, answer: str, segment_seconds: float, duration: float) -> dict:
    """An answer's grade, and for timed families whether it names a time outside the video (else None). Every
    pass grades this way, so a second pass over a closer window (zoom) reads the same as the first."""
    return {"correct": is_correct(question, answer, segment_seconds),
            "outside": names_time_outside(answer, duration) if question.family in TIMED_FAMILIES else None}


def most_allocated_overlaps(finished: Finished, question: Question) -> bool:
    """Localisation: the segment with the most tokens (ties: the more relevant) overlaps the evidence."""
    best = max(finished.segments, key=lambda s: (s.tokens, s.relevance if s.relevance is not None else 0.0))
    return segment_relevance(question, best.start, best.end)


def evidence_share(finished: Finished, question: Question) -> float:
    """The share of the kept memory tokens that went to segments overlapping the evidence."""
    kept = sum(s.tokens or 0 for s in finished.segments)  # each allocated (None only before allocation)
    on_evidence = sum(s.tokens or 0 for s in finished.segments if segment_relevance(question, s.start, s.end))
    return on_evidence / kept if kept else 0.0


def oracle_relevance(compressed: Compression, question: Question) -> list[float]:
    """1 for the segments that overlap the question's evidence, else 0 (every segment for a global question)."""
    return [float(segment_relevance(question, *compressed.plan.span(i))) for i in range(len(compressed.relevance))]


def paired_bootstrap(first: Sequence[bool], second: Sequence[bool], videos: Sequence[int],
                     resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0) -> dict[str, float]:
    """Mean of first - second (paired per question) with a 95% percentile interval. Whole videos are resampled,
    since the questions about one video share its compression and are not independent."""
    difference = np.asarray(first, dtype=float) - np.asarray(second, dtype=float)
    groups = np.unique(np.asarray(videos), return_inverse=True)[1]
    sums, counts = np.bincount(groups, weights=difference), np.bincount(groups).astype(float)
    drawn = np.random.default_rng(seed).integers(0, len(sums), size=(resamples, len(sums)))
    means = sums[drawn].sum(axis=1) / counts[drawn].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"difference": float(difference.mean()), "low": float(low), "high": float(high),
            "resamples": resamples, "videos": len(sums)}


def check_seeds(seed: int, n: int) -> None:
    """Evaluation videos must never be training videos."""
    if seed < 0 or seed + n > TRAINING_SEEDS:
        raise ValueError(f"evaluation seeds must stay below {TRAINING_SEEDS} (training videos start there)")


def sweep_budget(num_segments: int, k_max: int, fraction: float) -> int:
    """`fraction` of all memory tokens, never below one token per segment."""
    return max(num_segments, round(fraction * num_segments * k_max))


@dataclass
class Tally:
    """What an evaluation collects: each (strategy, truncation)'s records, the budget sweep's, ATA's allocation
    shapes by family, and ATA's answers as examples. A pass over a closer window (zoom) gets keys of its own in
    `outcomes`, so the whole-video rows stay as they are."""

    outcomes: dict[tuple[str, str], list[dict]] = field(default_factory=lambda: defaultdict(list))
    swept: dict[tuple[str, float], list[dict]] = field(default_factory=lambda: defaultdict(list))
    shapes: dict[str, list[dict]] = field(default_factory=lambda: defaultdict(list))
    examples: list[dict] = field(default_factory=list)


def evaluate(model: TempoModel, n: int, seed: int, budget: int | None, min_duration: float, max_duration: float,
             directory: str, max_new_tokens: int = 24, k_min: int = AllocationConfig().k_min,
             sweep: bool = True, families: tuple[str, ...] = ALL_FAMILIES, zoom: str = Zoom.AUTO.value) -> dict:
    """Run the evaluation on questions of `families` and return the JSON-ready report; `zoom` (a Zoom value) is
    also answered beside ATA over the whole video, unless it is off."""
    check_seeds(seed, n)
    tally = Tally()
    base = RunConfig(generation=GenerationConfig(max_new_tokens=max_new_tokens))
    started = time.perf_counter()
    for video_seed in range(seed, seed + n):
        path, video = video_file(video_seed, min_duration, max_duration, directory)
        for question in questions_of(video, video_seed, families):
            evaluate_question(model, tally, path, video_seed, video.duration, question, base, budget, k_min, sweep,
                              zoom)
        log.info("video %d/%d (seed %d, %.0f s): %.0f s elapsed", video_seed - seed + 1, n, video_seed,
                 video.duration, time.perf_counter() - started)
    settings = {"model": model.spec.name, "videos": n, "seeds": [seed, seed + n - 1],
                "budget": budget or "a quarter of all memory tokens (num_segments * k_max / 4)",
                "durations": [min_duration, max_duration], "k_min": k_min, "k_max": model.spec.num_memory_tokens,
                "families": list(families), "zoom": zoom, "seconds": round(time.perf_counter() - started, 1)}
    report = report_of(tally, settings, k_min, sweep)
    if zoom != Zoom.OFF:
        report["zoom"] = zoom_report(tally.outcomes[("zoom", zoom)], tally.outcomes[("ata", "head")], zoom, margin)
    return report


def evaluate_question(model: TempoModel, tally: Tally, path: str, video_seed: int, duration: float,
                      question: Question, base: RunConfig, budget: int | None, k_min: int, sweep: bool,
                      zoom: str = Zoom.OFF.value) -> None:
    """One question compressed once, then answered under every variant (and the sweep's budgets), and under
    `zoom` where it looks closer, into `tally`."""
    k_max = model.spec.num_memory_tokens
    compressed = compress(model, path, question.text, base)
    video_budget = budget or compressed.video.num_segments * k_max // 4
    segment_seconds = base.sampling.segment_frames / compressed.video.real_fps
    oracle = dataclasses.replace(compressed, relevance=oracle_relevance(compressed, question))

    def outcome(source: Compression, allocation: AllocationConfig) -> tuple[Finished, dict]:
        finished = reanswer(model, source, RunConfig(allocation=allocation, generation=base.generation))
        return finished, {
            "video": video_seed,
            "family": question.family,
            **graded(question, finished.answer, segment_seconds, duration),
            "localized": None if question.family == "global" else most_allocated_overlaps(finished, question),
            "evidence_share": None if question.family == "global" else evidence_share(finished, question),
            "tokens_per_frame": finished.tokens_used / compressed.video.sampled_frames,
        }

    for name, truncation in VARIANTS:
        strategy, source = ("ata", oracle) if name == "oracle" else (name, compressed)
        finished, record = outcome(source, AllocationConfig(budget=video_budget, k_min=k_min, strategy=strategy,
                                                            truncation=truncation))
        tally.outcomes[(name, truncation)].append(record)
        if (name, truncation) == ("ata", "head"):
            tally.shapes[question.family].append(allocation_shape([s.tokens or 0 for s in finished.segments], k_min,
                                                                  k_max))
            tally.examples.append({"seed": video_seed, "duration": round(duration, 1), "family": question.family,
                                   "question": question.text, "expected": question.answer, "answer": finished.answer,
                                   "correct": record["correct"], "outside": record["outside"]})
    if zoom != Zoom.OFF:
        answered, window = zoomed_answer(model, path, question, base,
                                         AllocationConfig(budget=video_budget, k_min=k_min), zoom)
        tally.outcomes[("zoom", zoom)].append(zoom_record(tally.outcomes[("ata", "head")][-1], question,
                                                          graded(question, answered, segment_seconds, duration),
                                                          window, duration))
    for fraction in SWEEP_FRACTIONS if sweep else ():
        for strategy in SWEEP_STRATEGIES:
            allocation = AllocationConfig(budget=sweep_budget(len(compressed.relevance), k_max, fraction),
                                          k_min=k_min, strategy=strategy)
            tally.swept[(strategy, fraction)].append(outcome(compressed, allocation)[1])


def summary(records: list[dict]) -> dict:
    """Accuracy, localisation, evidence share and tokens per frame over `records`, accuracy and localisation per
    family, and the answers naming a time outside the video."""
    localized = [r["localized"] for r in records if r["localized"] is not None]
    shares = [r["evidence_share"] for r in records if r["evidence_share"] is not None]
    asked = [family for family in ALL_FAMILIES if any(r["family"] == family for r in records)]
    return {"accuracy": float(np.mean([r["correct"] for r in records])),
            "localization": float(np.mean(localized)) if localized else None,
            "evidence_share": float(np.mean(shares)) if shares else None,
            "tokens_per_frame": float(np.mean([r["tokens_per_frame"] for r in records])),
            "per_family": {family: float(np.mean([r["correct"] for r in records if r["family"] == family]))
                           for family in asked},
            "questions": len(records),
            "localization_per_family": {
                family: float(np.mean([r["localized"] for r in records if r["family"] == family]))
                for family in asked if family != "global"},
            "outside_video": outside_video(records)}


def outside_video(records: list[dict]) -> dict:
    """How many answers of the timed families name a time outside the video, of how many, overall and per family
    ('At 114.0 seconds.' in a 2-minute video)."""
    timed = [r for r in records if r.get("outside") is not None]
    return {"answers": sum(r["outside"] for r in timed), "of": len(timed),
            "per_family": {family: {"answers": sum(r["outside"] for r in timed if r["family"] == family),
                                    "of": sum(r["family"] == family for r in timed)}
                           for family in TIMED_FAMILIES if any(r["family"] == family for r in timed)}}


def margin(first: list[dict], second: list[dict]) -> dict[str, float]:
    """First's accuracy minus second's on the same questions, with its paired-bootstrap interval."""
    return paired_bootstrap([r["correct"] for r in first], [r["correct"] for r in second],
                            [r["video"] for r in first])


def report_of(tally: Tally, settings: dict, k_min: int, sweep: bool) -> dict:
    """The JSON-ready report of a finished tally."""
    outcomes = tally.outcomes
    report = {
        "strategies": {strategy: summary(outcomes[(strategy, "head")]) for strategy in STRATEGIES},
        "truncation": {truncation: summary(outcomes[("ata", truncation)]) for truncation in ("head", "tail")},
        "intervals": {"ata_minus_uniform": margin(outcomes[("ata", "head")], outcomes[("uniform", "head")]),
                      "head_minus_tail": margin(outcomes[("ata", "head")], outcomes[("ata", "tail")])},
        "oracle": summary(outcomes[("oracle", "head")]),
        "allocation_shape": {family: {key: float(np.mean([s[key] for s in values])) for key in values[0]}
                             for family, values in tally.shapes.items()},
        "settings": settings,
        "examples": tally.examples,
    }
    if sweep:
        swept = tally.swept
        report["budget_sweep"] = {
            "fractions": list(SWEEP_FRACTIONS), "k_min": k_min,
            "strategies": {strategy: [summary(swept[(strategy, f)]) for f in SWEEP_FRACTIONS]
                           for strategy in SWEEP_STRATEGIES},
            "ata_minus_uniform": [margin(swept[("ata", f)], swept[("uniform", f)]) for f in SWEEP_FRACTIONS],
        }
    return report


def localisation(model: TempoModel, n: int, seed: int, min_duration: float, max_duration: float,
                 directory: str, families: tuple[str, ...] = ALL_FAMILIES) -> dict:
    """The compressor alone, through the real pipeline: how often its most relevant segment overlaps the
    evidence (what ATA gives the most tokens), per family, for every non-global question."""
    check_seeds(seed, n)
    hits: dict[str, list[bool]] = defaultdict(list)
    started = time.perf_counter()
    for video_seed in range(seed, seed + n):
        path, video = video_file(video_seed, min_duration, max_duration, directory)
        for question in questions_of(video, video_seed, families):
            if question.family == "global":
                continue
            compressed = compress(model, path, question.text, RunConfig())
            best = int(np.argmax(compressed.relevance))
            hits[question.family].append(segment_relevance(question, *compressed.plan.span(best)))
    every = [hit for family in hits.values() for hit in family]
    return {"localization": float(np.mean(every)), "questions": len(every),
            "per_family": {family: float(np.mean(h)) for family, h in hits.items()},
            "settings": {"model": model.spec.name, "videos": n, "seeds": [seed, seed + n - 1],
                         "durations": [min_duration, max_duration],
                         "seconds": round(time.perf_counter() - started, 1)}}


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=40, help="number of videos (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="first video seed (default 0)")
    parser.add_argument("--budget", type=int, help="fixed token budget (default: a quarter of all memory tokens)")
    parser.add_argument("--model", default=os.environ.get("TEMPO_MODEL"), help="default: the embedded Tempo-Tiny")
    parser.add_argument("--min-duration", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--max-duration", type=float, default=3600.0, help="seconds (default 3600)")
    parser.add_argument("--videos-dir", default=cache_folder("synthetic"),
                        help="where the rendered mp4s are kept between runs")
    parser.add_argument("--k-min", type=int, default=AllocationConfig().k_min,
                        help=f"ATA's per-segment floor (default {AllocationConfig().k_min})")
    parser.add_argument("--json", dest="json_out", help="write the full report here")
    parser.add_argument("--plot", help="draw the budget sweep to this PNG (and an offline HTML beside it)")
    parser.add_argument("--no-sweep", action="store_true", help="skip the budget sweep (about half the time)")
    parser.add_argument("--localisation-only", action="store_true",
                        help="only the compressor: how often its most relevant segment is on the evidence")
    parser.add_argument("--write-jobs", metavar="JOBS", help="instead of evaluating, write the questions as "
                                                             "`tempo batch` jobs to this file")
    parser.add_argument("--families", default=",".join(ALL_FAMILIES),
                        help="comma-separated question families (default: all six; "
                             "needle,grounding,counting,global gives v4's reports exactly)")
    parser.add_argument("--zoom", default=Zoom.AUTO.value, choices=ZOOMS,
                        help="also answer with this zoom setting, against ATA over the whole video (default auto)")
    parser.add_argument("--budgets", default="512,1024", help="with --write-jobs: one job per question and budget "
                                                              "(comma-separated; default 512,1024)")


def run_evaluation(args: argparse.Namespace) -> int:
    """`tempo eval synthetic`: the tables on stdout, the report in `--json`, the sweep in `--plot`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for chatty in ("kaleido", "choreographer"):  # the PNG renderer logs every browser step at INFO
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if args.n < 1:
        raise InputError("--n must be at least 1")
    if args.plot and args.no_sweep:
        raise InputError("--plot draws the budget sweep; drop --no-sweep")
    families = tuple(f for f in ALL_FAMILIES if f in args.families.split(","))
    unknown = set(args.families.split(",")) - set(ALL_FAMILIES)
    if unknown or not families:
        raise InputError(f"--families takes some of {','.join(ALL_FAMILIES)}, got {args.families!r}")
    try:
        if args.write_jobs:
            budgets = [int(b) for b in args.budgets.split(",")]
            count = write_jobs(args.write_jobs, args.n, args.seed, budgets, args.min_duration, args.max_duration,
                               args.videos_dir, families)
            print(f"wrote {count} jobs to {args.write_jobs}")
            return 0
        model = from_pretrained(args.model, device="cpu")
        if args.localisation_only:
            report = localisation(model, args.n, args.seed, args.min_duration, args.max_duration, args.videos_dir,
                                  families)
            print(json.dumps(report, indent=2))
        else:
            report = evaluate(model, args.n, args.seed, args.budget, args.min_duration, args.max_duration,
                              args.videos_dir, k_min=args.k_min, sweep=not args.no_sweep, families=families,
                              zoom=args.zoom)
            print_report(report)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    if args.plot and not args.localisation_only:
        try:
            write_sweep_figure(report, args.plot)
        except InputError as exc:
            print(exc, file=sys.stderr)
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    """`python -m tempo.train.evaluate`, the old name of `tempo eval synthetic`."""
    return run_alone("python -m tempo.train.evaluate", __doc__.splitlines()[0], add_arguments, run_evaluation, argv)


if __name__ == "__main__":
    sys.exit(main())
