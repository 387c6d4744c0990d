"""Moments from a run's relevance: the rule on hand-made relevance whose moments are known, zoom's refinement, the
decoder's interval answer beside them, and one short run with Tempo-Tiny."""

import dataclasses
import math
import re
import statistics

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


def test_the_best_moment_comes_first_wherever_it_sits():
    """As the ranking test, the peaks swapped: 1.5 at segment 3 and 3 at segment 12 (same median -1, deviation 1,
    threshold 1). The later peak is the better: edge -1 + 0.7 * 4 = 1.8 between -1 neighbours, 0.7 of the way from
    46 s and from 54 s: 48.8 to 51.2 s; the earlier one's edge -1 + 0.7 * 2.5 = 0.75 between -2 neighbours, 2.75/3.5
    of the way from 10 s and from 18 s."""
    log_odds = [-2.0 if i % 2 == 0 else -1.0 for i in range(20)]
    log_odds[3], log_odds[12] = 1.5, 3.0
    first, second = find_moments(segments(log_odds))
    assert (first.start, first.end, first.score) == (pytest.approx(48.8), pytest.approx(51.2), sigmoid(3))
    assert (second.start, second.end, second.score) == (pytest.approx(10 + 4 * 2.75 / 3.5),
                                                        pytest.approx(18 - 4 * 2.75 / 3.5), sigmoid(1.5))


# Background -1 on even segments, 1 on every fourth from 1, else 0; peaks 4 (segment 5, 20-24 s), 1.9 and 2.5
# (segments 6 and 7): median 0, median absolute deviation 1, a moment needs more than 2.
TRIMMED = [-1.0, 1.0, -1.0, 0.0, -1.0, 4.0, 1.9, 2.5, -1.0, 1.0, -1.0, 0.0, -1.0, 1.0, -1.0, 0.0, -1.0, 1.0, -1.0, 0.0]


def test_a_moment_stops_where_a_better_one_ends():
    """The peak 4's edge level 2.8: from -1 at segment 4, 3.8/5 of the way from 18 s (21.04 s); toward 1.9 at
    segment 6, 0.9/2.1 of the way back from 26 s (24.29 s, inside segment 6). The peak 2.5's edge level 1.75 takes
    in segment 6 (1.9) to its start, 24 s, which the better moment already holds: it starts at 24.29 s instead;
    its end is 2.75/3.5 of the way back from segment 8's middle, 34 s."""
    best, next_best = find_moments(segments(TRIMMED))
    assert (best.start, best.end, best.score) == (pytest.approx(21.04), pytest.approx(26 - 4 * 0.9 / 2.1), sigmoid(4))
    assert (next_best.start, next_best.end) == (pytest.approx(26 - 4 * 0.9 / 2.1), pytest.approx(34 - 4 * 2.75 / 3.5))
    assert next_best.score == pytest.approx(sigmoid(2.5))


def test_a_moment_stops_where_a_better_one_starts():
    """The same relevance backwards (80 s): each moment mirrored, the lesser one now ending where the better
    starts."""
    best, next_best = find_moments(segments(TRIMMED[::-1]))
    assert (best.start, best.end) == (pytest.approx(80 - 26 + 4 * 0.9 / 2.1), pytest.approx(80 - 21.04))
    assert (next_best.start, next_best.end) == (pytest.approx(80 - 34 + 4 * 2.75 / 3.5),
                                                pytest.approx(80 - 26 + 4 * 0.9 / 2.1))


def test_five_moments_at_most_the_best_five():
    """Seven peaks, 3.0 down to 2.4, on a background alternating -2 and -1 (40 segments): median -1, median absolute
    deviation 1, so every peak stands out (above 1); a run lists the five best, best first."""
    log_odds = [-2.0 if i % 2 == 0 else -1.0 for i in range(40)]
    for n, i in enumerate(range(3, 36, 5)):
        log_odds[i] = 3.0 - n / 10
    found = find_moments(segments(log_odds))
    assert [m.score for m in found] == pytest.approx([sigmoid(3.0 - n / 10) for n in range(5)])
    assert [round(m.start) for m in found] == [13, 33, 53, 73, 93]  # inside segments 3, 8, 13, 18, 23


def test_a_moment_stops_at_a_gap_between_segments():
    """Segment 2 (9-13 s) starts 1 s after segment 1 ends: not neighbours, so the moment starts at 9 s. Its right
    neighbour is one: log-odds -2 and 3, edge level -2 + 0.7 * 5 = 1.5, 3.5/5 of the way back from 15 s to 11 s."""
    spans = [(0, 4), (4, 8), (9, 13), (13, 17), (17, 21), (21, 25)]
    scored = [Segment(i, a, b, sigmoid(3.0 if i == 2 else -2.0)) for i, (a, b) in enumerate(spans)]
    (moment,) = find_moments(scored)
    assert (moment.start, moment.end) == (9.0, pytest.approx(12.2))


