"""The Tempo-Tiny recipe: its base questions, patch filters and allocation sampling, and a whole run at toy scale
that must load and reproduce."""

import dataclasses
from collections import Counter

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import tempo
from tempo.synthetic import COLOURS, KINDS, generate_video
from tempo.train import data
from tempo.train.base import BaseExamples, shape_patch_filters
from tempo.train.curriculum import train
from tempo.train.paper import training_allocation
from tempo.train.recipe import Recipe
from tempo.video.patches import model_frames, patchify

pytestmark = pytest.mark.slow

K_MAX = 32


@pytest.fixture(scope="module")
def tiny_model():
    return tempo.from_pretrained(device="cpu")  # this module's own copy: a test below rewrites its filters


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


def test_base_questions_are_labelled_right_and_half_of_the_negatives_are_hard(tiny_model):
    videos = [generate_video(1_000_000 + i, min_duration=30, max_duration=150) for i in range(12)]
    examples = BaseExamples(tiny_model, videos, 8, np.random.default_rng(0))
    kinds = Counter()
    for _ in range(600):
        v = int(examples.rng.integers(len(videos)))
        times = examples._frame_run(videos[v], examples.plans[v]).segment_frame_times(0)
        question = examples._question(videos[v], examples.questions[v], times)
        shown = data.big_shapes(videos[v], times)
        label = data.relevant(question, times)
        if question.family == "global":
            kinds["global"] += 1
            continue
        # the label agrees with what the run shows: a question names a big shape in it or one that is not
        named = [event for event in videos[v].events if any(event.start <= t < event.end for t in times)
                 and (question.text == f"What colour is the {event.kind}?"
                      or f"the {event.colour} {event.kind} appear" in question.text)]
        assert label == bool(named), (question.text, shown)
        kinds["positive" if label else "hard negative" if shown != "none." else "negative"] += 1
    assert 0.35 < kinds["positive"] / 600 < 0.55
    assert kinds["hard negative"] > 0.3 * (kinds["hard negative"] + kinds["negative"])
    assert 0.03 < kinds["global"] / 600 < 0.2


def test_shape_filters_see_colour_and_where_a_patch_is_bright(tiny_model):
    compressor = tiny_model.compressor
    weight = compressor.vlm.visual.patch_embed.proj.weight
    before = weight.detach().clone()
    shape_patch_filters(compressor)
    channels, frames, size = weight.shape[1], weight.shape[2], weight.shape[-1]
    red = torch.zeros(channels, frames, size, size)
    red[0] = 1.0
    corner = torch.zeros(channels, frames, size, size)
    corner[:, :, :size // 4, -(size // 4):] = 1.0  # the top-right cell of the 4x4 thumbnail
    responses = torch.stack([red.flatten(), corner.flatten()]) @ weight.detach().reshape(len(weight), -1).T
    assert torch.allclose(responses[0, :3], torch.tensor([4.0, 0.0, 0.0]))
    thumbnail = responses[1, 3:19].reshape(4, 4)
    assert torch.count_nonzero(thumbnail) == 1 and thumbnail[0, 3] > 0
    assert torch.equal(weight[19:], before[19:])  # the other filters keep their initialisation


def test_recipe_at_toy_scale_trains_a_loadable_reproducible_model(tmp_path):
    # two videos and two steps per stage, 8 segments a long video
    recipe = dataclasses.replace(Recipe(seed=3).scaled(0.001), max_frames=64, medium_frames=64)
    runs = []
    for name in ("first", "second"):
        report = train(str(tmp_path / name), recipe, torch.device("cpu"))
        assert set(report["parts"]) == {"base clips", "base", "encode", "stage 0a", "stage 0", "stage 1",
                                         "stage 2", "stage 3"}
        stage_3 = report["parts"]["stage 3"]
        assert 0 < stage_3["compress_seconds"] < stage_3["seconds"]  # the up-front compression is counted
        runs.append(load_file(str(tmp_path / name / "model.safetensors")))
    assert runs[0].keys() == runs[1].keys()
    assert all(torch.equal(runs[0][key], runs[1][key]) for key in runs[0])

    model = tempo.from_pretrained(str(tmp_path / "first"), device="cpu")
    assert model.spec.num_memory_tokens == K_MAX


def test_token_labels_name_the_shape_under_each_vision_token(tiny_model):
    """Each merged token's labels match the pixels of its own four patch rows, in the vision tower's order."""
    geometry = tiny_model.geometry
    video = generate_video(1_000_007, min_duration=30, max_duration=150)
    event = video.events[0]
    middle = (event.start + event.end) / 2
    times = [middle + (i - 4) / 2 for i in range(8)]  # 2 fps around the event
    labels = data.token_labels(video, times, geometry)  # [pairs, rows, cols, 3]
    pixels, grid = patchify(model_frames(np.stack(video.frames(times)), geometry), geometry)
    assert labels.shape == (4, grid[1] // 2, grid[2] // 2, 3)
    flat = torch.from_numpy(labels.reshape(-1, 3))
    assert len(flat) == grid[0] * grid[1] * grid[2] // 4
    assert flat[:, 0].max() <= len(KINDS) and flat[:, 1].max() <= len(COLOURS)
    blocks = pixels.reshape(len(flat), 4, 3, -1)  # [tokens, 2x2 patches, channels, 2 frames x 16 x 16]
    event_tokens = torch.nonzero(flat[:, 1]).flatten()
    assert len(event_tokens) >= 4
    for token in event_tokens.tolist():
        rgb = torch.tensor(COLOURS[list(COLOURS)[flat[token, 1] - 1]], dtype=pixels.dtype)
        matches = (blocks[token] == rgb[None, :, None]).all(1)  # [4, 512]: pixels of the labelled colour
        assert matches.float().mean() >= 0.1, token  # 20% of one frame is 10% of the two
    # the event's own centre token carries its kind and colour while it is shown
    cell = geometry.patch_size * geometry.merge_size
    centre = labels[:, int(event.y) // cell, int(event.x) // cell]
    assert (centre[:, 0] == KINDS.index(event.kind) + 1).any()
    assert (centre[:, 1] == list(COLOURS).index(event.colour) + 1).any()
    # and moving shapes are labelled apart from events
    assert flat[:, 2].any()
