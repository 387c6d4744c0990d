import io
import json
import math

import av
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempo.cli import main
from tempo.synthetic import (
    COLOURS,
    Question,
    all_questions,
    generate_video,
    is_correct,
    make_questions,
    named_seconds,
    names_time_outside,
    occurrences,
    segment_relevance,
    sprite,
    temporal_iou,
    temporal_questions,
    write_mp4,
)
from tempo.synthetic.generation import event_seconds

seeds = st.integers(0, 2**32 - 1)
durations = st.one_of(st.none(), st.floats(20, 3600))


def test_same_seed_same_video():
    a, b = generate_video(11, 600), generate_video(11, 600)
    assert a == b
    times = [0.0, 17.3, 333.3, 599.9]
    np.testing.assert_array_equal(a.frames(times), b.frames(times))
    assert generate_video(12, 600).to_dict() != a.to_dict()


def test_drawn_duration_matches_given_duration():
    drawn = generate_video(5)
    assert 60 <= drawn.duration <= 3600
    assert generate_video(5, drawn.duration) == drawn


@settings(max_examples=25, deadline=None)
@given(seeds, durations)
def test_generator_constraints(seed, duration):
    video = generate_video(seed, duration)
    json.dumps(video.to_dict())
    assert (video.width, video.height) == (512, 256)
    if duration is not None:
        assert video.duration == duration

    # Scenes tile [0, duration], each 20..120 s, with a new background each time.
    assert video.scenes[0].start == 0 and video.scenes[-1].end == video.duration
    for scene, after in zip(video.scenes, video.scenes[1:]):
        assert scene.end == after.start and scene.background != after.background
    for scene in video.scenes:
        assert 20 - 1e-9 <= scene.end - scene.start <= 120 + 1e-9
        assert 1 <= len(scene.shapes) <= 3
        assert any(shape.kind == video.dominant_kind for shape in scene.shapes)
        assert all(28 <= shape.size <= 56 for shape in scene.shapes)

    regular = [shape.kind for scene in video.scenes for shape in scene.shapes]
    dominant = regular.count(video.dominant_kind)
    assert dominant >= 0.6 * len(regular)

    # Events: 2..6 s (stretched in long videos), 64..96 px, inside the frame and the video, >= 10 s apart.
    events = video.events
    assert all(a.start < b.start for a, b in zip(events, events[1:]))
    for event in events:
        shortest, longest = event_seconds(video.duration)
        assert 2 - 1e-9 <= event.end - event.start <= longest + 1e-9
        if video.duration >= 600:  # room to spare: never squeezed below the stretched minimum
            assert event.end - event.start >= shortest - 1e-9
        assert 64 <= event.size <= 96
        assert event.size / 2 <= event.x <= video.width - event.size / 2
        assert event.size / 2 <= event.y <= video.height - event.size / 2
        assert 0 < event.start and event.end < video.duration
    for a, b in zip(events, events[1:]):
        assert b.start - a.end >= 10 - 1e-9

    groups = occurrences(video)
    counts = sorted(len(group) for group in groups.values())
    assert 2 <= len(groups) <= 5
    assert counts[:-1] == [1] * (len(counts) - 1) and counts[-1] <= 4  # at most one pair repeats
    assert counts[-1] < dominant  # the dominant kind also outnumbers every event
    event_kinds = [kind for kind, _ in groups]
    assert len(set(event_kinds)) == len(event_kinds)
    assert not set(event_kinds) & set(regular)
    assert video.dominant_kind not in event_kinds


