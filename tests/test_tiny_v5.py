"""Tempo-Tiny v5's stage 8: interval and order inputs are what they claim (the evidence kept, in the video's order,
answered from the tags), the pools compress each new question once and change no other item, the samplers of
stages 6 and 7 draw exactly as before, and stages 6, 7 and 8 go on from v3's state file one after another."""

import dataclasses
import hashlib
import json

import numpy as np
import pytest
import torch

import tempo
from tempo.synthetic import TEMPORAL_FAMILIES, generate_video
from tempo.train import data
from tempo.train.blend_stages import pool_sizes, seed_offsets
from tempo.train.compose import Composed, Composer, Mixture
from tempo.train.compose_long import Blend, GlobalComposer, GlobalItem, OwnVideo, VideoTags, kind_counts
from tempo.train.recipe import BlendStage, Recipe, Stage, shared_settings
from tempo.train.staged import run_stage
from tests.conftest import ROOT
from tests.test_tiny_v4 import V3_STATE, pool_without_compression, sources

pytestmark = pytest.mark.slow

FROZEN = json.loads((ROOT / "tests" / "fixtures" / "synthetic" / "v4.json").read_text())
STAGE_SETTINGS = json.loads((ROOT / "tests" / "fixtures" / "train" / "stage-settings.json").read_text())
OLD = ("needle", "grounding", "counting")
# blend stage settings v6 and v7 added, unset before
V6_FIELDS = ("decoder", "counting_pool_share", "temporal_weights", "follows", "distractors", "uneven_tags")


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def sampler_fingerprints() -> dict[str, str]:
    """What v3's and v4's samplers and v5's stage 7 blend draw from fixed pools (memories that name their source),
    ten inputs per width from one seeded stream each, hashed per sampler."""
    videos = [generate_video(1_004_000 + i, min_duration=60, max_duration=900) for i in range(3)]
    pool = pool_without_compression(videos, OLD)
    global_pool = [GlobalItem(item, kind_counts(video))
                   for item, video in zip(pool_without_compression(videos, ("global",)), videos)]
    weights = (1.0, 2.0, 1.0)
    samplers = {
        "other videos": Composer(pool, weights), "own video": OwnVideo(pool, weights),
        "global": GlobalComposer(global_pool), "mixture": Mixture(Composer(pool), pool, 0.5),
        "stage 7 blend, half video tags": VideoTags(Blend([OwnVideo(pool, weights), GlobalComposer(global_pool),
                                                           Composer(pool, weights), OwnVideo(pool, weights)],
                                                          (0.35, 0.2, 0.2, 0.25)), 0.5)}
    out = {}
    for name, sampler in samplers.items():
        rng = np.random.default_rng(11)
        drawn = []
        for width in (16, 64, 128):
            for _ in range(10):
                e = sampler.sample(width, rng)
                drawn.append([e.family, e.question, e.answer, e.tag_times, e.segment_seconds, e.evidence,
                              e.relevance, sources(e.memories)])
        out[name] = digest(drawn)
    return out


def record_settings(recipe: Recipe, stage: Stage) -> dict:
    """A stage record's settings as the frozen table names them, with what the blend stages derive from them."""
    settings = {name: value for name, value in dataclasses.asdict(stage).items()
                if name not in ("number", "version", "slot", *V6_FIELDS)}  # the slot: as the seeds it gives
    if isinstance(stage, BlendStage):
        settings["long_videos"], settings["short_videos"] = pool_sizes(recipe, stage)
        settings["long_seeds"], settings["short_skip"] = seed_offsets(recipe, stage.slot)
    return json.loads(json.dumps(settings))


@pytest.mark.parametrize("factor", ["1", "0.05", "0.001"])
def test_the_stage_records_give_stages_1_to_11_their_settings_as_before(factor):
    """Each of stages 1-11 reads the settings it was trained with, at full scale and scaled for trial runs: the
    shared ones and its record's, against a table computed from the recipe's nine per-stage tuples before they
    became records (tests/fixtures/train/stage-settings.json)."""
    recipe = Recipe() if factor == "1" else Recipe().scaled(float(factor))
    frozen = STAGE_SETTINGS[factor]
    assert json.loads(json.dumps(shared_settings(recipe))) == frozen["shared"]
    assert [stage.number for stage in recipe.stages][:11] == list(range(1, 12))
    for number, settings in frozen["stages"].items():
        stage = recipe.stage(int(number))
        assert record_settings(recipe, stage) == settings, number
        assert not isinstance(stage, BlendStage) or all(getattr(stage, name) == field.default for name, field in
                                                        BlendStage.__dataclass_fields__.items() if name in V6_FIELDS)


