"""One evaluation run: each question compressed once through the real pipeline, then answered under every
allocation, the oracle's, the budget sweep's and zoom's, graded into a `Tally`; and the compressor's localisation
alone."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import defaultdict

import numpy as np

from ..analysis import allocation_shape
from ..config import AllocationConfig, GenerationConfig, RunConfig, Zoom
from ..engine import compress, reanswer
from ..events import Compression, Finished
from ..model import TempoModel
from ..synthetic import ALL_FAMILIES, TIMED_FAMILIES, Question, is_correct, names_time_outside, segment_relevance
from .eval_report import STRATEGIES, SWEEP_FRACTIONS, SWEEP_STRATEGIES, Tally, report_of
from .eval_videos import check_seeds, questions_of, video_file
from .eval_zoom import zoom_record, zoom_report, zoomed_answer

log = logging.getLogger(__name__)

VARIANTS = [(s, "head") for s in STRATEGIES] + [("ata", "tail"), ("oracle", "head")]  # (allocation, truncation)


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


def sweep_budget(num_segments: int, k_max: int, fraction: float) -> int:
    """`fraction` of all memory tokens, never below one token per segment."""
    return max(num_segments, round(fraction * num_segments * k_max))


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
        report["zoom"] = zoom_report(tally.outcomes[("zoom", zoom)], tally.outcomes[("ata", "head")], zoom)
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