@settings(max_examples=25, deadline=None)
@given(seeds, durations)
def test_questions_are_answerable_and_unambiguous(seed, duration):
    video = generate_video(seed, duration)
    questions = make_questions(video, np.random.default_rng(seed))
    assert [q.family for q in questions] == ["needle", "grounding", "counting", "global"]
    needle, grounding, counting, overall = questions
    groups = occurrences(video)

    kind = needle.text.removeprefix("What colour is the ").removesuffix("?")
    assert [colour for k, colour in groups if k == kind] == [needle.answer]
    assert needle.evidence == tuple((e.start, e.end) for e in groups[kind, needle.answer])

    colour, kind = grounding.text.removeprefix("When does the ").removesuffix(" appear?").split()
    (event,) = groups[kind, colour]
    assert grounding.answer == f"At {round((event.start + event.end) / 2)} seconds."
    assert grounding.evidence == ((event.start, event.end),)

    colour, kind = counting.text.removeprefix("How many times does the ").removesuffix(" appear?").split()
    assert counting.answer == str(len(groups[kind, colour]))
    assert len(counting.evidence) == len(groups[kind, colour])

    assert overall.answer == video.dominant_kind and overall.evidence == ((0.0, video.duration),)
    for question in questions:
        assert is_correct(question, question.answer, segment_seconds=4.0)
        start, end = question.evidence[0]
        assert segment_relevance(question, (start + end) / 2 - 1, (start + end) / 2 + 1)


@settings(max_examples=40, deadline=None)
@given(seeds, durations)
def test_interval_and_order_questions_have_one_right_answer(seed, duration):
    video = generate_video(seed, duration)
    interval, order = temporal_questions(video)
    groups = occurrences(video)

    colour, kind = interval.text.removeprefix("From when to when is the ").removesuffix(" visible?").split()
    (event,) = groups[kind, colour]  # shown once: one interval
    assert interval.evidence == ((event.start, event.end),)
    assert interval.answer == f"From {round(event.start)} to {round(event.end)} seconds."
    assert is_correct(interval, interval.answer, segment_seconds=4.0)  # rounding keeps IoU >= 0.5 (events >= 2 s)
    assert not is_correct(interval, f"From {event.end + 1:.0f} to {event.end + 20:.0f} seconds.", 4.0)

    first, second = order.text.removeprefix("Which appears first, the ").removesuffix("?").split(" or the ")
    named = [tuple(pair.split()[::-1]) for pair in (first, second)]  # (kind, colour)
    assert named[0] != named[1] and all(pair in groups for pair in named)
    earlier = min(named, key=lambda pair: groups[pair][0].start)
    later = max(named, key=lambda pair: groups[pair][0].start)
    assert order.answer == f"The {earlier[1]} {earlier[0]}."
    assert order.evidence == tuple(sorted((groups[pair][0].start, groups[pair][0].end) for pair in named))
    assert is_correct(order, order.answer, 4.0) and not is_correct(order, f"The {later[1]} {later[0]}.", 4.0)
    for question in (interval, order):
        start, end = question.evidence[0]
        assert segment_relevance(question, (start + end) / 2 - 1, (start + end) / 2 + 1)


def test_new_families_come_from_the_video_s_own_stream():
    video = generate_video(17, 900)
    alone = temporal_questions(video)
    assert all_questions(video, np.random.default_rng(99))[4:] == alone == temporal_questions(generate_video(17, 900))
    caller, before = np.random.default_rng(5), np.random.default_rng(5)
    assert all_questions(video, caller)[:4] == make_questions(video, before)
    assert caller.bit_generator.state == before.bit_generator.state  # no draws beyond make_questions' own
    answers_first_named = set()
    for seed in range(12):
        order = temporal_questions(generate_video(seed, 600))[1]
        first_named = order.text.removeprefix("Which appears first, the ").split(" or ")[0]
        answers_first_named.add(order.answer == f"The {first_named}.")
    assert answers_first_named == {True, False}  # the answer is not always the one named first


