"""Tempo-Tiny v7's recipe: uneven time tags (a tag's leading digits can only be read off it), ranking lists for
questions naming two objects (each named object must outrank the rest), needle inputs with distractors of another
colour, and v6's stages left as they were."""

import dataclasses
import logging
import os

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tempo.synthetic import COLOURS, KINDS, generate_video
from tempo.train import blend_stages, compose_long, data, state, two_objects
from tempo.train.blend_stages import blend_samplers, stage_pools
from tempo.train.compose import FAMILIES, Composed, names_off_tags
from tempo.train.distractors import NeedleDistractors, distractor_segments, named_pair
from tempo.train.localise import SegmentIndex, ranking_loss
from tempo.train.loop import ProgressFile, Schedule
from tempo.train.recipe import BlendStage, Recipe, RelevanceStage
from tempo.train.staged import lineage, run_stage
from tempo.train.two_objects import FORMS, two_object_list, two_object_loss
from tempo.train.uneven_tags import UnevenTags
from tests.conftest import ROOT
from tests.test_tiny_v4 import pool_without_compression, sources

V6_STATE = ROOT / "experiments" / "tiny-v6" / "stage.safetensors"


class Fixed:
    """A sampler of one grounding or interval input of `width` segments, evenly tagged 10 s apart from 900 s."""

    def __init__(self, family: str):
        self.family = family

    def sample(self, width: int, rng: np.random.Generator) -> Composed:
        tags = [900.0 + 10.0 * j for j in range(width)]
        evidence = int(rng.integers(1, width - 1))
        answer = f"At {tags[evidence]:.1f} seconds." if self.family == "grounding" else \
            f"From {tags[evidence]:.1f} to {tags[evidence + 1]:.1f} seconds."
        return Composed(self.family, torch.zeros(width, 1, 1), [0.1] * width, tags, 10.0, "q", answer, evidence,
                        (evidence, evidence + 1) if self.family == "interval" else None)


def tens_unlike_its_place(example: Composed) -> bool:
    """Whether the evidence tag's digits from the tens up differ from what its place between the first and the last
    tag would give if the tags were evenly spaced."""
    tags, j = example.tag_times, example.evidence
    placed = tags[0] + (tags[-1] - tags[0]) * j / (len(tags) - 1)
    return int(placed) // 10 != int(tags[j]) // 10


@pytest.mark.parametrize("family", ["grounding", "interval"])
def test_uneven_tags_leave_a_tag_s_leading_digits_to_be_read_off_it(family):
    rng = np.random.default_rng(0)
    even = [Fixed(family).sample(32, rng) for _ in range(300)]
    uneven = [UnevenTags(Fixed(family), 1.0).sample(32, rng) for _ in range(300)]
    assert np.mean([tens_unlike_its_place(e) for e in even]) < 0.05  # v6: the place gives the leading digits
    assert np.mean([tens_unlike_its_place(e) for e in uneven]) > 0.4
    for example in uneven:
        assert all(0 < a < b for a, b in zip(example.tag_times, example.tag_times[1:]))
        j = example.evidence
        expected = f"At {example.tag_times[j]:.1f} seconds." if family == "grounding" else \
            f"From {example.tag_times[j]:.1f} to {example.tag_times[j + 1]:.1f} seconds."
        assert example.answer == expected


def test_uneven_tags_re_tag_only_their_share():
    rng = np.random.default_rng(1)
    drawn = [UnevenTags(Fixed("grounding"), 0.25).sample(16, rng) for _ in range(400)]
    moved = sum(example.tag_times[0] != 900.0 or example.tag_times[1] != 910.0 for example in drawn)
    assert 70 < moved < 130


def index_of(shown: list[list[set]]) -> SegmentIndex:
    """A SegmentIndex over videos given as the (kind, colour) pairs each segment shows, without encoding any."""
    index = SegmentIndex([])
    index.shown = [[frozenset(segment) for segment in video] for video in shown]
    for v, video in enumerate(index.shown):
        for i, events in enumerate(video):
            for kind, colour in events:
                index.by_kind[kind].append((v, i))
                index.by_colour[colour].append((v, i))
    index.with_event = [(v, i) for v, video in enumerate(index.shown) for i, events in enumerate(video) if events]
    return index


