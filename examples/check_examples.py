"""Run every shipped example as the app runs it (its default settings) and grade it as the app grades it.

    python -m examples.check_examples [--model DIR] [--json OUT]

Prints one line per example and how many were right; exits 1 if any "when" answer is out of tolerance.
"""

import argparse
import json
import logging
import os
import sys
import time

from demo.server import load_examples
from tempo import RunConfig, answer, from_pretrained
from tempo.settings import with_settings

log = logging.getLogger("check_examples")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.environ.get("TEMPO_MODEL"), help="default: the embedded Tempo-Tiny")
    parser.add_argument("--json", dest="json_out", help="write every example's answer and grade here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    model = from_pretrained(args.model)
    config = with_settings(RunConfig(), {}, model.spec)
    rows = []
    for example in load_examples():
        started = time.perf_counter()
        finished = answer(model, example.video, example.question, config)
        correct = example.graded(finished, config.sampling)
        rows.append({"label": example.label, "family": example.family, "expected": example.expected,
                     "answer": finished.answer, "correct": correct,
                     "seconds": round(time.perf_counter() - started, 1)})
        log.info("%s  %-44s -> %-28r expected %r", "right" if correct else "WRONG", example.label,
                 finished.answer, example.expected)
    right = sum(row["correct"] for row in rows)
    when_wrong = [row for row in rows if row["family"] == "grounding" and not row["correct"]]
    log.info("%d of %d right; %d of the \"when\" examples out of tolerance", right, len(rows), len(when_wrong))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump({"right": right, "examples": rows}, f, indent=1)
    return 1 if when_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
