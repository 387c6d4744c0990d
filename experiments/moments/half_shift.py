"""Moments with 2-second edges (issue 69): a second compressor pass over zoom's window, its segments shifted by half
a segment, read with the first so that each 2-second clip gets a relevance of its own.

    tempo eval export --seed 700000 --n 8 --out DIR
    PYTHONPATH=. python experiments/moments/half_shift.py --annotations DIR/annotations.jsonl --videos DIR \
        --observations experiments/moments/heldout-observations.jsonl \
        --shifted experiments/moments/heldout-shifted.jsonl --json experiments/moments/half-shift.json

The first pass is the kept observation's: zoom's window where zoom ran, else the whole video (sampled at the full
rate already, so its segments are 4 s as the window's are). Only the shifted pass runs the model; what it saw is
kept in `--shifted`, so a rerun resumes and the metrics need no model. Each clip's relevance is the mean or the min
of the two segments covering it; the clips replace the window as `tempo.eval.observe.predictions` reads it, and the
zoom row is scored as `tempo eval grounding` scores it."""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from tempo.config import GenerationConfig, RunConfig
from tempo.engine import VideoCache, compress
from tempo.eval.formats import CLIP_SECONDS, Annotation, read_annotations
from tempo.eval.grounding import ANSWER_TOKENS, CACHE_BYTES, evaluate, load_observations, table, video_path
from tempo.eval.highlights import hit_at_one
from tempo.eval.observe import Observation, predictions, segments_of
from tempo.events import Segment
from tempo.model import from_pretrained

RULES: dict[str, Callable[[Sequence[float]], float]] = {"mean": statistics.fmean, "min": min}


def fine_stretch(observation: Observation) -> tuple[float, float]:
    """The stretch read at the full rate: zoom's window, or the whole video where zoom had nothing to add."""
    if observation.window:
        return observation.window[0].start, observation.window[-1].end
    return 0.0, observation.duration


def first_pass(observation: Observation) -> tuple[Segment, ...]:
    """The full-rate segments of the kept observation (the window's, else the whole video's)."""
    return observation.window or observation.segments


def shifted_config(config: RunConfig, observation: Observation, shift: float) -> RunConfig:
    """`config` sampling the fine stretch from `shift` seconds after its start (the end kept: the frame cap holds)."""
    low, high = fine_stretch(observation)
    return dataclasses.replace(config, sampling=dataclasses.replace(config.sampling, start=low + shift, end=high))


def first_config(config: RunConfig, observation: Observation) -> RunConfig:
    """`config` sampling what the kept first pass sampled: zoom's window, or the whole video."""
    if not observation.window:
        return config
    low, high = fine_stretch(observation)
    return dataclasses.replace(config, sampling=dataclasses.replace(config.sampling, start=low, end=high))


def time_first(annotations: Sequence[Annotation], observations: dict[str, Observation], videos: str,
               qids: Sequence[str]) -> dict[str, dict]:
    """The first pass of `qids` run again beside the shifted one (same load, same cache state): its seconds, and
    how far its relevance lies from the kept observation's."""
    model = from_pretrained(None)
    config = RunConfig(generation=GenerationConfig(max_new_tokens=ANSWER_TOKENS))
    out = {}
    for a in (a for a in annotations if a.qid in qids):
        observation = observations[a.qid]
        started = time.perf_counter()
        again = segments_of(compress(model, video_path(videos, a.vid), a.query, first_config(config, observation),
                                     VideoCache(max_bytes=CACHE_BYTES)))
        seconds = time.perf_counter() - started
        gap = max(abs((s.relevance or 0.0) - (k.relevance or 0.0))
                  for s, k in zip(again, first_pass(observation), strict=True))
        out[a.qid] = {"seconds": round(seconds, 2), "max_relevance_difference": gap}
    return out


