"""What stage 3 costs per unit on this CPU, to size its steps: building the memory pool per video, and one
training step (batch 4) of composed inputs at each width. Uses a loadable checkpoint of any stage (--model)."""

import argparse
import time

import numpy as np

import tempo
from tempo.synthetic import generate_video
from tempo.train.compose import Composer, build_pool, train_composed
from tempo.train.recipe import TRAINING_SEEDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--videos", type=int, default=12)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    model = tempo.from_pretrained(args.model, device="cpu")
    rng = np.random.default_rng(0)
    videos = [generate_video(TRAINING_SEEDS + 200 + i, min_duration=30, max_duration=150) for i in range(args.videos)]
    started = time.perf_counter()
    pool = build_pool(model, videos, rng)
    pool_seconds = time.perf_counter() - started
    print(f"pool: {pool_seconds / len(videos):.2f} s per video ({len(pool)} questions, "
          f"{sum(len(item.labels) for item in pool)} segment memories)")
    composer = Composer(pool)
    model.train()
    model.requires_grad_(False)
    model.decoder.requires_grad_(True)
    for width in (1, 4, 16, 64, 128):  # the stage's own training loop, one phase of `--steps` steps per width
        started = time.perf_counter()
        train_composed(model, composer, (width,), (args.steps,), 4, 1e-4, 0.7, rng, args.steps + 1)
        print(f"W={width}: {(time.perf_counter() - started) / args.steps:.2f} s per step of 4")

if __name__ == "__main__":
    main()
