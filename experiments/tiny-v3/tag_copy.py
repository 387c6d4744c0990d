"""Why "when" answers fail, and what makes the decoder copy a time tag: trains a copy of a stage's decoder on
composed grounding inputs only and reads, per width, teacher-forced exact match, per-digit accuracy and greedy
answers graded with the grader's tolerance (half a segment + 1 s). Uses a loadable checkpoint (--model).

    PYTHONPATH=. python experiments/tiny-v3/tag_copy.py --model DIR --videos 100 --held-out 20 \
        --widths 1,2,4,8 --steps 1500,1500,2000,2000 --eval 30 --json experiments/tiny-v3/tag-copy-b.json"""

import argparse
import json
import logging
import time

import numpy as np

import tempo
from tempo.synthetic import generate_video
from tempo.train.compose import (
    Composer,
    build_pool,
    evaluation_allocation,
    top_choices,
    train_composed,
    when_within_tolerance,
)
from tempo.train.recipe import TRAINING_SEEDS


def digits_right(model, example, tokens) -> tuple[float, bool]:
    """Teacher-forced share of the answer's digit tokens that are the top choice, and whether all tokens are."""
    top, answer_ids = top_choices(model, example, tokens)
    digit = [i for i, t in enumerate(answer_ids) if model.tokenizer.decode([t]).isdigit()]
    return float(np.mean([top[i] == answer_ids[i] for i in digit])), top == answer_ids


def measure(model, composer: Composer, widths, per_width: int, seed: int = 0) -> dict:
    """Per width: the share of answer digits right, exact matches, and greedy answers the grader accepts."""
    rng = np.random.default_rng(seed)
    k_max = model.spec.num_memory_tokens
    out = {}
    for width in widths:
        rows = []
        for _ in range(per_width):
            example = composer.sample(width, rng)
            tokens = evaluation_allocation(example.relevance, k_max)
            share, exact = digits_right(model, example, tokens)
            rows.append((share, exact, when_within_tolerance(model, example, tokens)))
        out[str(width)] = {"digits": round(float(np.mean([r[0] for r in rows])), 3),
                           "exact": round(float(np.mean([r[1] for r in rows])), 3),
                           "tolerance": round(float(np.mean([r[2] for r in rows])), 3)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--videos", type=int, default=120)
    parser.add_argument("--held-out", type=int, default=30)
    parser.add_argument("--widths", default="1,4,16")
    parser.add_argument("--steps", default="600,600,600")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval", type=int, default=30)
    parser.add_argument("--json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    model = tempo.from_pretrained(args.model, device="cpu")
    model.requires_grad_(False)
    rng = np.random.default_rng(0)
    first = TRAINING_SEEDS + 7 * 10_000  # away from the stages' own pools
    started = time.perf_counter()
    pool = Composer(build_pool(model, [generate_video(first + i, min_duration=30, max_duration=150)
                                       for i in range(args.videos)], rng, families=("grounding",)))
    held = Composer(build_pool(model, [generate_video(first + 9_500 + i, min_duration=30, max_duration=150)
                                       for i in range(args.held_out)], rng, first=args.videos,
                               families=("grounding",)))
    print(f"pools: {time.perf_counter() - started:.0f} s, {len(pool.pool)} / {len(held.pool)} questions", flush=True)
    widths = tuple(int(w) for w in args.widths.split(","))
    steps = tuple(int(s) for s in args.steps.split(","))
    report = {"args": vars(args), "before": measure(model, held, widths, args.eval)}
    print("before", report["before"], flush=True)
    model.train()
    model.decoder.requires_grad_(True)
    started = time.perf_counter()
    report["training"] = train_composed(model, pool, widths, steps, 4, args.lr, 0.7, rng, 100)
    report["training_seconds"] = round(time.perf_counter() - started, 1)
    model.eval()
    report["after"] = measure(model, held, widths, args.eval)
    print("after", report["after"], f"({report['training_seconds']} s)", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
