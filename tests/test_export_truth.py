"""The synthetic export's truth (`tempo.eval.export`): per 2-second clip, 4 when its middle shows the event, else the
share of it inside the evidence as 1 to 3 (QVHighlights' scale), each case worked out by hand."""

from __future__ import annotations

import pytest

from tempo.eval.export import annotation, clip_saliency
from tempo.synthetic import Question


@pytest.mark.parametrize("evidence, duration, clips", [
    # clip 1 (2-4 s) has its middle, 3 s, inside; clip 2 (4-6 s) its middle on the end: both 4
    (((3.0, 5.0),), 10.0, ((1, 4), (2, 4))),
    # 21 s holds 10 whole clips: clip 9 (18-20 s) a quarter inside (round(4 * 0.25) = 1); no clip 10
    (((19.5, 21.0),), 21.0, ((9, 1),)),
    # no middle inside: 0.8 of 2 s is 0.4, round(1.6) = 2; 0.6 s, round(1.2) = 1
    (((1.1, 1.9),), 10.0, ((0, 2),)),
    (((0.3, 0.9),), 10.0, ((0, 1),)),
    # 0.9 s in clip 0 (2), then 0.6 s of clip 1 (2-4 s, middle 3 s outside): round(1.2) = 1
    (((1.1, 2.6),), 10.0, ((0, 2), (1, 1))),
    # two spans either side of clip 0's middle: 1.8 s of 2 inside, round(3.6) = 4, kept below a middle's 4: 3
    (((0.0, 0.9), (1.1, 2.0)), 10.0, ((0, 3),)),
    # a sliver (0.1 s: round(0.2) = 0) still counts as 1
    (((0.0, 0.1),), 10.0, ((0, 1),)),
    # an empty span at a clip's edge touches nothing
    (((2.0, 2.0),), 10.0, ()),
    # the last clip too, for a video of whole clips
    (((18.5, 20.0),), 20.0, ((9, 4),)),
])
def test_clip_saliency_by_hand(evidence, duration, clips):
    assert clip_saliency(evidence, duration) == clips


def test_an_annotation_carries_the_question_and_its_rounded_truth():
    """Evidence 5.123-8.456 s in a 20.456 s video (10 whole clips): clip 2 (4-6 s) 0.877 s inside (round(1.754) =
    2), clip 3 its middle (4), clip 4 (8-10 s) 0.456 s (round(0.912) = 1); times kept to the hundredth."""
    question = Question("grounding", "When is the red circle visible?", "At 5 seconds.", ((5.123, 8.456),))
    record = annotation(question, 3, "synthetic-3", 20.456)
    assert (record.qid, record.query, record.vid, record.duration) == ("3-grounding",
                                                                       "When is the red circle visible?",
                                                                       "synthetic-3", 20.46)
    assert record.intervals == ((5.12, 8.46),)
    assert (record.clip_ids, record.saliency) == ((2, 3, 4), ((2, 2, 2), (4, 4, 4), (1, 1, 1)))
