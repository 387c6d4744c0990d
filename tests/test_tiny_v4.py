"""Tempo-Tiny v4: the grown decoder answers as the one it grew from, the new composed inputs are what they claim
(own-video inputs come from the question's own video; global ones are answered with the kind shown most). Stages
6-8 going on from v3's state file: test_tiny_v5."""

import json

import numpy as np
import pytest
import torch

from tempo.synthetic import KINDS, all_questions, generate_video
from tempo.train import data
from tempo.train.compose import Composed, PoolItem
from tempo.train.compose_long import (
    GLOBAL_MARGIN,
    NEIGHBOURS,
    GlobalComposer,
    GlobalItem,
    OwnVideo,
    VideoTags,
    global_answer,
    kept_segments,
    kind_counts,
    video_tags,
)
from tempo.train.grow import decoder_layers, grown, layer_sources
from tempo.train.state import load_state
from tests.conftest import ROOT

V3_STATE = ROOT / "experiments" / "tiny-v3" / "stage.safetensors"


def test_new_layers_are_spread_evenly_and_copy_the_layer_before():
    assert layer_sources(3, 3) == [(0, False), (1, False), (2, False)]
    assert layer_sources(3, 6) == [(0, False), (0, True), (1, False), (1, True), (2, False), (2, True)]
    assert [new for _, new in layer_sources(3, 5)].count(True) == 2
    with pytest.raises(ValueError, match="does not shrink"):
        layer_sources(3, 2)


def test_a_grown_decoder_answers_as_the_one_it_grew_from(tmp_path):
    v3, _, _, stage = load_state(str(V3_STATE), str(tmp_path / "v3"), torch.device("cpu"))
    deeper, _, _, _ = load_state(str(V3_STATE), str(tmp_path / "v4"), torch.device("cpu"), layers=6)
    assert stage == 5 and len(v3.decoder.lm.model.layers) == 3 and len(deeper.decoder.lm.model.layers) == 6
    assert json.load(open(tmp_path / "v4" / "config.json"))["num_hidden_layers"] == 6
    embeds = torch.randn(1, 300, 128)
    with torch.inference_mode():
        before, after = v3.decoder.lm(inputs_embeds=embeds).logits, deeper.decoder.lm(inputs_embeds=embeds).logits
    assert torch.allclose(before, after, atol=1e-5)
    tensors = grown({name: t for name, t in v3.state_dict().items()}, 6)
    assert decoder_layers(tensors) == 6
    new = "decoder.lm.model.layers.3."  # the copy of old layer 1
    assert not tensors[new + "self_attn.o_proj.weight"].any() and not tensors[new + "mlp.down_proj.weight"].any()
    assert torch.equal(tensors[new + "self_attn.q_proj.weight"], v3.state_dict()["decoder.lm.model.layers.1."
                                                                                  "self_attn.q_proj.weight"])


def pool_without_compression(videos: list, families: tuple[str, ...]) -> list[PoolItem]:
    """Pool items labelled as `build_pool` labels them, whose memories say where they come from: every value of
    segment i of video v is v * 1000 + i. Interval and order questions come from each video's own stream, so the
    other items are the same with or without them."""
    items = []
    rng = np.random.default_rng(0)
    for number, video in enumerate(videos):
        plan = data.plan_video(video, 1024)
        times = [plan.segment_frame_times(i) for i in range(len(plan.segments))]
        memories = (number * 1000 + torch.arange(len(times), dtype=torch.float32))[:, None, None].expand(-1, 2, 3)
        for question in all_questions(video, rng):
            if question.family not in families:
                continue
            shown = [sum(start <= t < end for t in frames for start, end in question.evidence) for frames in times]
            items.append(PoolItem(number, question.family, question.text, question.answer, memories.clone(),
                                  [0.5] * len(times), [data.relevant(question, frames) for frames in times],
                                  int(np.argmax(shown))))
    return items


