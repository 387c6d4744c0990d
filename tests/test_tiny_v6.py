"""Tempo-Tiny v6: v5's decoder grown wider (and deeper) answers exactly as before, stays within the size limit, and
stage 12 goes on from v5's state file with it; a stage's pools are saved once; stage 13 pools counting alone from the
rest of its slot."""

import dataclasses
import json
import os
import signal
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import tempo
from tempo.synthetic import generate_video
from tempo.train import blend_stages, compose_long, state
from tempo.train.blend_stages import blend_samplers, pool_sizes, stage_pools
from tempo.train.compose import FAMILIES
from tempo.train.compose_long import OwnVideo, kept_segments
from tempo.train.grow import decoder_size, widened
from tempo.train.recipe import BlendStage, DecoderSize, Recipe
from tempo.train.staged import run_stage
from tempo.train.state import cached_pools, load_state, pools_key
from tests.conftest import ROOT
from tests.test_tiny_v4 import pool_without_compression

V5_STATE = ROOT / "experiments" / "tiny-v5" / "stage.safetensors"
SIZES = (DecoderSize(layers=3, width=160, heads=6, kv_heads=3, mlp_width=512),
         DecoderSize(layers=4, width=144, heads=4, kv_heads=2, mlp_width=448))
MAX_BYTES = 8_000_000  # issue 59: the whole Tempo checkpoint, float32 as stored


def answer_logits(model, memories: torch.Tensor) -> torch.Tensor:
    """The decoder's logits for a question over these memories [W, k_max, d_s], ATA-like token counts."""
    tokens = [32 if i == 5 else 4 for i in range(len(memories))]
    tags = [2.0 + 4.0 * i for i in range(len(memories))]
    answer = model.tokenizer.text("From 18.0 to 26.0 seconds.")
    with torch.inference_mode():
        embeds, _ = model.decoder_inputs(memories, tokens, "head", "From when to when is the red star visible?",
                                         tags, answer_ids=answer)
        return model.decoder.lm(inputs_embeds=embeds[None]).logits[0]


@pytest.fixture(scope="module")
def v5(tmp_path_factory):
    return load_state(str(V5_STATE), str(tmp_path_factory.mktemp("v5")), torch.device("cpu"))[0]


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=["wider", "wider and deeper"])
def test_a_widened_decoder_answers_as_v5_s_and_fits_the_size_limit(v5, size, tmp_path):
    grown, _, _, stage = load_state(str(V5_STATE), str(tmp_path), torch.device("cpu"), decoder=size)
    assert stage == 11 and decoder_size(grown.state_dict()) == size
    config = json.load(open(tmp_path / "config.json"))
    assert (config["hidden_size"], config["num_attention_heads"], config["num_key_value_heads"],
            config["intermediate_size"], config["num_hidden_layers"]) == (size.width, size.heads, size.kv_heads,
                                                                          size.mlp_width, size.layers)
    memories = torch.randn(12, 32, 96, generator=torch.Generator().manual_seed(0))
    before, after = answer_logits(v5, memories), answer_logits(grown, memories)
    # the same answers: the norms' epsilon is not scaled with their weights, so logits move by ~3e-4 of ~5
    assert torch.equal(before.argmax(-1), after.argmax(-1))
    assert torch.allclose(before, after, atol=1e-3), (before - after).abs().max()
    tensors = grown.state_dict()
    new_rows = tensors["decoder.lm.model.layers.0.self_attn.o_proj.weight"][128:]
    assert not new_rows.any()  # nothing is written to the new residual dimensions ...
    assert tensors["decoder.lm.model.layers.0.mlp.gate_proj.weight"][384:].abs().sum() > 0  # ... new units read
    assert os.path.getsize(tmp_path / "model.safetensors") <= MAX_BYTES
    reloaded = tempo.from_pretrained(str(tmp_path), device="cpu")  # the released format loads it as it is
    assert torch.allclose(answer_logits(reloaded, memories), after, atol=1e-5)


@pytest.mark.slow
def test_a_decoder_only_grows_and_keeps_each_query_head_s_key_value_head(v5):
    tensors = v5.state_dict()
    old = decoder_size(tensors)
    with pytest.raises(ValueError, match="does not shrink"):
        widened(tensors, dataclasses.replace(old, width=96))
    with pytest.raises(ValueError, match="regroup"):
        widened(tensors, dataclasses.replace(old, width=160, heads=6, kv_heads=2))