def test_render_shape_and_dtype():
    video = generate_video(3, 200)
    frame = video.frame(12.5)
    assert frame.shape == (256, 512, 3) and frame.dtype == np.uint8
    frames = video.frames(np.array([0.0, 12.5, 199.75]))
    assert frames.shape == (3, 256, 512, 3) and frames.dtype == np.uint8
    np.testing.assert_array_equal(frames[1], frame)
    assert len(np.unique(frame.reshape(-1, 3), axis=0)) >= 2  # background plus at least one shape
    with pytest.raises(ValueError):
        video.frame(200.5)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_events_are_visible_only_while_they_last(seed):
    video = generate_video(seed, 400)
    for event in video.events:
        mask = sprite(event.kind, event.size)
        left, top = round(event.x - event.size / 2), round(event.y - event.size / 2)

        def covered(t):
            box = video.frame(t)[top:top + event.size, left:left + event.size]
            return bool(np.all(box[mask] == COLOURS[event.colour]))

        assert covered((event.start + event.end) / 2)
        # Regular shapes are smaller than any event, so they can never cover its whole mask.
        assert not covered(event.start - 0.5)
        assert not covered(event.end + 0.5)


def _lobes(mask, radius):
    """Number of separate arcs of a circle of `radius` (in units of half the box) lying inside the mask."""
    size = mask.shape[0]
    angles = np.radians(np.arange(360))
    cols = ((radius * np.cos(angles) + 1) / 2 * size).astype(int)
    rows = ((radius * np.sin(angles) + 1) / 2 * size).astype(int)
    ring = mask[rows, cols].astype(int)
    # A majority vote over 11 degrees hides the flicker where the ring crosses an edge's pixel staircase.
    ring = np.convolve(np.r_[ring[-5:], ring, ring[:5]], np.ones(11), "valid") > 5
    return int(np.sum(ring & ~np.roll(ring, 1)))