def test_a_run_above_the_threshold_is_one_moment():
    """Background -1, 1, -1, 0 repeated (32 segments; with the peaks, median 0 and median absolute deviation 1: a
    moment needs more than 2). Segments 3-7 at 2.4, 2.5, 5, 2.5, 2.4 are one run above 2: one moment, edged at
    0.7 * 5 = 3.5, 0.4 of the way from 18 s and from 26 s toward the peak's middle (19.6-24.4 s), and none of the
    run's other segments starts another. Segment 20 at 2.2 (lower than the run's 2.4 and 2.5) is a moment too: edge
    1.54, 1.54 / 2.2 of the way from 78 s (neighbour 0), 0.54 / 1.2 back from 86 s (neighbour 1)."""
    log_odds = [-1.0, 1.0, -1.0, 0.0] * 8
    log_odds[3:8] = [2.4, 2.5, 5.0, 2.5, 2.4]
    log_odds[20] = 2.2
    first, second = find_moments(segments(log_odds))
    assert (first.start, first.end, first.score) == (pytest.approx(19.6), pytest.approx(24.4), sigmoid(5))
    assert (second.start, second.end, second.score) == (pytest.approx(80.8), pytest.approx(84.2), sigmoid(2.2))
    # a higher level (3: more than 3 above the median) keeps the peak and drops 2.2
    assert find_moments(segments(log_odds), level=3.0) == (first,)


def test_moments_at_the_ends_of_the_video():
    """Ten segments at -2 (median -2, no deviation) with the peak 3 first, then last: the moment runs from the
    video's start to 0.7 of the way from 6 s back to 2 s (3.2 s); or from 34 s + 2.8 to the video's end."""
    (first,) = find_moments(segments([3.0] + [-2.0] * 9))
    assert (first.start, first.end) == (0.0, pytest.approx(3.2))
    (last,) = find_moments(segments([-2.0] * 9 + [3.0]))
    assert (last.start, last.end) == (pytest.approx(36.8), 40.0)
    # a first (or last) segment at 2, above the edge level 1.5, carries the moment to the video's start (or end);
    # the other side 0.7 of the way from 10 s back to 6 s (7.2 s), or from 30 s on to 34 s (32.8 s)
    (first,) = find_moments(segments([2.0, 3.0] + [-2.0] * 8))
    assert (first.start, first.end, first.score) == (0.0, pytest.approx(7.2), sigmoid(3))
    (last,) = find_moments(segments([-2.0] * 8 + [3.0, 2.0]))
    assert (last.start, last.end, last.score) == (pytest.approx(32.8), 40.0, sigmoid(3))
    # the second segment's peak still reads the first as its neighbour: 0.7 of the way from 2 s to 6 s (4.8 s)
    (second,) = find_moments(segments([-2.0, 3.0] + [-2.0] * 8))
    assert (second.start, second.end) == (pytest.approx(4.8), pytest.approx(7.2))


def test_a_run_reaching_the_first_or_last_segment_takes_it_in():
    """2.3, 2.5, 5 then the background (28 segments; median 0, deviation 1, threshold 2): one run of three, one
    moment edged at 3.5, 0.4 of the way from 6 s to 10 s (7.6 s) and 0.75 of the way back from 14 s (11 s); the
    first segment (2.3, its middle outside) starts none of its own. Backwards (112 s) the same at the end."""
    log_odds = [2.3, 2.5, 5.0] + [-1.0, 1.0, -1.0, 0.0] * 6 + [-1.0]
    (moment,) = find_moments(segments(log_odds))
    assert (moment.start, moment.end) == (pytest.approx(7.6), pytest.approx(11.0))
    (moment,) = find_moments(segments(log_odds[::-1]))
    assert (moment.start, moment.end) == (pytest.approx(101.0), pytest.approx(104.4))


def test_zoom_s_window_keeps_moments_that_only_touch_it():
    """Whole-video moments that end where the window starts (12 s) or start where it ends (24 s) stay; a gap
    around each peak segment makes its moment the segment itself. Inside the window (12-24 s, segments of 2 s at
    -2 but one at 3, 18-20 s) the window's moment: 0.7 of the way from 17 s and from 21 s to 19 s."""
    spans = [(0, 3), (8, 12), (13, 17), (17.5, 23), (24, 28), (29, 40)]
    odds = [-2.0, 2.0, -2.0, -2.0, 1.0, -2.0]
    whole = [Segment(i, a, b, sigmoid(v)) for i, ((a, b), v) in enumerate(zip(spans, odds))]
    window = segments([-2.0] * 3 + [3.0] + [-2.0] * 2, length=2.0, offset=12.0)
    found = find_moments(whole, window)
    assert sorted((m.start, m.end) for m in found) == [(8, 12), (pytest.approx(18.4), pytest.approx(19.6)),
                                                       (24, 28)]


