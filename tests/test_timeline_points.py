"""The timeline's points and the page's click script agree on what each point carries (`PointData`)."""

from __future__ import annotations

import re

from demo.html import PICKER_JS, looked_html, seekable
from tempo.events import Finished, Segment, VideoProbed
from tempo.render.points import PointData
from tempo.render.progress import RunProgress
from tempo.render.timeline import named_times, timeline_figure


def script_index(name: str) -> int:
    """The customdata index the page's script reads `name` (SEGMENT or START) from."""
    return int(re.search(rf"\b{name} = (\d+)", PICKER_JS).group(1))


def test_a_click_reads_the_segment_and_its_start_from_where_the_figure_put_them():
    segments = [Segment(i, 4.0 * i, 4.0 * i + 4, 0.1 * i, 8 + i) for i in range(5)]
    probed = VideoProbed("v.mp4", 20.0, 2.0, 40, 64, 32, 40, 2.0, 5, "test")
    figure = timeline_figure(RunProgress.of(Finished("", [], segments, 60, 60, 32, {}, probed)))
    points = [trace for trace in figure.data if trace.type in ("bar", "scatter")]
    assert points, "the timeline drew no points"
    for trace in points:
        for point, segment in zip(trace.customdata, segments):
            assert point[script_index("SEGMENT")] == segment.index
            assert point[script_index("START")] == segment.start
            assert PointData(*point).segment == segment.index


def test_the_check_can_fail():
    """Fields put in another order are caught: the script's indices follow the record, not a copy of it."""
    assert script_index("SEGMENT") == PointData._fields.index("segment") != PointData._fields.index("start")


def test_the_chat_seeks_to_the_times_the_timeline_marks_and_no_others():
    """An answer's time past the video's end (a model can write one) names no moment: the timeline leaves it out,
    and the chat leaves it as text."""
    answer = "At 1111.0 seconds, or at 116 seconds."
    seeks = [float(s) for s in re.findall(r"data-seconds='([\d.]+)'", seekable(answer, 600.0))]
    assert seeks == named_times(answer, 600.0) == [116.0]
    assert [float(s) for s in re.findall(r"data-seconds='([\d.]+)'", seekable(answer))] == [1111.0, 116.0]


def test_where_it_looked_shows_relevance_as_ata_reads_it_with_the_raw_score_on_hover():
    import numpy as np

    raw = [0.0011, 0.0042, 0.0019, 0.0011]  # Tempo-Tiny's scores for a question it finds little to say about
    segments = [Segment(i, 4.0 * i, 4.0 * (i + 1), r, 8, np.zeros((8, 8, 3), np.uint8), 4.0 * i)
                for i, r in enumerate(raw)]
    shown = re.findall(r"<span title='([^']*)'>([^<]*)</span>", looked_html(segments))
    assert [text.split(" · ")[1] for _, text in shown] == ["1.00", "0.26", "0.00"]  # not "0.00" three times
    assert shown[0][0] == "relevance 1.00 of the range (raw relevance 0.0042)"
