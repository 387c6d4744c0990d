"""The grounding metrics' rules where a fault would hide (`tempo.eval.metrics`), by hand from QVHighlights' evaluation
(standalone_eval/eval.py): a window reaching the threshold exactly counts (ties are common on the 2-second grid),
windows are ranked by their score, and a query without a prediction or a set without queries is refused. Each case
has one true window, so they hold under the official tie rule (a tie goes to the last true window) too."""

from __future__ import annotations

import numpy as np
import pytest

from tempo.eval import highlights, metrics
from tempo.eval.formats import Annotation, Prediction


def truth(qid: str, *windows: tuple[float, float], duration: float | None = 20.0, clips=(), saliency=()) -> Annotation:
    return Annotation(qid, "q", "v", tuple(windows), duration, clips, saliency)


def test_r1_counts_a_window_at_the_threshold():
    """(0, 10) against (0, 20): 10 / 20 = 0.5 exactly; (0, 6): 6 / 20 = 0.3; (0, 14): 14 / 20 = 0.7."""
    for window, hits in (((0, 10), (1.0, 1.0, 0.0)), ((0, 6), (1.0, 0.0, 0.0)), ((0, 14), (1.0, 1.0, 1.0)),
                         ((0, 5.8), (0.0, 0.0, 0.0))):
        scores = metrics.score([Prediction("1", ((*window, 1.0),))], [truth("1", (0, 20))])
        assert tuple(scores.recall[t] for t in (0.3, 0.5, 0.7)) == hits, window
        assert scores.mean_iou == pytest.approx(window[1] / 20)


def test_ap_counts_a_window_at_the_threshold():
    # IoU 0.5 exactly is a hit at 0.5 (AP 1), not at 0.75 (AP 0); 15 / 20 = 0.75 is a hit at both
    assert metrics.average_precision([(0, 10, 1.0)], [(0, 20)], 0.5) == 1.0
    assert metrics.average_precision([(0, 10, 1.0)], [(0, 20)], 0.75) == 0.0
    assert metrics.average_precision([(5, 20, 1.0)], [(0, 20)], 0.75) == 1.0


def test_ap_ranks_windows_by_their_score():
    # submitted worst first: ranked by score the hit is first (AP 1), as submitted it would be second (1/2)
    assert metrics.average_precision([(50, 60, 0.1), (0, 10, 0.9)], [(0, 10)], 0.5) == 1.0
    # equal scores keep the order submitted: the miss first, so precision 1/2 at recall 1
    assert metrics.average_precision([(50, 60, 0.5), (0, 10, 0.5)], [(0, 10)], 0.5) == 0.5
    # a truth matched once: the second window on it is a miss (precision 1 at recall 1 stays the best)
    assert metrics.average_precision([(0, 10, 0.9), (0, 10, 0.8)], [(0, 10)], 0.5) == 1.0
    # no window or no truth: 0
    assert metrics.average_precision([], [(0, 10)], 0.5) == 0.0
    assert metrics.average_precision([(0, 10, 1.0)], [], 0.5) == 0.0


def test_ap_with_a_miss_then_two_hits():
    """Truths (0, 10) and (40, 50); ranks: miss, hit, hit. Precision 1/2 at recall 1/2 and 2/3 at recall 1; the
    first raised to the best at that recall or beyond, 2/3: AP = 1/2 * 2/3 + 1/2 * 2/3 = 2/3."""
    ranked = [(20, 30, 0.9), (0, 10, 0.8), (40, 50, 0.7)]
    assert metrics.average_precision(ranked, [(0, 10), (40, 50)], 0.5) == pytest.approx(2 / 3)


def test_no_true_window_overlaps_nothing():
    window = Prediction("x", ((0, 10, 1.0),))
    assert metrics.top_iou(window, truth("x")) == 0.0
    # the truth ranked by overlap ((5, 15): 5 of 15; (20, 30): none), the IoU over the span of the two (0 to 15)
    assert metrics.top_iou(window, truth("x", (20, 30), (5, 15))) == pytest.approx(5 / 15)


def test_the_scores_over_queries():
    """Query 1 hit exactly (IoU 1), query 2 at IoU 0.25 ((0, 5) against (0, 20)), query 3 nothing predicted (0):
    R1@0.3 is 1/3, mIoU (1 + 0.25 + 0) / 3, mAP@0.5 (1 + 0 + 0) / 3."""
    annotations = [truth("1", (0, 10)), truth("2", (0, 20)), truth("3", (4, 8))]
    predictions = [Prediction("1", ((0, 10, 1.0),)), Prediction("2", ((0, 5, 1.0),)), Prediction("3", ())]
    scores = metrics.score(predictions, annotations)
    assert scores.recall == {0.3: pytest.approx(1 / 3), 0.5: pytest.approx(1 / 3), 0.7: pytest.approx(1 / 3)}
    assert scores.mean_iou == pytest.approx(1.25 / 3)
    # query 1 hits at every threshold of QVHighlights' 0.5:0.95, the others at none
    thresholds = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
    assert scores.average_precision == {t: pytest.approx(1 / 3) for t in thresholds}
    assert scores.queries == 3 and scores.per_query_iou == {"1": 1.0, "2": 0.25, "3": 0.0}
    brief = scores.to_dict()  # in percent to two decimals, as the benchmark's command writes them
    assert (brief["MR-full-R1@0.3"], brief["MR-full-mIoU"], brief["MR-full-mAP"]) == (33.33, 41.67, 33.33)
    assert brief["HL-min-VeryGood-Hit1"] is None and brief["queries"] == 3


