"""Rule 2 (README, "Decision rules"): the stage to ship, from each stage's evaluation on the tuning seeds and its
shipped-examples check. Every ordering kept, then the highest ATA accuracy over six families; within 1 point,
fewer answers outside the video, then more shipped examples right, then the earlier stage.

    PYTHONPATH=. .venv/bin/python experiments/tiny-v6/choose_stage.py            # the stages evaluated so far
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
V5 = HERE.parent / "tiny-v5"
V7 = HERE.parent / "tiny-v7"  # v7's stages (15 on) go on from v6's 12 and are chosen by the same rule
ONE_EVIDENCE = ("needle", "grounding", "counting")  # the old four's families with evidence (global has none)


@dataclass(frozen=True)
class Candidate:
    stage: int
    accuracy: float  # ATA, all six families
    localisation: float  # over the old four (their families with one evidence event)
    ata_minus_uniform_low: float
    uniform: float
    adversarial: float
    head: float
    tail: float
    outside: int
    examples: int

    @property
    def orderings(self) -> dict[str, bool]:
        return {"localisation >= 85%": self.localisation >= 0.85,
                "ATA - uniform above 0": self.ata_minus_uniform_low > 0,
                "uniform > adversarial": self.uniform > self.adversarial, "head > tail": self.head > self.tail}


def candidate(stage: int, evaluation: Path, examples: Path) -> Candidate:
    report = json.loads(evaluation.read_text())
    ata = report["strategies"]["ata"]
    located = ata["localization_per_family"]
    return Candidate(stage, ata["accuracy"], sum(located[f] for f in ONE_EVIDENCE) / len(ONE_EVIDENCE),
                     report["intervals"]["ata_minus_uniform"]["low"], report["strategies"]["uniform"]["accuracy"],
                     report["strategies"]["adversarial"]["accuracy"], report["truncation"]["head"]["accuracy"],
                     report["truncation"]["tail"]["accuracy"], ata["outside_video"]["answers"],
                     json.loads(examples.read_text())["right"])


def chosen(candidates: list[Candidate]) -> Candidate:
    """Rule 2 over the candidates that keep every ordering."""
    kept = [c for c in candidates if all(c.orderings.values())]
    if not kept:
        raise SystemExit("No stage keeps every ordering; rule 2 ships none.")
    best = max(c.accuracy for c in kept)
    close = [c for c in kept if c.accuracy >= best - 0.01]
    return min(close, key=lambda c: (c.outside, -c.examples, c.stage))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stages", type=int, nargs="+", default=[11, 12, 13, 14],
                        help="stages to compare; stage 11 is v5's, read from experiments/tiny-v5, stages from 15 "
                             "v7's, from experiments/tiny-v7")
    stages = parser.parse_args().stages
    candidates = []
    for stage in stages:
        folder = V5 if stage <= 11 else HERE if stage <= 14 else V7
        evaluation, examples = folder / f"eval-stage-{stage}.json", folder / f"examples-stage-{stage}.json"
        if evaluation.is_file() and examples.is_file():
            candidates.append(candidate(stage, evaluation, examples))
    if not candidates:
        raise SystemExit(f"None of stages {stages} has both its evaluation and its examples check.")
    print("| stage | ATA, six | localisation, four | ATA - uniform low | uniform / adversarial | head / tail | "
          "outside | examples | orderings |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in candidates:
        print(f"| {c.stage} | {c.accuracy:.1%} | {c.localisation:.1%} | {c.ata_minus_uniform_low:+.1%} | "
              f"{c.uniform:.1%} / {c.adversarial:.1%} | {c.head:.1%} / {c.tail:.1%} | {c.outside} | {c.examples} | "
              f"{', '.join(k for k, kept in c.orderings.items() if not kept) or 'kept'} |")
    print(f"\nRule 2 picks stage {chosen(candidates).stage} of {[c.stage for c in candidates]}.")


if __name__ == "__main__":
    main()
