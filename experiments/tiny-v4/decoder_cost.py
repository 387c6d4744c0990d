"""Does the decoder need more capacity, and what would it cost? From v3's state file, on this CPU:

1. the first answer on the 10-minute example (`tempo.answer`, the page's default settings, a cold cache) with
   v3's decoder and with it grown deeper (`tempo.train.grow`: the same answers, so the same answer lengths);
2. one training step of 4 composed inputs at W = 16, 64, 128 per decoder size (a wider one too, for its cost);
3. equal steps and equal time: v3's decoder and the grown one trained from the same state on the same stream
   of composed inputs at W = 64 and 128 ("when" two in three, as v3's stage 5), read on held-out inputs.

    PYTHONPATH=. python experiments/tiny-v4/decoder_cost.py --json experiments/tiny-v4/decoder-cost.json
"""

import argparse
import json
import logging
import os
import statistics
import tempfile
import time

import numpy as np
import torch

import tempo
from tempo.model import build_model
from tempo.settings import with_settings
from tempo.synthetic import generate_video
from tempo.train.compose import Composer, build_pool, evaluation_allocation, train_composed, when_within_tolerance
from tempo.train.paper import answer_loss
from tempo.train.recipe import TRAINING_SEEDS
from tempo.train.state import load_state

log = logging.getLogger("decoder_cost")
EXAMPLE = ("examples/synthetic-900002-10min.mp4", "When does the yellow star appear?")
WEIGHTS = (1.0, 4.0, 1.0)  # needle, grounding, counting: v3 stage 5's


def first_answers(directory: str, runs: int) -> dict:
    """Cold first answers on the 10-minute example: wall seconds, the pipeline's timings and the answer."""
    model = tempo.from_pretrained(directory, device="cpu")
    config = with_settings(tempo.RunConfig(), {}, model.spec)
    walls, finished = [], None
    for _ in range(runs):
        started = time.perf_counter()
        finished = tempo.answer(model, *EXAMPLE, config, cache=tempo.VideoCache())
        walls.append(time.perf_counter() - started)
    return {"seconds": [round(w, 3) for w in walls], "median": round(statistics.median(walls), 3),
            "timings": finished.timings, "answer": finished.answer}


