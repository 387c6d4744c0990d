"""The localisation stage: its ranking lists, its loss, and the resumable stage file."""

import dataclasses
import json
import re

import numpy as np
import pytest
import torch

import tempo
from tempo.synthetic import generate_video, make_questions
from tempo.train import data
from tempo.train.localise import ABSENT_SHARE, LIST_SIZE, SegmentIndex, ranking_loss
from tempo.train.recipe import Recipe
from tempo.train.staged import run_stage
from tempo.train.state import STATE_FILE

pytestmark = pytest.mark.slow

QUESTION = re.compile(r"What colour is the (\w+)\?|(?:When does|How many times does) the (\w+) (\w+) appear\?")


@pytest.fixture(scope="module")
def index():
    videos = [generate_video(1_000_000 + i, min_duration=30, max_duration=600) for i in range(10)]
    rng = np.random.default_rng(0)
    encoded = [data.EncodedVideo(v, data.plan_video(v, 1024), make_questions(v, rng), []) for v in videos]
    return SegmentIndex(encoded)


def shows(index, segment, kind, colour):
    video = index.videos[segment[0]]
    events = data.visible_events(video.video, video.plan.segment_frame_times(segment[1]))
    return any(e.kind == kind and (colour is None or e.colour == colour) for e in events)


def test_ranking_lists_are_labelled_by_what_their_segments_show(index):
    rng = np.random.default_rng(1)
    absent = cross_video_near_misses = 0
    for _ in range(300):
        ranking = index.sample(rng)
        assert len(ranking.segments) == LIST_SIZE == len(set(ranking.segments))
        match = QUESTION.fullmatch(ranking.question)
        kind, colour = (match[1], None) if match[1] else (match[3], match[2])
        assert ranking.labels == [shows(index, s, kind, colour) for s in ranking.segments]
        absent += not any(ranking.labels)
        home = ranking.segments[0][0]
        cross_video_near_misses += any(s[0] != home and shows(index, s, kind, None) and not label
                                       for s, label in zip(ranking.segments, ranking.labels))
    assert 0.5 * ABSENT_SHARE < absent / 300 < 2 * ABSENT_SHARE
    assert cross_video_near_misses > 30  # the same kind in another colour, from another video


def test_ranking_loss_rewards_the_evidence_first():
    labels = torch.tensor([False, True, False, False])
    right = ranking_loss(torch.tensor([-2.0, 3.0, -1.0, -2.0]), labels)
    wrong = ranking_loss(torch.tensor([3.0, -2.0, -1.0, -2.0]), labels)
    assert right < 0.2 < wrong
    logits = torch.zeros(4, requires_grad=True)
    ranking_loss(logits, labels).backward()
    assert logits.grad[1] < 0 < logits.grad[0]  # descending the loss raises the evidence, lowers the rest
    # a list with no evidence is only the pointwise Yes/No term
    none = torch.zeros(4, dtype=torch.bool)
    assert torch.isclose(ranking_loss(torch.zeros(4), none), torch.log(torch.tensor(2.0)))


def test_stages_resume_from_one_state_file(tmp_path):
    recipe = dataclasses.replace(Recipe(seed=5).scaled(0.001), tuning_max_duration=90.0, max_frames=64,
                                 medium_frames=64)  # 8 segments a video: the stages' plumbing, not their scale
    state = str(tmp_path / STATE_FILE)
    missing = max(stage.number for stage in recipe.stages) + 1
    with pytest.raises(ValueError, match=f"there is no stage {missing}"):
        run_stage(missing, recipe, state, None, torch.device("cpu"), 50)
    first = run_stage(1, recipe, state, str(tmp_path / "one"), torch.device("cpu"), 50)
    assert {"base clips", "base", "encode", "localise"} == set(first["parts"])
    assert 0 <= first["localisation_after_localise"]["localisation"] <= 1
    with open(state, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    assert header["__metadata__"]["stage"] == "1"
    assert all(entry["dtype"] == "F16" for name, entry in header.items() if name != "__metadata__")
    second = run_stage(2, recipe, state, str(tmp_path / "two"), torch.device("cpu"), 50)
    assert {"encode", "stage 0a", "stage 0", "stage 1", "stage 2"} == set(second["parts"])
    assert json.load(open(tmp_path / "stage-2.json"))["stage"] == 2
    with pytest.raises(ValueError, match="stage 2 continues stage 1"):
        run_stage(2, recipe, state, None, torch.device("cpu"), 50)
    third = run_stage(3, recipe, state, str(tmp_path / "three"), torch.device("cpu"), 50)
    curve = third["parts"]["compose"]["growth_curve"]
    assert [point["after_width"] for point in curve] == list(recipe.stage(3).widths)
    assert all(0 <= share <= 1 for point in curve for width in ("16", "64", "128")
               for share in point[width].values())
    fourth = run_stage(4, recipe, state, str(tmp_path / "four"), torch.device("cpu"), 50)
    assert fourth["parts"]["pairs"]["real_pairs"] > 0
    assert [point["after_width"] for point in fourth["parts"]["tags"]["growth_curve"]] == list(recipe.stage(4).widths)
    assert [point["after_width"] for point in fourth["parts"]["real"]["growth_curve"]] == [max(recipe.stage(4).widths)]
    fifth = run_stage(5, recipe, state, str(tmp_path / "five"), torch.device("cpu"), 50)
    assert [point["after_width"] for point in fifth["parts"]["wide"]["growth_curve"]] == list(recipe.stage(5).widths)
    assert fifth["parts"]["real"]["growth_curve"][0]["step"] == recipe.stage(5).real_steps
    shipped_log = json.load(open(tmp_path / "five" / "training_log.json"))
    assert list(shipped_log["stages"]) == ["1", "2", "3", "4", "5"]
    reports = (first, second, third, fourth, fifth)
    assert shipped_log["seconds"] == pytest.approx(sum(r["seconds"] for r in reports), abs=0.5)
    model = tempo.from_pretrained(str(tmp_path / "five"), device="cpu")  # a loadable checkpoint, as shipped
    assert model.spec.num_memory_tokens == 32 and model.spec.repetition_guard
