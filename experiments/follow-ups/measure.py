"""What the compressor should read for a follow-up question, measured on synthetic two-turn conversations.

Each video gets a first question, "When does the {colour} {kind} appear?", and two follow-ups: one that points back
at it ("How many times does it appear?", its evidence the first question's) and one that stands alone (a needle
question about another shape, its own evidence). Each follow-up is compressed under three rules for the
compressor's query, and the localisation is read off the compressor: whether its most relevant segment overlaps
the follow-up's evidence.

  alone      the follow-up as it is
  always     the previous question, then the follow-up
  referring  `tempo.model.prompts.compressor_query`: the previous question first only when the follow-up points
             back (a pronoun or the like)

    python experiments/follow-ups/measure.py [--n 24] [--seed 300000] [--json experiments/follow-ups/results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

import tempo
from tempo.engine import compress
from tempo.model.prompts import Exchange, compressor_query
from tempo.paths import cache_folder
from tempo.synthetic import Question, make_questions, segment_relevance
from tempo.train.eval_videos import video_file

RULES = ("alone", "always", "referring")
REFERRING_FOLLOW_UP = "How many times does it appear?"


def query(rule: str, follow_up: str, history: list[Exchange]) -> str:
    if rule == "alone":
        return follow_up
    if rule == "always":
        return f"{history[-1].question} {follow_up}"
    return compressor_query(follow_up, history)


def localised(model, path: str, text: str, evidence: Question, config: tempo.RunConfig) -> bool:
    """Whether the compressor's most relevant segment for `text` overlaps `evidence`'s spans."""
    found = compress(model, path, text, config)
    best = int(np.argmax(found.relevance))
    return segment_relevance(evidence, *found.plan.span(best))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument("--seed", type=int, default=300000, help="first video seed (the tuning range)")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    model = tempo.from_pretrained(device="cpu")
    config = tempo.RunConfig()
    directory = cache_folder("synthetic")
    hits = {kind: {rule: [] for rule in RULES} for kind in ("referring", "standalone")}
    for seed in range(args.seed, args.seed + args.n):
        path, video = video_file(seed, 60.0, 600.0, directory)
        questions = {q.family: q for q in make_questions(video, np.random.default_rng(seed))}
        first, needle = questions.get("grounding"), questions.get("needle")
        if first is None:
            continue
        history = [Exchange(first.text, first.answer)]
        follow_ups = {"referring": Question("counting", REFERRING_FOLLOW_UP, "1", first.evidence)}
        if needle is not None and needle.text.split()[-1] not in first.text:  # another shape than the first's
            follow_ups["standalone"] = needle
        for kind, follow_up in follow_ups.items():
            for rule in RULES:
                hits[kind][rule].append(localised(model, path, query(rule, follow_up.text, history), follow_up,
                                                  config))
        print(seed, {kind: {rule: hits[kind][rule][-1] for rule in RULES} for kind in follow_ups}, flush=True)
    rates = {kind: {rule: {"localised": float(np.mean(found)), "questions": len(found)}
                    for rule, found in rules.items()} for kind, rules in hits.items()}
    print(json.dumps(rates, indent=1))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"seeds": [args.seed, args.seed + args.n - 1],
                                                   "model": model.spec.name, "rates": rates}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