def test_every_blend_stage_lines_its_settings_up():
    """A blend stage's phases need a step count per width and its sampler shares must add up, or it trains wrong or
    fails an hour in; stages pool distinct fresh videos."""
    recipe = Recipe()
    blend = [stage for stage in recipe.stages if isinstance(stage, BlendStage)]
    assert [stage.number for stage in recipe.stages] == sorted({stage.number for stage in recipe.stages})
    for stage in blend:
        assert len(stage.widths) == len(stage.steps) and abs(sum(stage.weights) - 1) < 1e-9, stage.number
        assert stage.pool_share + stage.counting_pool_share <= 1, stage.number  # within its slot's videos
    assert len({stage.slot for stage in blend}) == len(blend)


def test_the_samplers_of_stages_3_to_7_draw_as_before():
    assert sampler_fingerprints() == FROZEN["samplers"]  # computed with the code of 3ba304d, before stage 8


@pytest.fixture(scope="module")
def videos():
    """Long videos (windows of their own segments) and short ones (whole at W = 64 and more)."""
    return ([generate_video(1_004_240 + i, min_duration=400, max_duration=3600) for i in range(4)] +
            [generate_video(1_002_600 + i, min_duration=30, max_duration=150) for i in range(4)])


def test_interval_and_order_inputs_keep_their_evidence_in_order_and_answer_from_the_tags(videos):
    pool = pool_without_compression(videos, TEMPORAL_FAMILIES)
    assert sorted({item.family for item in pool}) == ["interval", "order"] and len(pool) == 2 * len(videos)
    sampler = VideoTags(OwnVideo(pool, (2.0, 1.0), TEMPORAL_FAMILIES), 0.5)
    rng = np.random.default_rng(8)
    seen = {"interval": 0, "order": 0, "interval, one segment": 0, "interval, whole video tags": 0}
    for width in (16, 32, 64, 128, 200):
        for _ in range(30):
            example = sampler.sample(width, rng)
            video = sources(example.memories)[0][0]
            item = next(i for i in pool if i.question == example.question and i.video == video)
            segments = [segment for v, segment in sources(example.memories)]
            assert {v for v, _ in sources(example.memories)} == {item.video}  # only its own video
            assert segments == sorted(set(segments)) and len(segments) == min(width, len(item.labels))
            shown = [i for i, label in enumerate(item.labels) if label]
            assert set(shown) <= set(segments)  # both events (order), every segment of the event (interval)
            seen[item.family] += 1
            if item.family == "order":
                assert example.answer == item.answer and example.span is None
                continue
            first, last = segments.index(shown[0]), segments.index(shown[-1])
            assert example.span == (first, last) and last - first == len(shown) - 1  # one unbroken run
            tags, step = example.tag_times, example.segment_seconds
            if last > first:
                assert example.answer == f"From {tags[first]:.1f} to {tags[last]:.1f} seconds."
            else:
                seen["interval, one segment"] += 1
                start, end = tags[first] - step / 2, tags[first] + step / 2
                assert example.answer == f"From {start:.1f} to {end:.1f} seconds."
            if len(segments) == len(item.labels) < 128 and tags[0] == 2.0:  # a whole short video, its own tags
                seen["interval, whole video tags"] += 1
                plan = data.plan_video(videos[video], 1024)
                assert np.allclose(tags, plan.tag_times(), atol=0.5)  # the video's own tags (2 fps, nearly)
    assert all(seen.values()), seen


def test_video_tags_answer_an_interval_from_the_new_tags():
    class Fixed:  # an interval shown in parts 1-3 (or part 2 alone), tagged far into a video
        def __init__(self, span):
            self.span = span

        def sample(self, width, rng):
            return Composed("interval", torch.zeros(5, 2, 2), [0.0] * 5, [700.0, 710.0, 720.0, 730.0, 740.0], 10.0,
                            "From when to when is the red star visible?", "From 710.0 to 730.0 seconds.",
                            evidence=2, span=self.span)

    rng = np.random.default_rng(2)
    assert VideoTags(Fixed((1, 3)), 1.0).sample(5, rng).answer == "From 6.0 to 14.0 seconds."
    assert VideoTags(Fixed((2, 2)), 1.0).sample(5, rng).answer == "From 8.0 to 12.0 seconds."
    assert VideoTags(Fixed((1, 3)), 0.0).sample(5, rng).answer == "From 710.0 to 730.0 seconds."