@pytest.mark.parametrize("size", [28, 29, 41, 56, 64, 77, 96])
def test_sprites_are_recognisable(size):
    assert _lobes(sprite("circle", size), 0.9) == 0 and sprite("circle", size)[size // 2].all()
    assert _lobes(sprite("square", size), 0.95) == 4
    assert _lobes(sprite("triangle", size), 0.85) == 3
    assert _lobes(sprite("star", size), 0.75) == 5
    assert _lobes(sprite("diamond", size), 0.9) == 4
    assert _lobes(sprite("cross", size), 0.75) == 4
    # Diamond and cross reach the middle of each side; a square's and a diamond's corners differ.
    for kind in ("diamond", "cross"):
        mask = sprite(kind, size)
        assert mask[size // 2, 0] and mask[0, size // 2] and not mask[0, 0]
    assert sprite("square", size)[size // 7, size // 7] and not sprite("square", size)[size // 2, 0]
    # The triangle and the star point up.
    for kind in ("triangle", "star"):
        rows = sprite(kind, size).sum(axis=1)
        assert rows[size // 10] < rows[size // 2]
    triangle = sprite("triangle", size).sum(axis=1)
    assert triangle[np.nonzero(triangle)[0][-1]] > size * 0.8  # wide flat base at the bottom
    with pytest.raises(ValueError):
        sprite("hexagon", size)


def _q(family, answer, evidence=((100.0, 104.0),)):
    return Question(family, "?", answer, evidence)


@pytest.mark.parametrize("family, answer, prediction, expected", [
    ("needle", "red", "red", True),
    ("needle", "red", "Red.", True),
    ("needle", "red", "The star is RED!", True),
    ("needle", "red", "reddish", False),
    ("needle", "red", "blue", False),
    ("needle", "red", "red or blue", False),
    ("needle", "red", "", False),
    ("global", "cross", "cross", True),
    ("global", "cross", "Crosses.", True),
    ("global", "circle", "The circles", True),
    ("global", "circle", "square", False),
    ("global", "cross", "crossword", False),
    ("global", "circle", "circles and squares", False),
    ("counting", "3", "3", True),
    ("counting", "3", "It appears 3 times.", True),
    ("counting", "3", "Three times", True),
    ("counting", "3", "thrice", True),
    ("counting", "1", "Once.", True),
    ("counting", "2", "the star appears 2 times, then 3", True),
    ("counting", "3", "4", False),
    ("counting", "3", "3.5", False),
    ("counting", "3", "no idea", False),
])
def test_is_correct_words_and_counts(family, answer, prediction, expected):
    assert is_correct(_q(family, answer), prediction, segment_seconds=4.0) is expected


@pytest.mark.parametrize("prediction, expected", [
    ("At 102 seconds.", True),
    ("at 97 seconds", True),  # 3 s before the start: half a 4 s segment + 1 s
    ("96.9", False),
    ("107.0 s", True),
    ("At 107.1 seconds", False),
    ("At 1,000 seconds", False),
    ("sometime", False),
])
def test_is_correct_grounding_tolerance(prediction, expected):
    assert is_correct(_q("grounding", "At 102 seconds."), prediction, segment_seconds=4.0) is expected


def test_is_correct_grounding_scales_with_segment_and_reads_thousands():
    question = _q("grounding", "At 1234 seconds.", ((1232.0, 1236.0),))
    assert is_correct(question, "At 1,224 seconds.", segment_seconds=16.0)  # 8 s before: slack 8 + 1
    assert not is_correct(question, "At 1,222 seconds.", segment_seconds=16.0)


@pytest.mark.parametrize("prediction, expected", [
    ("From 100 to 104 seconds.", True),
    ("From 101 to 105 seconds.", True),  # IoU 3/5
    ("From 102 to 106 seconds.", False),  # IoU 2/6
    ("From 100 to 108 seconds.", True),  # IoU 4/8: R@1 at IoU = 0.5 counts the boundary
    ("From 99.9 to 108.1 seconds.", False),
    ("from 100.5 to 103.5", True),
    ("From 104 to 100 seconds.", False),  # reversed: an empty interval
    ("From 102 to 102 seconds.", False),
    ("At 102 seconds.", False),  # one time is not an interval
    ("100-104", True),
    ("From 1,000 to 1,004 seconds.", False),
    ("sometime", False),
])
def test_is_correct_interval_by_temporal_iou(prediction, expected):
    assert is_correct(_q("interval", "From 100 to 104 seconds."), prediction, segment_seconds=28.0) is expected


@pytest.mark.parametrize("question, answer, prediction, expected", [
    ("Which appears first, the red star or the blue circle?", "The red star.", "The red star.", True),
    ("Which appears first, the red star or the blue circle?", "The red star.", "star", True),
    ("Which appears first, the red star or the blue circle?", "The red star.", "Red!", True),
    ("Which appears first, the red star or the blue circle?", "The red star.", "The stars.", True),
    ("Which appears first, the red star or the blue circle?", "The red star.", "The blue circle.", False),
    ("Which appears first, the red star or the blue circle?", "The red star.", "The red circle.", False),
    ("Which appears first, the red star or the blue circle?", "The red star.", "the red star, then the blue circle",
     False),
    ("Which appears first, the red star or the blue circle?", "The red star.", "The green star.", False),
    ("Which appears first, the red star or the blue circle?", "The red star.", "first", False),
    ("Which appears first, the blue circle or the red star?", "The red star.", "The red star.", True),
    # the same colour: only the kind sets the earlier one apart
    ("Which appears first, the red circle or the red star?", "The red star.", "The red star.", True),
    ("Which appears first, the red circle or the red star?", "The red star.", "Red.", False),
])
def test_is_correct_order_names_only_the_earlier(question, answer, prediction, expected):
    assert is_correct(Question("order", question, answer, ((1.0, 3.0), (20.0, 24.0))), prediction, 4.0) is expected


@pytest.mark.parametrize("answer, seconds, outside", [
    ("At 101.0 seconds.", [101.0], False),
    ("At 1,119.8 seconds.", [1119.8], True),
    ("From -2 to 5 seconds.", [-2.0, 5.0], True),
    ("From 10-20 seconds.", [10.0, 20.0], False),
    ("From 590 to 600.5 seconds.", [590.0, 600.5], True),
    ("From 590 to 600 seconds.", [590.0, 600.0], False),
    ("The red star.", [], False),
])
def test_times_an_answer_names_and_whether_one_is_outside_the_video(answer, seconds, outside):
    assert named_seconds(answer) == seconds
    assert names_time_outside(answer, 600.0) is outside


def test_temporal_iou():
    assert temporal_iou((0.0, 4.0), (2.0, 6.0)) == pytest.approx(1 / 3)
    assert temporal_iou((0.0, 4.0), (4.0, 6.0)) == 0.0 == temporal_iou((3.0, 3.0), (0.0, 6.0))
    assert temporal_iou((5.0, 1.0), (0.0, 6.0)) == 0.0


def test_segment_relevance():
    question = _q("needle", "red", ((10.0, 14.0), (40.0, 42.0)))
    assert not segment_relevance(question, 0.0, 10.0)  # touching is not overlapping
    assert segment_relevance(question, 0.0, 10.1)
    assert segment_relevance(question, 11.0, 12.0)
    assert segment_relevance(question, 13.9, 20.0)
    assert not segment_relevance(question, 14.0, 40.0)
    assert segment_relevance(question, 41.0, 50.0)
    assert segment_relevance(_q("global", "star", ((0.0, 60.0),)), 500.0, 504.0)


def test_mp4_round_trip(tmp_path):
    video = generate_video(4, 20.0)
    path = write_mp4(video, str(tmp_path / "v.mp4"), fps=4.0)
    with av.open(path) as container:
        stream = container.streams.video[0]
        assert stream.average_rate == 4
        decoded = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
    assert len(decoded) == 80
    assert decoded[0].shape == (256, 512, 3)
    # Lossy, but the content must be the rendered frames in order.
    for i in (0, 41, 79):
        assert np.abs(decoded[i].astype(int) - video.frame(i / 4)).mean() < 6


def test_generate_video_rejects_bad_arguments():
    for duration in (19.0, math.nan, math.inf):
        with pytest.raises(ValueError):
            generate_video(0, duration)
    with pytest.raises(ValueError):
        generate_video(0, min_duration=100, max_duration=50)
    with pytest.raises(ValueError):
        generate_video(0, 60, width=64)


def test_cli_render(tmp_path):
    out = tmp_path / "demo.mp4"
    assert main(["synthetic", "render", "--seed", "9", "--duration", "21", "--fps", "2", "--out", str(out)]) == 0
    data = json.loads((tmp_path / "demo.json").read_text())
    assert data["video"]["seed"] == 9 and data["video"]["duration"] == 21
    assert [q["family"] for q in data["questions"]] == ["needle", "grounding", "counting", "global", "interval",
                                                        "order"]
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 42


@pytest.mark.parametrize("argv", [
    ["render", "--seed", "1", "--out", "x.avi"],
    ["render", "--seed", "1", "--duration", "5", "--out", "x.mp4"],
    ["render", "--seed", "1", "--fps", "0", "--out", "x.mp4"],
    ["render", "--seed", "-1", "--out", "x.mp4"],
    ["render", "--seed", "1", "--out", "/no/such/dir/x.mp4"],
    ["render", "--out", "x.mp4"],
])
def test_cli_rejects_bad_arguments_in_one_line(argv):
    err = io.StringIO()
    assert main(["synthetic", *argv], err=err) == 2
    assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("error: ")


@pytest.mark.parametrize("seed", [0, 5])
def test_sprites_are_what_a_frame_draws(seed):
    video = generate_video(seed, 300)
    for t in np.linspace(0, 299, 40):
        drawn = video.sprites(t)
        assert [s.event for s in drawn] == sorted(s.event for s in drawn)  # events on top of the moving shapes
        assert sum(s.event for s in drawn) == sum(e.start <= t < e.end for e in video.events)
        frame, top = video.frame(t), drawn[-1]
        box = frame[top.top:top.top + top.size, top.left:top.left + top.size]
        assert np.all(box[sprite(top.kind, top.size)] == COLOURS[top.colour])
    with pytest.raises(ValueError):
        video.sprites(300.5)
