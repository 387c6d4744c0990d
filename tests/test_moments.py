"""Moments from a run's relevance: the rule on hand-made relevance whose moments are known, zoom's refinement, the
decoder's interval answer beside them, and one short run with Tempo-Tiny."""

import dataclasses
import math

import pytest

from tempo.config import RunConfig
from tempo.engine import VideoCache, answer
from tempo.eval.observe import observe, predictions
from tempo.events import Segment
from tempo.model import from_pretrained
from tempo.moments import EDGE, SHOWN_SHARE, Moment, answer_interval, asks_interval, find_moments, shown
from tempo.synthetic import generate_video, write_mp4


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def segments(log_odds: list[float], length: float = 4.0, offset: float = 0.0) -> list[Segment]:
    """Segments of `length` seconds from `offset`, with relevance given as log-odds."""
    return [Segment(i, offset + i * length, offset + (i + 1) * length, sigmoid(v)) for i, v in enumerate(log_odds)]


def test_a_lone_peak_is_a_moment_narrower_than_its_segment():
    """Log-odds -2 everywhere but 3 at segment 3 (12-16 s): the edge level is -2 + 0.7 * 5 = 1.5, reached 0.7 of
    the way from each neighbour's middle (10 s, 18 s) to the peak's (14 s): 12.8 to 15.2 s."""
    assert EDGE == 0.7
    (moment,) = find_moments(segments([-2] * 3 + [3] + [-2] * 6))
    assert (moment.start, moment.end, moment.score) == (pytest.approx(12.8), pytest.approx(15.2), sigmoid(3))


def test_a_relevant_neighbour_carries_the_moment_into_it():
    """Segment 4 at log-odds 2 is above the edge level 1.5: the moment runs on to 3.5/4 of the way from segment
    5's middle (22 s) back to segment 4's (18 s): 12.8 to 18.5 s, one moment."""
    (moment,) = find_moments(segments([-2] * 3 + [3, 2] + [-2] * 5))
    assert (moment.start, moment.end) == (pytest.approx(12.8), pytest.approx(18.5))


def test_moments_are_ranked_and_only_clear_peaks_count():
    """The background alternates -2 and -1; with peaks 3 (segment 3) and 1.5 (segment 12) the median is -1 and
    the median absolute deviation 1, so a moment needs more than -1 + 2 * 1 = 1: both peaks, not the background.
    Edges sit at the median + 0.7 of the way to the peak: 1.8 for the first (between -2 neighbours: 0.76 of the
    way from 10 s to 14 s), 0.75 for the second (between -1 neighbours: 0.7 of the way from 46 s to 50 s)."""
    log_odds = [-2.0 if i % 2 == 0 else -1.0 for i in range(20)]
    log_odds[3], log_odds[12] = 3.0, 1.5
    first, second = find_moments(segments(log_odds))
    assert (first.start, first.end, first.score) == (pytest.approx(13.04), pytest.approx(14.96), sigmoid(3))
    assert (second.start, second.end, second.score) == (pytest.approx(48.8), pytest.approx(51.2), sigmoid(1.5))
    assert find_moments(segments(log_odds), count=1) == (first,)


def test_no_relevance_and_flat_relevance_give_no_moments():
    assert find_moments([Segment(0, 0, 4, None), Segment(1, 4, 8, None)]) == ()
    assert find_moments(segments([0.5] * 8)) == ()


def test_moments_never_overlap():
    """Two peaks in neighbouring segments with a dip between edges: each is its own moment, and they share at
    most an edge."""
    found = find_moments(segments([-2, -2, 3, -2, 2.9, -2, -2, -2]))
    assert len(found) == 2
    (a, b) = sorted(found, key=lambda m: m.start)
    assert a.end <= b.start