def test_pools_compress_each_new_question_once_and_change_no_other_item(monkeypatch):
    import tempo
    from tempo.train import compose

    model = tempo.from_pretrained(device="cpu")
    videos = [generate_video(1_002_600 + i, min_duration=30, max_duration=40) for i in range(2)]
    without, with_them = np.random.default_rng(0), np.random.default_rng(0)
    before = compose.build_pool(model, videos, without)
    compressed = []

    def counted(model, encoded, question):
        compressed.append((encoded.video.seed, question))
        return compress_video(model, encoded, question)

    compress_video = compose.compress_video
    monkeypatch.setattr(compose, "compress_video", counted)
    after = compose.build_pool(model, videos, with_them, families=(*OLD, *TEMPORAL_FAMILIES))
    assert len(compressed) == len(set(compressed)) == len(after)  # each question once
    assert with_them.bit_generator.state == without.bit_generator.state  # the stage's stream goes on as before
    old = [item for item in after if item.family in OLD]
    assert ([dataclasses.replace(i, memories=None) for i in old]
            == [dataclasses.replace(i, memories=None) for i in before])
    assert all(torch.equal(a.memories, b.memories) for a, b in zip(old, before))
    temporal = [item for item in after if item.family in TEMPORAL_FAMILIES]
    assert [item.family for item in temporal] == ["interval", "order"] * len(videos)
    assert all(any(item.labels) and item.labels[item.best] for item in temporal)


def test_stages_6_to_8_go_on_from_v3_s_state_file(tmp_path):
    """v4's stage 6 from v3's state file, v5's stage 7 and 8 after it: one chain, so stage 7 runs once."""
    recipe = dataclasses.replace(Recipe(seed=5).scaled(0.001), blend_max_duration=60.0)
    state = str(tmp_path / "v5" / "stage.safetensors")
    with pytest.raises(ValueError, match="stage 7 continues stage 6"):
        run_stage(7, recipe, state, None, torch.device("cpu"), 50, source=str(V3_STATE))
    sixth = run_stage(6, recipe, state, str(tmp_path / "six"), torch.device("cpu"), 50, source=str(V3_STATE))
    assert sixth["decoder_layers"] == recipe.stage(6).layers == 3
    curve = sixth["parts"]["blend"]["growth_curve"]
    assert [point["after_width"] for point in curve] == list(recipe.stage(6).widths)
    assert set(curve[-1]) >= {"own video", "global", "other videos"}
    assert all(0 <= share <= 1 for point in curve for name in ("own video", "global", "other videos")
               for width in point[name].values() for share in width.values())
    with pytest.raises(ValueError, match="stage 8 continues stage 7"):
        run_stage(8, recipe, state, None, torch.device("cpu"), 50)
    seventh = run_stage(7, recipe, state, str(tmp_path / "seven"), torch.device("cpu"), 50)
    assert [point["after_width"] for point in seventh["parts"]["blend"]["growth_curve"]] == \
        list(recipe.stage(7).widths)
    assert "interval and order, own video" not in seventh["reading_before"]  # stage 8's, below
    training_log = json.load(open(tmp_path / "seven" / "training_log.json"))
    assert list(training_log["stages"]) == [str(n) for n in range(1, 8)]  # v3's logs came with its state
    assert training_log["recipe"].startswith("Tempo-Tiny v5")  # stage 6 is v4's, 7 v5's first
    assert json.load(open(tmp_path / "six" / "training_log.json"))["recipe"].startswith("Tempo-Tiny v4")

    eighth = run_stage(8, recipe, state, str(tmp_path / "eight"), torch.device("cpu"), 50)
    assert eighth["decoder_layers"] == recipe.stage(8).layers == 3
    assert eighth["parts"]["pools"]["interval_and_order_questions"] == 2 * (recipe.blend_videos +
                                                                             recipe.blend_short_videos)
    curve = eighth["parts"]["blend"]["growth_curve"]
    assert [point["after_width"] for point in curve] == list(recipe.stage(8).widths)
    for point in [eighth["reading_before"], *curve]:
        for name in ("interval and order, own video", "interval and order, short own video, video tags"):
            # v7's readings count timed answers off the input's tags too (`compose.names_off_tags`)
            assert set().union(*(point[name][width] for width in point[name])) <= {"interval", "order",
                                                                                  "interval_within", "off_tags"}
    training_log = json.load(open(tmp_path / "eight" / "training_log.json"))
    assert list(training_log["stages"]) == [str(n) for n in range(1, 9)]
    model = tempo.from_pretrained(str(tmp_path / "eight"), device="cpu")  # a loadable checkpoint, as shipped
    assert len(model.decoder.lm.model.layers) == 3 and model.spec.repetition_guard
