"""What stage 3 costs per unit on this CPU, to size its steps: building the memory pool per video, and one
training step (batch 4) of composed inputs at each width. Uses a loadable checkpoint of any stage (--model)."""

import argparse
import time

import numpy as np
import torch

import tempo
from tempo.synthetic import generate_video
from tempo.train.compose import Composer, build_pool
from tempo.train.loop import Schedule
from tempo.train.recipe import TRAINING_SEEDS
from tempo.train.stages import answer_loss, training_allocation


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
    schedule = Schedule([{"params": list(model.decoder.parameters()), "lr": 1e-4}], 1000)
    k_max = model.spec.num_memory_tokens
    for width in (1, 4, 16, 64, 128):
        started = time.perf_counter()
        for _ in range(args.steps):
            for _ in range(4):
                example = composer.sample(width, rng)
                tokens = training_allocation(example.relevance, k_max, rng, 0.7)
                loss = answer_loss(model, example.memories.float(), tokens, example.tag_times, example.question,
                                   example.answer) / 4
                loss.backward()
            schedule.step()
        print(f"W={width}: {(time.perf_counter() - started) / args.steps:.2f} s per step of 4")
    torch.set_grad_enabled(True)


if __name__ == "__main__":
    main()