def wide_model(directory: str, width: int) -> tempo.TempoModel:
    """A randomly initialised model whose 3-layer decoder is `width` wide (only its cost is measured)."""
    path = os.path.join(directory, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config.update(hidden_size=width, intermediate_size=3 * width, num_attention_heads=width // 32,
                  num_key_value_heads=width // 64)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return build_model(directory, os.path.join(directory, "base-qwen3-vl"), "wide", torch.device("cpu"),
                       torch.float32, initialize=True)


def step_seconds(model: tempo.TempoModel, composer: Composer, steps: int) -> dict:
    """Seconds per training step of 4 composed inputs at each width."""
    model.train()
    model.requires_grad_(False)
    model.decoder.requires_grad_(True)
    rng = np.random.default_rng(0)
    result = {}
    for width in (16, 64, 128):
        started = time.perf_counter()
        train_composed(model, composer, (width,), (steps,), 4, 1e-4, 0.7, rng, steps + 1)
        result[str(width)] = round((time.perf_counter() - started) / steps, 3)
    return result


def held_out_reading(model: tempo.TempoModel, inputs: list) -> dict:
    """Teacher-forced answer loss per family, and greedy "when" answers within tolerance, on fixed inputs."""
    model.eval()
    k_max = model.spec.num_memory_tokens
    losses: dict[str, list[float]] = {}
    within = []
    for example in inputs:
        tokens = evaluation_allocation(example.relevance, k_max)
        with torch.inference_mode():
            loss = answer_loss(model, example.memories.to(model.device, model.dtype), tokens, example.tag_times,
                               example.question, example.answer)
        losses.setdefault(example.family, []).append(loss.item())
        if example.family == "grounding":
            within.append(when_within_tolerance(model, example, tokens))
    return {"loss": round(float(np.mean([v for vs in losses.values() for v in vs])), 4),
            "loss_per_family": {f: round(float(np.mean(v)), 4) for f, v in sorted(losses.items())},
            "when_within": round(float(np.mean(within)), 3), "when_questions": len(within)}


def trained_reading(state: str, layers: int, composer: Composer, steps: int, inputs: list) -> dict:
    """Train a decoder of `layers` from the state file for `steps` (half at W = 64, half at 128), then read it."""
    with tempfile.TemporaryDirectory() as scratch:
        model, _, _, _ = load_state(state, scratch, torch.device("cpu"), layers)
    model.train()
    model.requires_grad_(False)
    model.decoder.requires_grad_(True)
    torch.manual_seed(0)
    started = time.perf_counter()
    summary = train_composed(model, composer, (64, 128), (steps // 2, steps - steps // 2), 4, 1e-3, 0.7,
                             np.random.default_rng(1), 50)
    seconds = time.perf_counter() - started
    losses = summary["losses"]
    return {"layers": layers, "steps": steps, "seconds": round(seconds, 1),
            "train_loss_last_quarter": round(float(np.mean(losses[-max(1, len(losses) // 4):])), 4),
            "held_out": held_out_reading(model, inputs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="experiments/tiny-v3/stage.safetensors")
    parser.add_argument("--layers", type=int, nargs="+", default=[3, 6, 9])
    parser.add_argument("--runs", type=int, default=3, help="first answers per size")
    parser.add_argument("--pool", type=int, default=48, help="short training videos the inputs come from")
    parser.add_argument("--cost-steps", type=int, default=12)
    parser.add_argument("--steps", type=int, default=200, help="A/B steps (v3's decoder also gets twice as many)")
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(os.cpu_count())
    report: dict = {"state": args.state, "first_answer": {}, "step_seconds": {}, "parameters": {}}
    models = {}
    with tempfile.TemporaryDirectory() as scratch:
        for layers in args.layers:
            directory = os.path.join(scratch, f"layers-{layers}")
            models[layers] = load_state(args.state, directory, torch.device("cpu"), layers)[0]
            report["parameters"][f"{layers}x128"] = sum(p.numel() for p in models[layers].decoder.parameters())
            report["first_answer"][f"{layers}x128"] = first_answers(directory, args.runs)
            log.info("first answer, %d layers: %s", layers, report["first_answer"][f"{layers}x128"])
        wide = wide_model(os.path.join(scratch, f"layers-{args.layers[0]}"), 256)
        report["parameters"]["3x256"] = sum(p.numel() for p in wide.decoder.parameters())
    first = TRAINING_SEEDS
    rng = np.random.default_rng(0)
    model = models[args.layers[0]]
    started = time.perf_counter()
    pool = build_pool(model, [generate_video(first + 2000 + i, min_duration=30, max_duration=150)
                              for i in range(args.pool)], rng)
    held = build_pool(model, [generate_video(first + 9100 + i, min_duration=30, max_duration=150)
                              for i in range(16)], rng, first=args.pool)
    report["pool_seconds"] = round(time.perf_counter() - started, 1)
    composer, held_out = Composer(pool, WEIGHTS), Composer(held, WEIGHTS)
    draw = np.random.default_rng(7)
    inputs = [held_out.sample(width, draw) for width in (64, 128) for _ in range(48)]
    for layers, model in models.items():
        report["step_seconds"][f"{layers}x128"] = step_seconds(model, composer, args.cost_steps)
        log.info("step seconds, %d layers: %s", layers, report["step_seconds"][f"{layers}x128"])
    report["step_seconds"]["3x256"] = step_seconds(wide, composer, args.cost_steps)
    log.info("step seconds, 3x256: %s", report["step_seconds"]["3x256"])
    del models, wide
    with tempfile.TemporaryDirectory() as scratch:
        report["before"] = held_out_reading(load_state(args.state, scratch, torch.device("cpu"))[0], inputs)
    log.info("held out before: %s", report["before"])
    report["trained"] = []
    for layers, steps in ((3, args.steps), (6, args.steps), (3, 2 * args.steps)):
        report["trained"].append(trained_reading(args.state, layers, composer, steps, inputs))
        log.info("trained: %s", report["trained"][-1])
    print(json.dumps(report, indent=1))
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