def test_a_stronger_segment_inside_a_moment_starts_none_of_its_own():
    """Median 0, deviation 1 as above (threshold 2). The peak 2.8 (segment 5, edge level 1.96) reaches over 1.99
    and 2.5 (segments 6 and 7) to 2.96 / 3.5 of the way back from segment 8's middle (34 s); it starts 2.96 / 3.8 of
    the way from 18 s. Segment 7 (2.5, above the threshold but not in the peak's run, which 1.99 breaks) has its
    middle inside that moment: it starts none of its own."""
    log_odds = [-1.0, 1.0, -1.0, 0.0] * 8
    log_odds[5:9] = [2.8, 1.99, 2.5, -1.0]
    (moment,) = find_moments(segments(log_odds))
    assert (moment.start, moment.end) == (pytest.approx(18 + 4 * 2.96 / 3.8), pytest.approx(34 - 4 * 2.96 / 3.5))


def test_zoom_s_window_drops_the_moments_it_overlaps():
    """Whole-video moments 10-13 s and 23-26 s (gap-isolated peaks) overlap the window (12-24 s, 8 segments of
    1.5 s): both give way. The window's median is -1, its deviation 1: peaks 3 (16.5-18 s; edge 1.8, 3.8 / 5 of the
    way from 15.75 s and from 18.75 s) and 1.5 (21-22.5 s; edge 0.75, 1.75 / 2.5 of the way from 20.25 s and
    23.25 s); at level 3 (above 2) only the first."""
    spans, odds = [(0, 3), (10, 13), (14, 22), (23, 26), (27, 40)], [-2.0, 2.0, -2.0, 1.0, -2.0]
    whole = [Segment(i, a, b, sigmoid(v)) for i, ((a, b), v) in enumerate(zip(spans, odds))]
    window = segments([-2.0, -1.0, -2.0, 3.0, -2.0, -1.0, 1.5, -1.0], length=1.5, offset=12.0)
    first, second = find_moments(whole, window)
    assert (first.start, first.end) == (pytest.approx(15.75 + 1.5 * 0.76), pytest.approx(18.75 - 1.5 * 0.76))
    assert (second.start, second.end) == (pytest.approx(20.25 + 1.5 * 0.7), pytest.approx(23.25 - 1.5 * 0.7))
    assert find_moments(whole, window, level=3.0) == (first,)


def test_a_relevance_of_zero_is_the_least():
    # relevance 0 (log-odds clamped to about -13.8) on segment 0 is no peak: the one moment is the peak 3's
    scored = segments([-2.0] * 9 + [3.0])
    scored[0] = Segment(0, 0.0, 4.0, 0.0)
    (moment,) = find_moments(scored)
    assert (moment.start, moment.end, moment.score) == (pytest.approx(36.8), 40.0, sigmoid(3))


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
    assert Moment(1.0, 15.2345, 0.5).to_dict()["end"] == 15.23
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
    assert first.moment == EXAMPLE[0] and second.moment == EXAMPLE[1]


def test_a_moment_at_exactly_the_share_is_shown():
    """A tenth of 0.5 is 0.05 (exactly, in floats too): 0.5, 0.1 and 0.05 are shown, 0.04 is not."""
    moments = (Moment(0.0, 4.0, 0.5), Moment(8.0, 12.0, 0.1), Moment(16.0, 20.0, 0.05), Moment(24.0, 28.0, 0.04))
    assert [(s.rank, s.moment.score) for s in shown(moments)] == [(1, 0.5), (2, 0.1), (3, 0.05)]


def test_moments_that_all_score_zero_are_shown_with_no_bar():
    """Scores read back from the JSON (four digits) can all be 0: at least a tenth of 0, so shown, each a share
    of 0."""
    (only,) = shown((Moment(0.0, 4.0, 0.0),))
    assert (only.rank, only.value, only.share) == (1, "0.00", 0.0)


def test_a_run_beside_a_better_moment_on_the_last_segment_still_takes_its_neighbour():
    """Background -2 (median -2, no deviation: a moment needs more than -2). The peak 3 on the last segment: 0.7 of
    the way from 34 s to 38 s, to the end (36.8-40 s). The peak 1 at segment 1 (edge -2 + 0.7 * 3 = 0.1) has segment
    0 (-1) in its run, though below its edge: 1.1/2 of the way from 2 s (4.2 s), 2.1/3 of the way back from 10 s
    (7.2 s). Segment 0, its middle (2 s) outside, starts no moment of its own."""
    found = find_moments(segments([-1.0, 1.0] + [-2.0] * 7 + [3.0]))
    assert [(m.start, m.end, m.score) for m in found] == [(pytest.approx(36.8), 40.0, sigmoid(3)),
                                                          (pytest.approx(4.2), pytest.approx(7.2), sigmoid(1))]