def test_a_two_object_list_labels_every_segment_showing_either_object():
    square, diamond, star = ("square", "red"), ("diamond", "purple"), ("star", "blue")
    first = [set() for _ in range(40)]
    first[5], first[6], first[20], first[31] = {square}, {square}, {diamond}, {star}
    other = [set() for _ in range(20)]
    other[3], other[9] = {("square", "green")}, {("square", "green")}  # one object: never listed about two
    index = index_of([first, other])
    rng = np.random.default_rng(0)
    for _ in range(60):
        drawn = two_object_list(index, rng)
        ranking = drawn.ranking
        named = [(kind, colour) for kind in KINDS for colour in COLOURS if f"{colour} {kind}" in ranking.question]
        assert len(named) == 2 and any(ranking.question == form.format(*[f"{c} {k}" for k, c in named])
                                       or ranking.question == form.format(*[f"{c} {k}" for k, c in named[::-1]])
                                       for form in FORMS)
        shows = [bool(index.shown[v][i] & set(named)) for v, i in ranking.segments]
        assert ranking.labels == shows
        for pair in named:  # every named object the video shows is in the list
            assert any(pair in index.shown[v][i] for v, i in ranking.segments) == any(pair in s for s in first)
        assert len(ranking.segments) == len(set(ranking.segments)) == 16


def test_videos_too_short_to_fill_a_list_are_refused_rather_than_drawn_from_for_ever():
    square, diamond = ("square", "red"), ("diamond", "purple")
    video = [set() for _ in range(10)]
    video[2], video[7] = {square}, {diamond}
    index = index_of([video])  # 10 segments in all: a list of 16 can never be filled
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="Only 10 segments .* a list needs 16: train on more or longer videos"):
        index.sample(rng)
    with pytest.raises(ValueError, match="Only 10 segments"):
        two_object_list(index, rng)


def test_each_named_object_must_outrank_the_segments_showing_neither():
    labels_first = (True, True, False, False, False, False)
    labels_second = (False, False, True, False, False, False)
    # the shipped order example: one object found, the other below the segments showing neither
    one_found = torch.tensor([6.0, 6.0, -6.0, -4.0, -4.0, -4.0])
    both_found = torch.tensor([6.0, 6.0, 6.0, -4.0, -4.0, -4.0])
    either = torch.tensor([a or b for a, b in zip(labels_first, labels_second)])
    # stage 1's loss on "shows either" hardly minds: its listwise term is met by the first object alone ...
    assert ranking_loss(one_found, either) - ranking_loss(both_found, either) < 1.5
    # ... the two-object loss adds the second object's own term, log(3 + e^-2) + 2 = 3.14 by hand
    each = (labels_first, labels_second)
    assert two_object_loss(one_found, each) - two_object_loss(both_found, each) > 3.0


def test_needle_inputs_keep_distractors_of_another_colour_and_kind_and_their_answer():
    videos = [generate_video(1_005_080 + i, min_duration=300, max_duration=900) for i in range(30)]
    pool = pool_without_compression(videos, ("needle", "grounding", "counting", "interval"))
    sampler = NeedleDistractors(pool)
    assert len(sampler.pool) >= 5
    rng = np.random.default_rng(0)
    for _ in range(40):
        example = sampler.sample(16, rng)
        item = next(i for i in sampler.pool if i.question == example.question and
                    sources(example.memories)[example.evidence][0] == i.video)
        video = videos[item.video]
        plan = data.plan_video(video, 1024)
        kind = example.question.removeprefix("What colour is the ").removesuffix("?")
        assert example.answer == item.answer
        shown = [data.visible_events(video, plan.segment_frame_times(i)) for v, i in sources(example.memories)]
        colours = [{e.colour for e in events if e.kind != kind and e.colour != item.answer} for events in shown]
        needle = sum(any(e.kind == kind for e in events) for events in shown)
        most = max(sum(colour in c for c in colours) for colour in COLOURS)
        assert most > needle and most >= 2  # one other colour is shown in more segments than the needle


def test_a_distractor_is_never_the_answer_s_colour_nor_the_asked_kind():
    videos = [generate_video(1_005_080 + i, min_duration=300, max_duration=900) for i in range(30)]
    pool = pool_without_compression(videos, ("needle", "grounding", "counting", "interval"))
    for item in (i for i in pool if i.family == "needle"):
        kind = item.question.removeprefix("What colour is the ").removesuffix("?")
        siblings = [other for other in pool if other.video == item.video]
        plan = data.plan_video(videos[item.video], 1024)
        for segment in distractor_segments(item, siblings):
            events = data.visible_events(videos[item.video], plan.segment_frame_times(segment))
            assert any(e.kind != kind and e.colour != item.answer for e in events)
    assert named_pair("From when to when is the red square visible?") == ("square", "red")
    assert named_pair("What colour is the square?") is None