def observe_shifted(annotations: Sequence[Annotation], observations: dict[str, Observation], videos: str,
                    keep: str, shift: float) -> dict[str, dict]:
    """The shifted pass of every query (those in `keep` already are read back), appending each new one to `keep`."""
    try:
        with open(keep, encoding="utf-8") as f:
            known = {r["qid"]: r for r in (json.loads(line) for line in f if line.strip())}
    except FileNotFoundError:
        known = {}
    # the short videos first: a broken run shows itself in seconds
    todo = sorted((a for a in annotations if a.qid not in known),
                  key=lambda a: (observations[a.qid].duration, a.vid))
    if not todo:
        return known
    model = from_pretrained(None)
    config = RunConfig(generation=GenerationConfig(max_new_tokens=ANSWER_TOKENS))
    cache = VideoCache(max_bytes=CACHE_BYTES)
    for a in todo:
        observation = observations[a.qid]
        started = time.perf_counter()
        compression = compress(model, video_path(videos, a.vid), a.query,
                               shifted_config(config, observation, shift), cache)
        record: dict = {"qid": a.qid, "seconds": round(time.perf_counter() - started, 2),
                  "segments": [[round(s.start, 3), round(s.end, 3), s.relevance] for s in segments_of(compression)]}
        known[a.qid] = record
        count = len(record["segments"])
        with open(keep, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        print(f"{a.qid}: {record['seconds']} s, {count} segments", file=sys.stderr, flush=True)
    return known


def covering(segments: Sequence[Segment], moment: float) -> Segment | None:
    """The segment whose span holds `moment` (None when none does)."""
    return next((s for s in segments if s.start <= moment < s.end), None)


def clip_segments(first: Sequence[Segment], second: Sequence[Segment], low: float, high: float,
                  rule: Callable[[Sequence[float]], float], clip: float = CLIP_SECONDS) -> tuple[Segment, ...]:
    """Each `clip`-second piece of [low, high] with `rule` of the relevance of the segments covering its middle
    (one per pass; the stretch's first clip has only the first pass's)."""
    clips: list[Segment] = []
    start = low
    while start < high - 1e-6:
        end = min(start + clip, high)
        holders = [s for s in (covering(first, (start + end) / 2), covering(second, (start + end) / 2)) if s]
        values = [s.relevance for s in holders if s.relevance is not None]
        clips.append(Segment(len(clips), start, end, rule(values) if values else None))
        start = end
    return tuple(clips)


def combined(observation: Observation, shifted: Sequence[Segment], rule: Callable[[Sequence[float]], float],
             ) -> Observation:
    """The observation with its full-rate stretch read as 2-second clips, as zoom's window."""
    clips = clip_segments(first_pass(observation), shifted, *fine_stretch(observation), rule)
    return dataclasses.replace(observation, window=clips)


def hits(annotations: Sequence[Annotation], observations: Sequence[Observation]) -> dict[str, float]:
    """HIT@1 of the zoom row per query, as the metrics read its saliency."""
    return {a.qid: hit_at_one(predictions(o)["zoom"].saliency or (), a, o.duration)
            for a, o in zip(annotations, observations, strict=True)}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--annotations", required=True)
    parser.add_argument("--videos", required=True, help="the rendered videos (needed for queries not in --shifted)")
    parser.add_argument("--observations", required=True, help="the kept first-pass observations (jsonl)")
    parser.add_argument("--shifted", required=True, help="keep the shifted pass here (jsonl); a rerun resumes")
    parser.add_argument("--shift", type=float, default=2.0, help="seconds: half of a full-rate segment")
    parser.add_argument("--time-first", nargs="*", default=[], metavar="QID",
                        help="run these queries' first pass again, to time it beside the shifted one")
    parser.add_argument("--json", dest="json_out", required=True)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    annotations = read_annotations(args.annotations)
    kept = load_observations(args.observations)
    annotations = [a for a in annotations if a.qid in kept]
    shifted = observe_shifted(annotations, kept, args.videos, args.shifted, args.shift)
    before = [kept[a.qid] for a in annotations]
    variants = {"before": before,
                # the control: the first pass alone split into clips, so the gain left is the shifted pass's
                "first pass as 2-s clips": [combined(o, (), min) for o in before]}
    for name, rule in RULES.items():
        variants[f"half-shift {name}"] = [
            combined(o, tuple(Segment(i, *span) for i, span in enumerate(shifted[o.qid]["segments"])), rule)
            for o in before]
    results = {name: evaluate(annotations, observations, ("zoom",))["zoom"] for name, observations in variants.items()}
    print(table(results))
    seconds = [shifted[a.qid]["seconds"] for a in annotations]
    report = {"queries": len(annotations), "shift_s": args.shift,
              "extra_seconds": {"mean": statistics.fmean(seconds), "median": statistics.median(seconds),
                                "max": max(seconds), "per_query": {a.qid: shifted[a.qid]["seconds"]
                                                                   for a in annotations}},
              "rows": {name: s.to_dict() for name, s in results.items()},
              "top_iou": {name: s.per_query_iou for name, s in results.items()},
              "hit1": {name: hits(annotations, observations) for name, observations in variants.items()},
              "first_pass_again": time_first(annotations, kept, args.videos, args.time_first)}
    with open(args.json_out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