def test_hit_at_one_takes_durations_for_annotations_without_one():
    """No duration in the annotation: the one given by qid sets the clips (10 s: 5 of 2 s). Clip 1 is scored 4 by
    one annotator: the highest predicted saliency on it is a hit (1), on clip 0 not (0); their mean is 1/2."""
    plain = truth("a", (2, 4), duration=None, clips=(1,), saliency=((4, 1, 1),))
    other = truth("b", (2, 4), duration=None, clips=(1,), saliency=((4, 1, 1),))
    predictions = [Prediction("a", ((2, 4, 1.0),), (0.1, 0.9, 0.2, 0.1, 0.1)),
                   Prediction("b", ((2, 4, 1.0),), (0.9, 0.1, 0.2, 0.1, 0.1))]
    assert metrics.score(predictions, [plain, other], {"a": 10.0, "b": 10.0}).hit1 == 0.5
    assert metrics.score(predictions, [plain, other]).hit1 is None  # no duration: no clips to score
    # the first of tied saliencies: clip 1 before clip 3
    assert highlights.hit_at_one([0.1, 0.9, 0.2, 0.9, 0.1], plain, 10.0) == 1.0
    # a saliency past the annotated clips (clip 5 of a 10 s video) is no hit
    assert highlights.hit_at_one([0.1, 0.1, 0.1, 0.1, 0.1, 0.9], plain, 10.0) == 0.0


def test_queries_without_a_prediction_or_no_queries_are_refused():
    with pytest.raises(ValueError, match=r"^2 queries have no prediction \(first: qid b\)$"):
        metrics.score([Prediction("a", ())], [truth("a", (0, 1)), truth("b", (0, 1)), truth("c", (0, 1))])
    with pytest.raises(ValueError, match=r"^no annotations to score$"):
        metrics.score([Prediction("a", ())], [])


def test_overlap_iou_by_hand():
    """QVHighlights' IoU, inter / (len1 + len2 - inter): apart, 0; (0.2, 0.6) and (0.4, 0.8) share 0.2 of
    0.4 + 0.4 - 0.2 = 0.6, so 1/3 (a union under a second still divides); two point windows (a collapsed prediction on
    a zero-length truth) share nothing of nothing: the official 0 / 0 is NaN, which reaches no threshold, so 0."""
    assert metrics.overlap_iou((0, 2), (4, 6)) == 0.0
    assert metrics.overlap_iou((0, 2), (1.5, 3.5)) == pytest.approx(0.5 / 3.5)  # 0.5 of 2 + 2 - 0.5
    assert metrics.overlap_iou((0.2, 0.6), (0.4, 0.8)) == pytest.approx(1 / 3)
    assert metrics.overlap_iou((5.0, 5.0), (5.0, 5.0)) == 0.0


def test_refusals_say_why_in_full():
    """The reasons the report prints, word for word: "a" has no true interval (its prediction has no saliency
    either, but the first reason is the one given), "b" no saliency where "c" has some."""
    annotations = [truth("a"), truth("b", (0, 10)), truth("c", (0, 10))]
    predictions = {"a": Prediction("a", ((0, 10, 1.0),)), "b": Prediction("b", ((0, 10, 1.0),)),
                   "c": Prediction("c", ((0, 10, 1.0),), (0.5,) * 10)}
    assert metrics.refusals(predictions, annotations) == {
        "a": "no true interval (its R1 stops with an IndexError)",
        "b": "no pred_saliency_scores where other queries have them (a KeyError, or no highlight metrics at all "
             "when the file's first query is the one without)"}


def test_the_official_protocol_refuses_a_set_with_nothing_to_score():
    with pytest.raises(ValueError, match=r"^no query has both a predicted and a true interval, so the official "
                                         r"protocol has nothing to score$"):
        metrics.score([Prediction("a", ()), Prediction("b", ((0, 1, 1.0),))], [truth("a", (0, 1)), truth("b")],
                      protocol="official")


def test_a_video_of_exactly_one_clip_has_highlights():
    """2 s is one clip of QVHighlights' 2 (the benchmark scores a video as long as a clip): its one clip, scored 4 by
    an annotator, is the most salient predicted, so HIT@1 is 1."""
    annotation = truth("a", (0, 2), duration=2.0, clips=(0,), saliency=((4, 1, 0),))
    assert metrics.score([Prediction("a", ((0, 2, 1.0),), (0.7,))], [annotation]).hit1 == 1.0


def test_ranking_precision_when_every_clip_is_relevant_or_none():
    """The benchmark's `get_ap` returns 1 when every clip is relevant and 0 when none is, whatever the ranking."""
    assert highlights.ranking_precision(np.array([True, True, True]), np.array([0.1, 0.9, 0.5])) == 1.0
    assert highlights.ranking_precision(np.array([False, False]), np.array([0.1, 0.9])) == 0.0


def test_hit_at_one_by_level():
    """The most salient predicted clip (clip 1 of a 6 s video) got 2 and 3 from two annotators: relevant at Fair (2)
    and Good (3), not at VeryGood (4), so HIT@1 is 1, 1, 0 by level."""
    annotation = truth("a", (2, 4), duration=6.0, clips=(1,), saliency=((2, 3, 0),))
    scores = highlights.highlight_scores([((0.1, 0.8, 0.3), annotation, 6.0)])
    assert {name: hit for name, (_, hit) in scores.items()} == {"Fair": 1.0, "Good": 1.0, "VeryGood": 0.0}
