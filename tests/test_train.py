"""The Tempo-Tiny recipe: its allocation sampling, and a whole run at toy scale that must load and reproduce."""

import numpy as np
import torch
from safetensors.torch import load_file

import tempo
from tempo.train.recipe import Recipe, train, training_allocation

K_MAX = 32


def test_training_allocations_mix_ata_with_random_counts():
    relevance = [0.1] * 15 + [0.9]  # one relevant segment
    rng = np.random.default_rng(0)
    draws = [training_allocation(relevance, K_MAX, rng) for _ in range(200)]
    assert all(len(d) == 16 and all(1 <= k <= K_MAX for k in d) for d in draws)
    # ATA (k_min = 4): every irrelevant segment at the floor, the relevant one above it
    ata_like = [d for d in draws if d[:15] == [4] * 15 and d[15] > 4]
    assert 0.25 < len(ata_like) / len(draws) < 0.6
    assert any(d == [K_MAX] * 16 for d in draws)
    shared = [d for d in draws if len(set(d)) == 1 and d[0] < K_MAX]
    per_segment = [tuple(d) for d in draws if len(set(d)) > 1 and d not in ata_like]
    assert len(shared) > 10 and len({d[0] for d in shared}) > 5
    assert len(per_segment) > 30 and len(set(per_segment)) == len(per_segment)


def test_recipe_at_toy_scale_trains_a_loadable_reproducible_model(tmp_path):
    recipe = Recipe(seed=3).scaled(0.001)  # two videos and two steps per stage
    runs = []
    for name in ("first", "second"):
        report = train(str(tmp_path / name), recipe, torch.device("cpu"))
        assert set(report["stages"]) == {"base clips", "base", "encode", "stage 0a", "stage 0", "stage 1",
                                         "stage 2", "stage 3"}
        runs.append(load_file(str(tmp_path / name / "model.safetensors")))
    assert runs[0].keys() == runs[1].keys()
    assert all(torch.equal(runs[0][key], runs[1][key]) for key in runs[0])

    model = tempo.from_pretrained(str(tmp_path / "first"), device="cpu")
    assert model.spec.num_memory_tokens == K_MAX
