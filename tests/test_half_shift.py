"""Issue 69's experiment: two passes shifted by half a segment read as 2-second clips (experiments/moments)."""

from __future__ import annotations

import statistics

from experiments.moments.half_shift import clip_segments, combined
from tempo.eval.observe import Observation
from tempo.events import Segment


def _segments(*spans: tuple[float, float, float]) -> tuple[Segment, ...]:
    return tuple(Segment(i, *span) for i, span in enumerate(spans))


FIRST = _segments((0, 4, 0.2), (4, 8, 0.8), (8, 10, 0.4))
SHIFTED = _segments((2, 6, 0.6), (6, 10, 0.1))


def test_each_clip_reads_the_segment_of_each_pass_that_covers_it():
    clips = clip_segments(FIRST, SHIFTED, 0.0, 10.0, statistics.fmean)
    assert [(c.start, c.end) for c in clips] == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    # by hand: (0.2 alone), (0.2+0.6)/2, (0.8+0.6)/2, (0.8+0.1)/2, (0.4+0.1)/2
    assert [round(c.relevance or 0.0, 6) for c in clips] == [0.2, 0.4, 0.7, 0.45, 0.25]
    assert [c.relevance for c in clip_segments(FIRST, SHIFTED, 0.0, 10.0, min)] == [0.2, 0.2, 0.6, 0.1, 0.1]


def test_the_clips_replace_the_window_or_else_the_whole_video():
    short = Observation("q", 10.0, FIRST, (), None, 1.0)
    assert [c.start for c in combined(short, SHIFTED, min).window] == [0, 2, 4, 6, 8]
    zoomed = Observation("q", 100.0, _segments((0, 50, 0.1), (50, 100, 0.9)), FIRST, None, 1.0)
    clips = combined(zoomed, SHIFTED, min)
    assert (clips.window[0].start, clips.window[-1].end) == (0, 10)
    assert [c.relevance for c in clips.window] == [0.2, 0.2, 0.6, 0.1, 0.1]  # the window's, not the whole video's
    assert clips.segments == zoomed.segments