def test_stage_12_grows_v5_s_decoder():
    """v5's decoder, read from its state file's header: 3 layers of width 128, 4 query and 2 key-value heads of 32,
    an MLP of 384. Stage 12's is no smaller in any of them and larger in one (the size limit is held by the slow
    test above, on the grown checkpoint's file)."""
    from safetensors import safe_open

    with safe_open(str(V5_STATE), "pt") as tensors:
        layers = {name.split(".")[4] for name in tensors.keys() if name.startswith("decoder.lm.model.layers.")}
        q, k, gate = (tensors.get_slice(f"decoder.lm.model.layers.0.{part}.weight").get_shape()
                      for part in ("self_attn.q_proj", "self_attn.k_proj", "mlp.gate_proj"))
    v5 = DecoderSize(layers=len(layers), width=q[1], heads=q[0] // 32, kv_heads=k[0] // 32, mlp_width=gate[0])
    assert v5 == DecoderSize(layers=3, width=128, heads=4, kv_heads=2, mlp_width=384)
    stage = Recipe().stage(12)
    assert isinstance(stage, BlendStage) and stage.version == "v6" and stage.decoder is not None
    grown = dataclasses.astuple(stage.decoder)
    assert all(new >= old for new, old in zip(grown, dataclasses.astuple(v5))) and grown != dataclasses.astuple(v5)
    slots = [s.slot for s in Recipe().stages if isinstance(s, BlendStage)]
    assert slots.count(stage.slot) == 1  # fresh videos no other stage pools


@pytest.mark.slow
def test_stages_12_and_13_go_on_from_v5_s_state_file_with_its_grown_decoder(tmp_path):
    # four videos of each length a slot, so that stage 13's halves pool two each: a Composer needs two videos
    recipe = dataclasses.replace(Recipe(seed=5).scaled(0.001), blend_max_duration=60.0, blend_videos=4,
                                 blend_short_videos=4)
    state = str(tmp_path / "v6" / "stage.safetensors")
    report = run_stage(12, recipe, state, str(tmp_path / "twelve"), torch.device("cpu"), 50, source=str(V5_STATE))
    size = recipe.stage(12).decoder
    assert report["decoder_width"] == size.width and report["decoder_layers"] == size.layers
    curve = report["parts"]["blend"]["growth_curve"]
    assert [point["after_width"] for point in curve] == list(recipe.stage(12).widths)
    assert all(0 <= value <= 1 for point in curve for name in point if isinstance(point[name], dict)
               for cell in point[name].values() for value in cell.values())
    training_log = json.load(open(tmp_path / "twelve" / "training_log.json"))
    assert training_log["recipe"].startswith("Tempo-Tiny v6")
    assert list(training_log["stages"]) == [str(n) for n in range(1, 13)]  # v5's logs came with its state
    model = tempo.from_pretrained(str(tmp_path / "twelve"), device="cpu")
    assert model.decoder.lm.config.hidden_size == size.width and model.spec.repetition_guard
    thirteenth = run_stage(13, recipe, state, None, torch.device("cpu"), 50)  # counting pooled alone, from W = 8
    assert thirteenth["decoder_layers"] == size.layers
    assert [point["after_width"] for point in thirteenth["parts"]["blend"]["growth_curve"]] == \
        list(recipe.stage(13).widths)


def test_a_stage_s_pools_are_built_once_and_read_back_with_the_random_streams_after_them(tmp_path):
    path, key = str(tmp_path / "stage-12-pools.pt"), {"stage": 12, "compressor": "abc"}
    calls = []

    def build(rng):
        calls.append(1)
        return {"items": rng.integers(0, 1000, 5).tolist(), "noise": torch.rand(3)}

    first_rng = np.random.default_rng(7)
    torch.manual_seed(0)
    cached = cached_pools(path, key, lambda: build(first_rng), first_rng)
    built = cached.pools
    assert not cached.read and cached.built_seconds is not None and 0 <= cached.built_seconds < 60
    after_building = (first_rng.integers(0, 1000, 3).tolist(), torch.rand(2))
    second_rng = np.random.default_rng(7)
    torch.manual_seed(0)
    again = cached_pools(path, key, lambda: build(second_rng), second_rng)
    read = again.pools
    # the report says the pools were read, and still gives the time building them took (what the file recorded)
    saved = torch.load(path, weights_only=False)
    assert again.read and again.built_seconds == saved["seconds"] and saved["seconds"] == cached.built_seconds
    assert len(calls) == 1 and read["items"] == built["items"] and torch.equal(read["noise"], built["noise"])
    # training goes on from the same draws as it did after building them
    assert second_rng.integers(0, 1000, 3).tolist() == after_building[0]
    assert torch.equal(torch.rand(2), after_building[1])
    other = cached_pools(path, {**key, "compressor": "def"}, lambda: build(np.random.default_rng(8)),
                         np.random.default_rng(8)).pools
    assert len(calls) == 2 and other["items"] != built["items"]


def test_stage_13_pools_counting_alone_from_the_rest_of_its_slot_and_changes_no_other_pool(monkeypatch):
    recipe = dataclasses.replace(Recipe().scaled(0.02), blend_max_duration=90.0)
    stage = recipe.stage(13)
    assert isinstance(stage, BlendStage) and stage.counting_pool_share > 0
    assert stage.layers == 5  # stage 12's grown decoder (V6_DECODER: 5 layers), which it must not shrink
    calls: list[tuple[tuple[str, ...], list[int]]] = []

    def without_compression(model, videos, rng, first=0, families=FAMILIES, max_frames=1024):
        calls.append((tuple(families), [video.seed for video in videos]))
        items = pool_without_compression(videos, families)
        return [items[i] for i in rng.permutation(len(items))]  # the order says where the stage's stream stood

    for module in (compose_long, state, blend_stages):
        monkeypatch.setattr(module, "build_pool", without_compression)
    blend, _ = blend_samplers(stage_pools(None, recipe, stage, np.random.default_rng(0)), recipe, stage)
    counting_seeds = [seeds for families, seeds in calls if families == ("counting",)]
    assert len(counting_seeds) == 1 and len(counting_seeds[0]) == sum(
        pool_sizes(recipe, stage, stage.counting_pool_share))
    other_seeds = {seed for families, seeds in calls if families != ("counting",) for seed in seeds}
    assert not other_seeds & set(counting_seeds[0])  # fresh videos: the rest of the stage's slot
    counting = blend.samplers[-1]
    assert {item.family for item in counting.pool} == {"counting"} and len(blend.samplers) == len(stage.weights)
    calls.clear()
    without = dataclasses.replace(stage, counting_pool_share=0.0, weights=stage.weights[:-1])
    alone, _ = blend_samplers(stage_pools(None, recipe, without, np.random.default_rng(0)), recipe, without)

    def questions(blend) -> list[list[tuple]]:
        items = [[getattr(i, "item", i) for i in sampler.pool] for sampler in blend.samplers]  # global: GlobalItem
        return [[(i.video, i.question, i.answer, i.labels) for i in pool] for pool in items]

    assert questions(alone) == questions(blend)[:-1]


def test_an_own_video_sampler_refuses_a_width_no_question_fits_instead_of_drawing_for_ever():
    videos = [generate_video(1_004_840 + i, min_duration=300, max_duration=600) for i in range(3)]
    pool = [item for item in pool_without_compression(videos, ("counting",)) if sum(item.labels) >= 3]
    narrowest = min(len(kept_segments(item)) for item in pool)
    assert narrowest < min(len(item.labels) for item in pool)
    sampler = OwnVideo(pool, families=("counting",))
    assert sampler.sample(narrowest, np.random.default_rng(0)).family == "counting"

    def hung(signum, frame):
        raise AssertionError("still drawing after 60 s: the width no question fits was not refused")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)  # a regression would loop for ever: fail it instead of hanging the suite
    try:
        with pytest.raises(ValueError, match=f"within {narrowest - 1} segments"):
            sampler.sample(narrowest - 1, np.random.default_rng(0))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_stage_s_pools_are_kept_across_training_changes_but_not_across_videos_or_compressors():
    recipe = Recipe()
    stage = recipe.stage(13)
    assert isinstance(stage, BlendStage)
    model = SimpleNamespace(compressor=torch.nn.Linear(2, 2))
    key = pools_key(recipe, stage, model)
    retuned = dataclasses.replace(stage, weights=(0.4, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1), steps=(1, 2, 3, 4, 5), lr=1.0,
                                  temporal_weights=(2.0, 1.0))
    assert pools_key(dataclasses.replace(recipe, stages=recipe.stages[:13]), retuned, model) == key
    assert pools_key(recipe, dataclasses.replace(stage, slot=9), model) != key
    assert pools_key(dataclasses.replace(recipe, seed=1), stage, model) != key
    relevance = recipe.stage(15)  # a relevance stage's videos depend on its number alone among its settings
    assert pools_key(recipe, dataclasses.replace(relevance, steps=1, lr=1.0, anchor=0.0), model) == \
        pools_key(recipe, relevance, model) != pools_key(recipe, dataclasses.replace(relevance, number=16), model)
    with torch.no_grad():
        model.compressor.weight.add_(1.0)
    assert pools_key(recipe, stage, model) != key