def test_a_run_after_a_gap_beside_a_better_moment_takes_its_neighbour():
    """Background -2 (threshold -2). Segment 3 (12-16 s, peak 3) ends 1 s before segment 4 (17-21 s, peak 1): not
    neighbours, so the better moment ends at 16 s (starting 0.7 of the way from 10 s) and the other starts at 17 s.
    Segment 5 (-1, above the threshold, below the edge 0.1) is in the peak 1's run: the moment ends 1.1/2 of the way
    back from 23 s (20.8 s), and segment 5, its middle outside, starts none of its own."""
    spans = [(0, 4), (4, 8), (8, 12), (12, 16), (17, 21), (21, 25), (25, 29), (29, 33), (33, 37), (37, 41)]
    odds = [-2.0, -2.0, -2.0, 3.0, 1.0, -1.0, -2.0, -2.0, -2.0, -2.0]
    scored = [Segment(i, a, b, sigmoid(v)) for i, ((a, b), v) in enumerate(zip(spans, odds))]
    found = find_moments(scored)
    assert [(m.start, m.end, m.score) for m in found] == [(pytest.approx(12.8), 16.0, sigmoid(3)),
                                                          (17.0, pytest.approx(20.8), sigmoid(1))]


def test_a_run_stops_at_the_first_segment_below_the_threshold():
    """Background -2 (threshold -2). The peak 3 (segment 4) has 0 either side in its run (edge 1.5, half way from
    14 s and from 22 s: 16-20 s); the background past them ends it, so the peaks 2 (segment 1) and 1.5 (segment 7),
    two segments away, are moments of their own: edges 0.8 and 0.45, each 0.7 of the way from its neighbours'
    middles."""
    log_odds = [-2.0] * 16
    log_odds[1], log_odds[3:6], log_odds[7] = 2.0, [0.0, 3.0, 0.0], 1.5
    found = find_moments(segments(log_odds))
    assert [(m.start, m.end, m.score) for m in found] == [
        (pytest.approx(16.0), pytest.approx(20.0), sigmoid(3)), (pytest.approx(4.8), pytest.approx(7.2), sigmoid(2)),
        (pytest.approx(28.8), pytest.approx(31.2), sigmoid(1.5))]


@pytest.fixture(scope="module")
def tiny_model():
    return from_pretrained(device="cpu")


def test_a_run_with_tempo_tiny_carries_its_moments_and_interval(tiny_model, tmp_path):
    video = generate_video(11, duration=40.0)
    path = write_mp4(video, str(tmp_path / "v.mp4"), fps=2.0)
    event = video.events[0]
    question = f"From when to when is the {event.colour} {event.kind} visible?"
    finished = answer(tiny_model, path, question, RunConfig())
    # The rule from the module's description, worked here: the most relevant segment stands out (log-odds more than
    # 2 median absolute deviations above the median), so the best moment is its, scored with its relevance.
    relevance = [s.relevance for s in finished.segments]
    odds = [math.log(p / (1 - p)) for p in relevance]
    median = statistics.median(odds)
    peak = max(range(len(odds)), key=odds.__getitem__)
    assert odds[peak] > median + 2 * statistics.median([abs(v - median) for v in odds])
    best = finished.moments[0]
    middle = (finished.segments[peak].start + finished.segments[peak].end) / 2
    assert best.score == relevance[peak] and best.start <= middle <= best.end
    record = finished.to_dict()
    assert record["moments"][0] == {"start": round(best.start, 2), "end": round(best.end, 2),
                                    "score": round(best.score, 4)}
    assert len(record["moments"]) == len(finished.moments)
    # the question asks from when to when: the record carries the answer's first two numbers ("From 2.0 to 6.0")
    said = sorted(float(n) for n in re.findall(r"\d+(?:\.\d+)?", finished.answer)[:2])
    assert len(said) == 2 and record["answer_interval"] == said
    seen = observe(tiny_model, path, "q", question, RunConfig(), VideoCache())
    assert seen.window == () and len(seen.segments) == len(finished.segments)  # 40 s: no closer window
    rows = predictions(seen)
    assert rows["relevance"].intervals[0][:2] == pytest.approx((finished.moments[0].start, finished.moments[0].end))
    assert len(rows["relevance"].saliency or ()) == 20  # one per 2-second clip