def test_v6_s_stages_stay_as_they_were_and_v7_goes_on_from_stage_12():
    recipe = Recipe()
    for number in (12, 13, 14):
        stage = recipe.stage(number)
        assert isinstance(stage, BlendStage)
        assert (stage.follows, stage.distractors, stage.uneven_tags) == (None, False, 0.0)
    relevance, again = recipe.stage(15), recipe.stage(16)
    assert isinstance(relevance, RelevanceStage) and relevance.follows == 12 and relevance.version == "v7"
    assert isinstance(again, RelevanceStage) and (again.follows, again.videos_of) == (15, 15)
    blends = [s for s in recipe.stages if isinstance(s, BlendStage)]
    v7 = [s for s in blends if s.version == "v7"]
    assert [s.number for s in v7] == [17, 18] and all(s.distractors and s.uneven_tags > 0 for s in v7)
    slots = [s.slot for s in blends]
    assert all(slots.count(s.slot) == 1 and s.slot not in range(9) for s in v7)  # fresh videos (slot 14: sweep)
    assert dataclasses.replace(relevance, steps=10).scaled(0.5).steps == 5


def test_a_stage_goes_on_from_the_one_its_record_follows():
    recipe = Recipe()
    assert lineage(recipe, 14) == list(range(1, 15))  # v6, as before
    assert lineage(recipe, 18) == [*range(1, 13), 15, 16, 17, 18]  # v7 goes on from v6's shipped stage 12


@pytest.mark.slow
def test_stages_15_to_17_run_from_v6_s_state_file(tmp_path):
    # v6's committed state file holds stage 14, so here stage 15 follows 14; few frames, short videos
    recipe = Recipe(seed=5).scaled(0.001)
    stages = tuple(dataclasses.replace(s, follows=14) if s.number == 15 else s for s in recipe.stages)
    recipe = dataclasses.replace(recipe, stages=stages, max_frames=64, tuning_max_duration=60.0,
                                 blend_max_duration=60.0, blend_videos=4, blend_short_videos=4)
    state = str(tmp_path / "v7" / "stage.safetensors")
    report = run_stage(15, recipe, state, str(tmp_path / "fifteen"), torch.device("cpu"), 50, source=str(V6_STATE))
    assert report["before"]["memory_drift"] == 0.0 and report["after"]["memory_drift"] >= 0.0
    assert set(report["after"]["two_object_localisation"]) == {"questions", "top_shows_one", "both_over_half",
                                                               "mean_lower_best"}
    report = run_stage(16, recipe, state, str(tmp_path / "sixteen"), torch.device("cpu"), 50)
    assert report["parts"]["encode"]["read_from_file"] and report["before"]["memory_drift"] == 0.0
    report = run_stage(17, recipe, state, str(tmp_path / "seventeen"), torch.device("cpu"), 50)
    curve = report["parts"]["blend"]["growth_curve"]
    assert [point["after_width"] for point in curve] == list(recipe.stage(17).widths)
    assert "short own video, uneven tags" in report["reading_before"]


class CutOff(Exception):
    """The process killed mid-stage."""


