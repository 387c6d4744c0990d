"""Which ranked moments a person should be shown: each candidate rule (a moment is shown when its score is at least
a share of the best one's) measured on what Tempo-Tiny's compressor saw on the 48 synthetic queries of
`experiments/moments/` (tuning seeds 200,000-200,007 and held-out 700,000-700,007; their truth read from the world
itself) and on the shipped examples whose evidence is one stretch (seven; Tempo-Tiny's moments on them recorded
once, with the page's settings, by --record). For each rule: how many moments a run shows, and whether the true
moment (the best-ranked moment that overlaps the evidence) is still among them. Without --record no model runs.

    python -m benchmarks.shown_moments --record   # first, the examples' moments: results/example-moments-cpu.json
    python -m benchmarks.shown_moments            # writes benchmarks/results/shown-moments.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tempo.eval.grounding import load_observations
from tempo.moments import Moment, find_moments
from tempo.synthetic.generation import generate_video
from tempo.train.eval_videos import questions_of

ROOT = Path(__file__).resolve().parent.parent
OBSERVED = [ROOT / "experiments" / "moments" / f"{name}-observations.jsonl" for name in ("tuning", "heldout")]
RECORDED = ROOT / "benchmarks" / "results" / "example-moments-cpu.json"  # the examples' moments, from --record
SHARES = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5)  # 0: every ranked moment, as the page showed them before
DURATIONS = (60.0, 3600.0)  # `tempo eval export`'s default range, which drew the observed videos


@dataclass(frozen=True)
class Query:
    """One run's ranked moments (with zoom's window where it read one) and where the truth is."""

    qid: str
    moments: tuple[Moment, ...]
    evidence: tuple[tuple[float, float], ...]


def synthetic_queries() -> list[Query]:
    """The observed queries, their truth from the world drawn again from each seed (no video is rendered)."""
    queries = []
    for path in OBSERVED:
        for qid, observed in load_observations(str(path)).items():
            seed, family = qid.rsplit("-", 1)
            video = generate_video(int(seed), min_duration=DURATIONS[0], max_duration=DURATIONS[1])
            question = questions_of(video, int(seed), (family,))[0]
            queries.append(Query(qid, find_moments(observed.segments, observed.window), question.evidence))
    return queries


def located_examples() -> list[dict]:
    """The shipped examples whose evidence is one stretch of the video (a global question's is all of it)."""
    examples = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))
    return [e for e in examples if e["family"] != "global"]


def record() -> None:
    """Tempo-Tiny's ranked moments on each located example, run as the page runs it (its defaults: zoom auto; the
    answer cut to a few tokens, which moments do not read), written to RECORDED."""
    from tempo.config import RunConfig
    from tempo.engine import answer
    from tempo.model import from_pretrained
    from tempo.settings import with_settings

    model = from_pretrained(device="cpu")
    config = with_settings(RunConfig(), {"max_new_tokens": 4}, model.spec)
    found = []
    for example in located_examples():
        finished = answer(model, str(ROOT / "examples" / example["video"]), example["question"], config)
        found.append({"label": example["label"], "moments": [m.to_dict() for m in finished.moments]})
        print(f"{example['label']}: {[m.score for m in finished.moments]}", flush=True)
    RECORDED.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")


def example_queries() -> list[Query]:
    """The located examples as --record recorded their moments."""
    truth = {e["label"]: e["evidence"] for e in located_examples()}
    return [Query("example: " + run["label"], tuple(Moment(m["start"], m["end"], m["score"]) for m in run["moments"]),
                  tuple(tuple(span) for span in truth[run["label"]]))
            for run in json.loads(RECORDED.read_text(encoding="utf-8"))]


def true_rank(query: Query) -> int | None:
    """The rank (0 = best) of the best-ranked moment overlapping the evidence; None when no moment does."""
    return next((rank for rank, m in enumerate(query.moments)
                 if any(m.start < end and start < m.end for start, end in query.evidence)), None)


def kept(moments: Sequence[Moment], share: float) -> int:
    """How many moments a rule shows: those scoring at least `share` of the best."""
    best = max((m.score for m in moments), default=0.0)
    return sum(m.score >= share * best for m in moments)


def measure(queries: Sequence[Query], share: float) -> dict:
    """One rule over every query: moments shown (mean, most, runs showing one) and true moments kept or lost."""
    shown = [kept(q.moments, share) for q in queries]
    found = [(q, rank) for q in queries if (rank := true_rank(q)) is not None]
    lost = [q.qid for q, rank in found if rank >= kept(q.moments, share)]
    return {"share": share, "mean_shown": round(statistics.mean(shown), 2), "most_shown": max(shown),
            "runs_showing_one": sum(n == 1 for n in shown), "true_moments": len(found),
            "true_moments_kept": len(found) - len(lost), "true_moments_lost": lost}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", dest="json_out", type=Path,
                        default=ROOT / "benchmarks" / "results" / "shown-moments.json")
    parser.add_argument("--record", action="store_true", help="run Tempo-Tiny on the examples first (minutes)")
    args = parser.parse_args()
    if args.record:
        record()
    examples = example_queries()
    queries = [*synthetic_queries(), *examples]
    rows = [measure(queries, share) for share in SHARES]
    print(f"{len(queries)} runs; {sum(len(q.moments) for q in queries)} ranked moments")
    print("share  mean shown  most  runs showing one  true moment kept")
    for row in rows:
        lost = ", ".join(row["true_moments_lost"]) or "-"
        print(f"{row['share']:5.2f}  {row['mean_shown']:10.2f}  {row['most_shown']:4d}  {row['runs_showing_one']:16d}"
              f"  {row['true_moments_kept']}/{row['true_moments']} (lost: {lost})")
    found = [(q.moments[rank].score / q.moments[0].score, q.qid) for q in queries
             if (rank := true_rank(q)) is not None and rank > 0]
    print("true moments not ranked first, their score as a share of the best: "
          + ", ".join(f"{qid} {share:.2f}" for share, qid in sorted(found)))
    for example in examples:
        print(f"{example.qid}: scores {[m.score for m in example.moments]}; shown at each share: "
              f"{[kept(example.moments, share) for share in SHARES]}")
    args.json_out.parent.mkdir(parents=True, exist_ok=True)
    args.json_out.write_text(json.dumps({
        "runs": len(queries), "rules": rows,
        "true_moments_below_the_best": {qid: round(share, 4) for share, qid in sorted(found)},
        "examples": {q.qid: {"scores": [m.score for m in q.moments],
                             "shown": [kept(q.moments, share) for share in SHARES]} for q in examples}},
        indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
