"""Composed decoder inputs: the question's own segments among quiet ones of other videos, with fresh time tags."""

import signal
from collections import Counter

import numpy as np
import pytest
import torch

from tempo.train.compose import Composer, Mixture, PoolItem, width_schedule

K, D = 4, 3


def item(video: int, family: str, n: int, best: int, shown: set[int], marker: float) -> PoolItem:
    memories = torch.full((n, K, D), marker).half()
    memories[:, 0, 0] = torch.arange(n).half()  # which segment of its video a memory is
    return PoolItem(video, family, f"q{video}{family}", "red" if family == "needle" else "2",
                    memories, [0.9 if i in shown else 0.1 for i in range(n)], [i in shown for i in range(n)], best)


@pytest.fixture
def composer():
    pool = [item(v, family, 10, 6, {6, 7}, float(v)) for v in range(6) for family in ("needle", "grounding")]
    pool.append(item(9, "counting", 5, 1, {1, 3}, 9.0))
    return Composer(pool)


@pytest.mark.parametrize("width", [1, 4, 10, 16, 64])
def test_a_composed_input_holds_the_evidence_among_quiet_segments_of_other_videos(composer, width):
    rng = np.random.default_rng(width)
    for _ in range(30):
        source = composer.pool[int(rng.integers(12))]
        example = composer.compose(source, width, rng)
        assert example.memories.shape == (width, K, D) and len(example.relevance) == len(example.tag_times) == width
        own = [j for j in range(width) if example.memories[j, 1, 0] == source.video]
        assert own == list(range(own[0], own[0] + len(own)))  # one contiguous block, in order
        assert len(own) == min(width, 10)
        positions = example.memories[own, 0, 0].int().tolist()
        assert source.best in positions
        others = [j for j in range(width) if j not in own]
        assert all(example.relevance[j] == 0.1 for j in others)  # quiet segments only
        steps = np.diff(example.tag_times)
        assert np.allclose(steps, steps[0], atol=0.11) if width > 1 else True
        if source.family == "grounding":
            evidence_tag = example.tag_times[own[positions.index(source.best)]]
            assert example.answer == f"At {evidence_tag:.1f} seconds."
        else:
            assert example.answer == source.answer


def test_counting_is_only_asked_when_every_occurrence_is_in(composer):
    rng = np.random.default_rng(0)
    for width in (1, 4):
        assert all(composer.sample(width, rng).family != "counting" for _ in range(50))
    assert Counter(composer.sample(16, rng).family for _ in range(150))["counting"] > 20


def test_family_weights_set_how_often_each_family_is_asked(composer):
    rng = np.random.default_rng(2)
    weighted = Composer(composer.pool, (1.0, 2.0, 1.0))
    counts = Counter(weighted.sample(16, rng).family for _ in range(800))
    assert 350 < counts["grounding"] < 450 and 150 < counts["needle"] < 250 and 150 < counts["counting"] < 250
    even = Counter(composer.sample(16, rng).family for _ in range(800))
    assert 220 < even["grounding"] < 320


def test_widths_grow_phase_by_phase_and_revisit_earlier_ones():
    widths = list(width_schedule((1, 4, 16), (10, 100, 100), np.random.default_rng(0)))
    assert len(widths) == 210 and widths[:10] == [1] * 10
    assert set(widths[10:110]) == {1, 4} and 60 < widths[10:110].count(4) < 85
    assert set(widths[110:]) == {1, 4, 16} and widths[110:].count(16) > 55


def test_widths_from_a_saved_step_are_those_a_run_never_cut_off_draws():
    rng = np.random.default_rng(0)
    whole = width_schedule((1, 4, 16), (10, 100, 100), rng)
    drawn = [next(whole) for _ in range(150)]
    saved = rng.bit_generator.state  # as a save after update 150 keeps it
    drawn += list(whole)
    rng = np.random.default_rng(1)
    rng.bit_generator.state = saved
    assert list(width_schedule((1, 4, 16), (10, 100, 100), rng, 150)) == drawn[150:]


def test_stage_four_mixes_whole_videos_with_fresh_tags_and_composed_inputs(composer):
    real = [item(20, "global", 7, 0, set(range(7)), 20.0), item(21, "grounding", 9, 5, {5}, 21.0)]
    rng = np.random.default_rng(1)
    drawn = [Mixture(composer, real, 0.5).sample(16, rng) for _ in range(300)]
    whole = [example for example in drawn if example.memories[0, 1, 0] >= 20]
    assert 110 < len(whole) < 190
    assert all(example.memories.shape[0] == 16 for example in drawn if example.memories[0, 1, 0] < 20)
    assert {example.memories.shape[0] for example in whole} == {7, 9}  # a whole video, nothing around it
    grounding = [example for example in whole if example.family == "grounding"]
    assert len({example.tag_times[0] for example in grounding}) > 5  # fresh tags each time
    assert all(example.answer == f"At {example.tag_times[5]:.1f} seconds." for example in grounding)
    assert all(Mixture(composer, real, 0.0).sample(4, rng).memories[0, 1, 0] < 20 for _ in range(50))


def test_a_pool_of_one_video_refuses_an_input_wider_than_it_instead_of_drawing_forever():
    """A trial at 1/100 scale pooled one video: composing past its length looped for an hour, looking for quiet
    segments of another video."""
    alone = Composer([item(0, "needle", 10, 6, {6, 7}, 0.0), item(0, "grounding", 10, 6, {6, 7}, 0.0)])
    rng = np.random.default_rng(0)
    assert len(alone.sample(10, rng).memories) == 10  # as wide as the video: nothing else needed
    def hung(signum, frame):
        raise AssertionError("still drawing quiet segments after 60 s: the pool's single video was not refused")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)  # a regression would loop for ever: fail it instead of hanging the suite
    try:
        with pytest.raises(ValueError, match="needs 6 quiet segments of other videos"):
            alone.sample(16, rng)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