@pytest.fixture()
def one_thread():
    """Ops this small on a shared 2-core machine: a second torch thread mostly waits for the first (this file's
    stage test took 74 s with two and 20 s with one beside other work)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
def test_a_cut_off_relevance_stage_goes_on_from_its_last_save_to_the_same_weights(tmp_path, monkeypatch, caplog):
    # six updates of two lists each on six videos of 16 two-frame segments (a quarter of the vision tokens)
    monkeypatch.setattr(data, "SEGMENT_FRAMES", 2)
    recipe = Recipe(seed=5).scaled(0.001)
    stages = tuple(dataclasses.replace(s, follows=14, steps=6, lists=2) if s.number == 15 else s
                   for s in recipe.stages)
    recipe = dataclasses.replace(recipe, stages=stages, max_frames=32, tuning_max_duration=60.0)
    trained = []
    real_finish, real_step = two_objects.finish, Schedule.step

    def keep_trained(model, head, *args):
        trained.append([p.detach().clone() for p in [*model.compressor.vlm.language_model.parameters(), head.weight]])
        real_finish(model, head, *args)

    def cut_off_at_update_3(schedule):
        if schedule.step_index == 3:
            raise CutOff
        real_step(schedule)

    def run(folder: str) -> dict:  # as run.sh runs it: from v6's state file, a save every 2 updates
        return run_stage(15, recipe, str(tmp_path / folder / "stage.safetensors"), None, torch.device("cpu"), 2,
                         source=str(V6_STATE))

    monkeypatch.setattr(two_objects, "finish", keep_trained)
    whole = run("whole")["parts"]["two objects"]
    with monkeypatch.context() as cut:
        cut.setattr(Schedule, "step", cut_off_at_update_3)
        with pytest.raises(CutOff):
            run("cut off")
    progress = tmp_path / "cut off" / "stage-15-progress.pt"
    assert progress.is_file() and len(trained) == 1  # the cut-off run never finished
    with caplog.at_level(logging.INFO, logger="tempo.train"):
        report = run("cut off")
    assert "resumed at update 2 of 6" in caplog.text and report["parts"]["two objects"]["resumed_at"] == 2
    assert report["parts"]["encode"]["read_from_file"] and (tmp_path / "cut off" / "stage-15-pools.pt").is_file()
    assert not progress.exists()  # the stage finished
    assert (whole["resumed_at"], whole["seconds_in_earlier_runs"]) == (None, 0.0)
    assert report["parts"]["two objects"]["seconds_in_earlier_runs"] > 0
    assert all(torch.equal(a, b) for a, b in zip(*trained, strict=True))
    assert report["parts"]["two objects"]["losses"] == whole["losses"]
    assert report["parts"]["two objects"]["anchors"] == whole["anchors"]


@pytest.mark.usefixtures("one_thread")
def test_a_second_relevance_stage_trains_on_the_first_one_s_videos_read_or_encoded_again(tmp_path, monkeypatch):
    # stage 15 (two updates from v6's state file, which holds stage 14), then stage 16 twice from its state: once
    # reading stage 15's pools file, once with that file gone
    monkeypatch.setattr(data, "SEGMENT_FRAMES", 2)
    recipe = Recipe(seed=5).scaled(0.001)
    stages = tuple(dataclasses.replace(s, follows=14, steps=2, lists=2) if s.number == 15 else
                   dataclasses.replace(s, steps=2, lists=2) if s.number == 16 else s for s in recipe.stages)
    recipe = dataclasses.replace(recipe, stages=stages, max_frames=32, tuning_max_duration=60.0)
    state_path, pools = tmp_path / "stage.safetensors", tmp_path / "stage-15-pools.pt"
    cpu = torch.device("cpu")
    run_stage(15, recipe, str(state_path), None, cpu, 2, source=str(V6_STATE))
    after_15, saved = state_path.read_bytes(), torch.load(pools, weights_only=False)["pools"]
    encoded_again = []
    real_encode = two_objects.relevance_videos

    def encode_and_keep(*args) -> dict:
        encoded_again.append(real_encode(*args))
        return encoded_again[-1]

    monkeypatch.setattr(two_objects, "relevance_videos", encode_and_keep)

    def stage_16() -> tuple[dict, dict]:
        state_path.write_bytes(after_15)
        report = run_stage(16, recipe, str(state_path), None, cpu, 2)
        return report, {name: t.clone() for name, t in load_file(state_path).items()}  # not the file's pages

    read, weights = stage_16()
    assert read["parts"]["encode"] == {"seconds": saved["encode_seconds"], "read_from_file": True, "videos_of": 15}
    assert encoded_again == []
    pools.unlink()
    again, weights_again = stage_16()
    assert again["parts"]["encode"]["read_from_file"] is False and len(encoded_again) == 1
    for part in ("encoded", "tuning"):
        assert len(encoded_again[0][part]) == len(saved[part])
        for video, before in zip(encoded_again[0][part], saved[part]):
            assert video.questions == before.questions and video.plan == before.plan
            assert all(torch.equal(a.embeds, b.embeds) for a, b in zip(video.features, before.features, strict=True))
    assert weights.keys() == weights_again.keys()
    assert all(torch.equal(weights[name], weights_again[name]) for name in weights)
    assert again["parts"]["two objects"]["losses"] == read["parts"]["two objects"]["losses"]


@pytest.mark.usefixtures("one_thread")
def test_a_cut_off_blend_stage_goes_on_from_its_last_save_to_the_same_weights(tmp_path, monkeypatch, caplog):
    # three phases of two updates, a save every 2: the cut at update 5 goes on from update 4, which is also the
    # second phase's last, so its growth-curve point and the second phase's widths drawn so far come from the file
    monkeypatch.setattr(blend_stages, "READ_WIDTHS", (16,))
    recipe = Recipe(seed=5).scaled(0.001)
    stages = tuple(dataclasses.replace(s, follows=14, widths=(16, 24, 32), steps=(2, 2, 2)) if s.number == 17 else s
                   for s in recipe.stages)
    recipe = dataclasses.replace(recipe, stages=stages, blend_max_duration=60.0, blend_held_out=1,
                                 blend_eval_inputs=1)
    state_path = str(tmp_path / "stage.safetensors")
    trained = []
    real_finish, real_step = blend_stages.finish, Schedule.step

    def keep_trained(model, *args):
        trained.append([p.detach().clone() for p in model.decoder.parameters()])
        real_finish(model, *args)

    def cut_off_at_update_5(schedule):
        if schedule.step_index == 4:
            raise CutOff
        real_step(schedule)

    def run() -> dict:  # from v6's state file (stage 14) each time, a save every 2 updates
        return run_stage(17, recipe, state_path, None, torch.device("cpu"), 2, source=str(V6_STATE))

    monkeypatch.setattr(blend_stages, "finish", keep_trained)
    whole = run()["parts"]["blend"]  # its pools stay in the folder: the runs after it read them
    progress = tmp_path / "stage-17-progress.pt"
    assert not progress.exists()
    with monkeypatch.context() as cut:
        cut.setattr(Schedule, "step", cut_off_at_update_5)
        with pytest.raises(CutOff):
            run()
    assert progress.is_file() and len(trained) == 1  # the cut-off run never finished
    with caplog.at_level(logging.INFO, logger="tempo.train"):
        report = run()["parts"]["blend"]
    assert "resumed at update 4 of 6" in caplog.text and report["resumed_at"] == 4
    assert not progress.exists()  # the stage finished
    assert (whole["resumed_at"], whole["seconds_in_earlier_runs"]) == (None, 0.0)
    assert report["seconds_in_earlier_runs"] > 0
    assert all(torch.equal(a, b) for a, b in zip(*trained, strict=True))
    assert report["losses"] == whole["losses"] and report["growth_curve"] == whole["growth_curve"]
    assert [point["step"] for point in report["growth_curve"]] == [2, 4, 6]


def test_a_progress_file_saved_under_another_key_is_not_gone_on_from(tmp_path, caplog):
    path = str(tmp_path / "stage-15-progress.pt")
    ProgressFile(path, {"stage": 15, "weights": "abc"}).save({"updates": 50})
    assert ProgressFile(path, {"stage": 15, "weights": "abc"}).read() == {"key": {"stage": 15, "weights": "abc"},
                                                                          "updates": 50}
    with caplog.at_level(logging.INFO):
        assert ProgressFile(path, {"stage": 15, "weights": "def"}).read() is None
    assert "starting over" in caplog.text
    ProgressFile(path, {}).remove()
    assert ProgressFile(path, {}).read() is None and not os.listdir(tmp_path)


@pytest.mark.parametrize("number", [17, 18])
def test_v7_s_blend_has_a_sampler_for_every_weight_with_distractors_last(monkeypatch, number):
    recipe = dataclasses.replace(Recipe().scaled(0.05), blend_max_duration=600.0)
    stage = recipe.stage(number)
    assert isinstance(stage, BlendStage)

    def without_compression(model, videos, rng, first=0, families=FAMILIES, max_frames=1024):
        return pool_without_compression(videos, families)

    for module in (compose_long, state, blend_stages):
        monkeypatch.setattr(module, "build_pool", without_compression)
    blend, held_out = blend_samplers(stage_pools(None, recipe, stage, np.random.default_rng(0)), recipe, stage)
    assert len(blend.samplers) == len(stage.weights)  # checked an hour into a stage otherwise, after its pools
    assert [type(s) for s in blend.samplers[-2:]] == [NeedleDistractors, NeedleDistractors]
    assert all(not isinstance(s, NeedleDistractors) for s in blend.samplers[:-2])
    assert "short own video, uneven tags" in held_out
    rng = np.random.default_rng(0)
    for sampler in blend.samplers[-2:]:
        if sampler.pool:
            assert sampler.sample(128, rng).family == "needle"


def test_the_growth_curve_counts_timed_answers_no_tag_allows():
    example = Fixed("interval").sample(32, np.random.default_rng(0))  # tags 900.0 to 1210.0, 10 s apart
    assert names_off_tags(example, "From 915.0 to 9915.0 seconds.")  # the second time's digits written twice
    assert names_off_tags(example, "At 1300.0 seconds.") and names_off_tags(example, "At 19.0 seconds.")
    assert not names_off_tags(example, "From 895.0 to 1219.0 seconds.")  # within a step of the first and last tag
    assert not names_off_tags(example, "The red square.")