def sources(memories: torch.Tensor) -> list[tuple[int, int]]:
    """(video, segment) of every segment of a composed input made of `pool_without_compression` items."""
    return [(int(value) // 1000, int(value) % 1000) for value in memories[:, 0, 0].tolist()]


@pytest.fixture(scope="module")
def long_videos():
    return [generate_video(1_004_000 + i, min_duration=400, max_duration=3600) for i in range(6)]


def test_own_video_inputs_come_from_the_question_s_own_video(long_videos):
    pool = pool_without_compression(long_videos, ("needle", "grounding", "counting"))
    composer = OwnVideo(pool, (1.0, 2.0, 1.0))
    rng = np.random.default_rng(3)
    families = set()
    for width in (16, 32, 64, 128, 200):
        for _ in range(40):
            example = composer.sample(width, rng)
            item = next(i for i in pool if i.question == example.question and
                        sources(example.memories)[0][0] == i.video)
            segments = [segment for video, segment in sources(example.memories)]
            assert {video for video, _ in sources(example.memories)} == {item.video}  # only its own video
            assert segments == sorted(set(segments))  # in the video's order, no repeats
            assert len(segments) == min(width, len(item.labels)) == len(example.tag_times)
            assert kept_segments(item) <= set(segments)  # the evidence and its look-alike neighbours
            assert {item.best + d for d in range(-NEIGHBOURS, NEIGHBOURS + 1)} & set(range(len(item.labels))) <= \
                set(segments)
            if item.family == "counting":
                assert {i for i, label in enumerate(item.labels) if label} <= set(segments)
            if item.family == "grounding":  # the tag of the segment that shows most of the event
                assert example.answer == f"At {example.tag_times[segments.index(item.best)]:.1f} seconds."
            else:
                assert example.answer == item.answer
            families.add(item.family)
    assert families == {"needle", "grounding", "counting"}


def test_global_inputs_are_answered_with_the_kind_their_segments_show_most(long_videos):
    pool = [GlobalItem(item, kind_counts(video)) for item, video in
            zip(pool_without_compression(long_videos, ("global",)), long_videos)]
    composer = GlobalComposer(pool)
    rng = np.random.default_rng(4)
    videos_per_input = set()
    for width in (16, 64, 128):
        for _ in range(30):
            example = composer.sample(width, rng)
            assert example.family == "global" and example.question == "Which shape appears most?"
            parts = sources(example.memories)
            assert len(parts) <= width
            counts = dict.fromkeys(KINDS, 0)
            for video, segment in parts:  # counted again from the video itself, frame by frame
                plan = data.plan_video(long_videos[video], 1024)
                for t in plan.segment_frame_times(segment):
                    for drawn in long_videos[video].sprites(t):
                        counts[drawn.kind] += 1
            ranked = sorted(counts.values())
            assert example.answer == max(counts, key=counts.get) and ranked[-1] >= GLOBAL_MARGIN * ranked[-2]
            runs = [[s for v, s in parts if v == video] for video in dict.fromkeys(v for v, _ in parts)]
            assert all(run == list(range(run[0], run[0] + len(run))) for run in runs)  # consecutive segments
            videos_per_input.add(len(runs))
    assert videos_per_input == {1, 2, 3}
    for video, item in zip(long_videos, pool):  # over a whole video, the world's own answer
        assert global_answer(item.counts.sum(0)) == video.dominant_kind


def test_video_tags_are_a_whole_video_s_and_the_when_answer_follows_them():
    rng = np.random.default_rng(3)
    short, step = video_tags(30, rng)
    assert step == 4.0 and short[:3] == [2.0, 6.0, 10.0] and short[-1] == 118.0
    wide, step = video_tags(128, rng)
    assert 4.0 <= step <= 3600 / 128 and wide[0] == round(step / 2, 1)

    class Fixed:  # a sampler whose input puts the evidence third, tagged far into a video
        def sample(self, width, rng):
            return Composed("grounding", torch.zeros(5, 2, 2), [0.0] * 5, [700.0, 710.0, 720.0, 730.0, 740.0], 10.0,
                            "When does the red star appear?", "At 720.0 seconds.", evidence=2)

    retagged = [VideoTags(Fixed(), 1.0).sample(5, rng) for _ in range(3)]
    assert all(example.tag_times == [2.0, 6.0, 10.0, 14.0, 18.0] and example.answer == "At 10.0 seconds."
               and example.segment_seconds == 4.0 for example in retagged)
    assert VideoTags(Fixed(), 0.0).sample(5, rng).answer == "At 720.0 seconds."