def test_zoom_s_window_makes_the_moments_inside_it():
    """The whole video: 28 s segments, the peak at 56-84 s and a second at 224-252 s. Zoom's window (40-100 s, 4 s
    segments) peaks at 68-72 s (segment 7): inside the window its moment replaces the coarse one; outside, the
    whole video's stays."""
    whole = segments([-2, -2, 3, -2, -2, -2, -2, -2, 1, -2, -2], length=28.0)
    window = segments([-2] * 7 + [3] + [-2] * 7, length=4.0, offset=40.0)
    refined, outside = find_moments(whole, window)
    assert (refined.start, refined.end) == (pytest.approx(68.8), pytest.approx(71.2))  # as the lone peak's
    assert outside == find_moments(whole)[1] and outside.start >= 100


@pytest.mark.parametrize("said, expected", [
    ("From 118.0 to 124.0 seconds.", (118.0, 124.0)),
    ("It is visible between 1:58 and 2:04.", (118.0, 124.0)),
    ("From 124 to 118 seconds.", (118.0, 124.0)),
    ("From 1:02:03 to 1:02:09", (3723.0, 3729.0)),
    ("At 118 seconds.", None),
    ("red", None),
])
def test_the_answer_s_interval(said, expected):
    assert answer_interval(said) == expected


def test_which_questions_ask_for_an_interval():
    assert asks_interval("From when to when is the red circle visible?")
    assert asks_interval("When does the chart start and end?")
    assert not asks_interval("When does the red circle appear?")
    assert not asks_interval("What colour is the star?")


def test_moment_json():
    assert Moment(12.3456, 15.2, 0.912345).to_dict() == {"start": 12.35, "end": 15.2, "score": 0.9123}
    # a field added to every moment goes into the JSON too (CONTRIBUTING.md: add a field to every moment)
    assert list(Moment(1.0, 2.0, 0.5).to_dict()) == [field.name for field in dataclasses.fields(Moment)]


# The 10-minute example's five ranked moments (benchmarks/results/moments-cost-cpu.json): three score 0.01-0.02.
EXAMPLE = (Moment(112.77, 119.07, 0.9996), Moment(543.39, 547.71, 0.5625), Moment(508.02, 512.0, 0.0223),
           Moment(480.55, 486.51, 0.0158), Moment(244.64, 247.73, 0.0147))


def test_a_person_is_shown_the_moments_near_the_best_each_worded_once():
    assert SHOWN_SHARE == 0.1  # measured: python -m benchmarks.shown_moments (docs/demo.md)
    first, second = shown(EXAMPLE)  # the three under a tenth of the best are left out
    assert (first.rank, first.when, first.details, first.value, first.share) == (1, "01:53–01:59", ("6 s",), "1.00",
                                                                                 1.0)
    assert first.label == "moment 1: 01:53–01:59 · 6 s · score 1.00"
    assert second.words == "09:03–09:08 · 4 s · score 0.56" and second.share == pytest.approx(0.5625 / 0.9996)
    assert len(shown(EXAMPLE, share=0.0)) == 5 and shown(()) == ()


@pytest.fixture(scope="module")
def tiny_model():
    return from_pretrained(device="cpu")


def test_a_run_with_tempo_tiny_carries_its_moments_and_interval(tiny_model, tmp_path):
    video = generate_video(11, duration=40.0)
    path = write_mp4(video, str(tmp_path / "v.mp4"), fps=2.0)
    event = video.events[0]
    question = f"From when to when is the {event.colour} {event.kind} visible?"
    finished = answer(tiny_model, path, question, RunConfig())
    assert finished.moments == find_moments(finished.segments)
    record = finished.to_dict()
    assert record["moments"] == [m.to_dict() for m in finished.moments] and record["moments"]
    assert record["answer_interval"] == (list(answer_interval(finished.answer)) if answer_interval(finished.answer)
                                         else None)
    seen = observe(tiny_model, path, "q", question, RunConfig(), VideoCache())
    assert seen.window == () and len(seen.segments) == len(finished.segments)  # 40 s: no closer window
    rows = predictions(seen)
    assert rows["relevance"].intervals[0][:2] == pytest.approx((finished.moments[0].start, finished.moments[0].end))
    assert len(rows["relevance"].saliency or ()) == 20  # one per 2-second clip
