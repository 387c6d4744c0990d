"""The synthetic world as v4 was trained and evaluated on it stays byte for byte the same: videos, the four first
question families (with a seeded and a shared random stream) and the shipped example videos. The fingerprints in
tests/fixtures/synthetic/v4.json were computed by this file's `fingerprints` from the code before issue 47 added
the interval and order families."""

import dataclasses
import hashlib
import json

import numpy as np
import pytest

from tempo.synthetic import generate_video, make_questions
from tests.conftest import ROOT

FROZEN = json.loads((ROOT / "tests" / "fixtures" / "synthetic" / "v4.json").read_text())
SEEDS = range(50)


def digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def fingerprints() -> dict:
    """Per seed, the video (drawn and 90 s long, three rendered frames) and its questions; and the questions of
    all 50 short videos drawn from one shared stream, as training draws them, with the stream's next value."""
    out: dict = {"videos": [], "questions": []}
    shared = np.random.default_rng(12345)
    shared_questions = []
    for seed in SEEDS:
        video, short = generate_video(seed), generate_video(seed, 90.0)
        frames = video.frames([0.0, video.duration / 3, video.events[0].start + 0.5])
        out["videos"].append(digest([video.to_dict(), short.to_dict(), hashlib.sha256(frames.tobytes()).hexdigest()]))
        asked = [dataclasses.asdict(q) for q in make_questions(video, np.random.default_rng(seed))]
        asked_short = [dataclasses.asdict(q) for q in make_questions(short, np.random.default_rng([seed, 1]))]
        out["questions"].append(digest([asked, asked_short]))
        shared_questions.append([dataclasses.asdict(q) for q in make_questions(short, shared)])
    out["shared"] = digest([shared_questions, float(shared.random())])
    return out


@pytest.fixture(scope="module")
def now() -> dict:
    return fingerprints()


def test_videos_are_the_ones_v4_was_trained_and_evaluated_on(now):
    changed = [seed for seed, a, b in zip(SEEDS, now["videos"], FROZEN["videos"]) if a != b]
    assert not changed, f"generate_video changed for seeds {changed}"


def test_the_first_four_families_ask_and_answer_as_before(now):
    changed = [seed for seed, a, b in zip(SEEDS, now["questions"], FROZEN["questions"]) if a != b]
    assert not changed, f"make_questions changed for seeds {changed}"
    assert now["shared"] == FROZEN["shared"], "make_questions draws differently from a shared stream"


def test_the_first_seven_shipped_examples_are_untouched():
    examples = json.loads((ROOT / "examples" / "examples.json").read_text())
    assert digest(examples[:7]) == FROZEN["examples_json_first_seven"]
    for name, expected in FROZEN["example_videos_sha256"].items():
        assert hashlib.sha256((ROOT / "examples" / name).read_bytes()).hexdigest() == expected, name
