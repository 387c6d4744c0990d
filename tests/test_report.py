"""The app's library helpers: run summaries, key frames, exports and the timeline figure."""

from __future__ import annotations

import csv
import dataclasses
import json
import re
from html import unescape

import numpy as np
import pytest

from demo import html
from tempo.events import AllocationDone, AnswerToken, Finished, Segment, SegmentCompressed, VideoProbed
from tempo.render import export, points, timeline
from tempo.render.progress import RunProgress, headlines, key_frames, run_stats
from tempo.render.report import Asked, report_section
from tempo.render.report import moments_html as report_moments
from tempo.times import clock

PROBED = VideoProbed("v.mp4", 20.0, 25.0, 500, 64, 48, 40, 2.0, 5, "pyav")
RELEVANCE = [0.2, 0.9, 0.5, 0.9, 0.1]
TOKENS = [4, 32, 16, 32, 0]


def frame(i: int) -> np.ndarray:
    return np.full((4, 4, 3), i, dtype=np.uint8)


def stream() -> list:
    segments = [SegmentCompressed(Segment(i, 4.0 * i, 4.0 * (i + 1), r, frame=frame(i)), 5)
                for i, r in enumerate(RELEVANCE)]
    summaries = [Segment(i, 4.0 * i, 4.0 * (i + 1), r, k) for i, (r, k) in enumerate(zip(RELEVANCE, TOKENS))]
    return [PROBED, *segments, AllocationDone(TOKENS, 100, 84, 4, 32, "ata", "head", 0),
            AnswerToken(1, "A "), AnswerToken(2, "cat"),
            Finished("A cat", [1, 2], summaries, 100, 84, 32, {"vision": 1.0, "total": 2.0}, PROBED)]


def run_of(events: list) -> RunProgress:
    progress = RunProgress("What is it?")
    for event in events:
        progress.update(event)
    return progress


def drawn(relevance: list[float], duration: float, tokens: list[int] | None = None, answer: str | None = None,
          k_max: int = 32) -> RunProgress:
    """The record of a run over 4-second segments with these scores (and tokens, and an answer)."""
    probed = VideoProbed("v.mp4", duration, 25.0, 500, 64, 48, 8 * len(relevance), 2.0, len(relevance), "pyav")
    events: list = [probed, *(SegmentCompressed(Segment(i, 4.0 * i, 4.0 * (i + 1), r, frame=frame(i)), len(relevance))
                              for i, r in enumerate(relevance))]
    if tokens is not None:
        events.append(AllocationDone(tokens, sum(tokens), sum(tokens), 4, k_max, "ata", "head", 0))
    if answer is not None:
        events.append(Finished(answer, [], [Segment(i, 4.0 * i, 4.0 * (i + 1), r, k)
                                            for i, (r, k) in enumerate(zip(relevance, tokens or []))],
                               sum(tokens or []), sum(tokens or []), k_max, {}, probed))
    return run_of(events)


def test_progress_follows_the_stream():
    progress = RunProgress()
    assert progress.status == "opening" and progress.eta() is None
    events = stream()
    for event in events[:3]:
        progress.update(event)
    assert progress.status == "compressing" and progress.eta() >= 0
    partial = progress.to_dict()
    assert partial["status"] == partial["stage"] == "compressing"  # `stage`: the key's first name, for clients
    assert [s["tokens"] for s in partial["segments"]] == [None, None]
    for event in events[3:-1]:
        progress.update(event)
    assert progress.status == "answering" and progress.answer == "A cat"
    assert [s["tokens"] for s in progress.to_dict()["segments"]] == TOKENS
    progress.update(events[-1])
    final = progress.to_dict()
    assert final["status"] == final["stage"] == "done" and final["answer"] == "A cat" and final["tokens_used"] == 84


def test_stats_and_key_frames():
    finished = stream()[-1]
    stats = run_stats(finished)
    assert stats["tokens_per_frame"] == pytest.approx(84 / 40)
    assert stats["reduction"] == pytest.approx(5 * 32 / 84)
    picked = key_frames(run_of(stream()).segments, count=3)
    # The three largest allocations (ties to the more relevant), shown in time order; no zero-token segment.
    assert [int(f[0, 0, 0]) for f, _ in picked] == [1, 2, 3]
    assert picked[0][1] == "00:04–00:08 · 32 tokens"
    assert len(key_frames(run_of(stream()).segments, count=10)) == 4


def test_the_report_and_the_page_show_the_same_headlines():
    """The run's headline numbers are worded once (`headlines`): each surface shows every one as it is worded there,
    so renaming a label is a change to one module; the tokens read are memory tokens (docs/glossary.md)."""
    finished = dataclasses.replace(stream()[-1], history_used=2, history_dropped=1)
    rows = headlines(finished)
    assert [row.value for row in rows[:2]] == ["5", "84 / 100"] and "memory tokens" in rows[1].label
    section = report_section(Asked(run_of(stream()[:-1] + [finished])))
    cards = html.stats_html(finished, 0)
    for row in rows:
        assert f"<tr><th>{row.value}</th><td>{row.label}</td></tr>" in section
        assert f"<div class='value'>{row.value}</div><div class='label'>{row.label}</div>" in cards
    assert "visual" not in section + cards


def test_export_writes_json_and_csv(tmp_path):
    first, second = run_of(stream()), run_of(stream())
    first.question, second.question = "What first?", "What next?"
    json_path, csv_path = export.export([first, second], tmp_path)
    turns = json.loads(json_path.read_text())["turns"]
    assert [t["question"] for t in turns] == ["What first?", "What next?"] and turns[1]["segments"][1]["tokens"] == 32
    rows = list(csv.DictReader(csv_path.open()))
    assert [int(r["tokens"]) for r in rows] == TOKENS * 2
    assert [r["turn"] for r in rows] == ["1"] * len(TOKENS) + ["2"] * len(TOKENS)
    assert set(rows[0]) == set(export.TURN_FIELDS + export.SEGMENT_FIELDS)


@pytest.mark.parametrize("seconds, text", [(0, "00:00"), (65.4, "01:05"), (3725, "1:02:05")])
def test_clock(seconds, text):
    assert clock(seconds) == text


def test_time_ticks_stay_few_and_round():
    for duration in (5, 40, 600, 3 * 3600, 10 * 3600):
        values, labels = timeline.time_ticks(duration)
        assert 2 <= len(values) <= 9 and values[0] == 0 and len(labels) == len(values)


def test_figure_while_streaming_and_after_allocation():
    events = stream()
    streaming = timeline.timeline_figure(run_of(events[:3]))
    assert [t.name for t in streaming.data] == ["relevance (scaled)", "relevance"]  # curve and strip, no bars yet
    pending, = {(shape.x0, shape.x1) for shape in streaming.layout.shapes if shape.type == "rect"}  # both rows
    assert pending == (events[2].segment.end, 20.0)  # the rest of the video, greyed out
    assert streaming.layout.yaxis.range == (0, 1.04)  # relevance on [0, 1] from the first segment on
    done = timeline.timeline_figure(run_of(events))
    bars = next(t for t in done.data if t.type == "bar")
    assert list(bars.y) == TOKENS and "00:04–00:08" in bars.customdata[1][0]
    assert {"k_max 32", "k_min 4", "budget ÷ segments 20"} <= {a.text for a in done.layout.annotations}
    assert done.layout.xaxis.ticktext[-1] == "00:20"
    assert done.layout.yaxis.range == (0, 1.04)
    assert timeline.timeline_figure(RunProgress()).data == ()


def test_the_relevance_curve_shows_what_ata_reads_with_the_raw_score_on_hover():
    # Tempo-Tiny's raw relevance can all sit under 0.005: drawn raw, the curve would lie flat on zero.
    raw = [0.0011, 0.0042, 0.0019, 0.0011]
    figure = timeline.timeline_figure(drawn(raw, 16.0, [8] * 4))
    curve = next(t for t in figure.data if t.name == "relevance (scaled)")
    assert list(curve.y) == pytest.approx([0.0, 1.0, 8 / 31, 0.0])
    hover = curve.customdata[1][points.point_field("relevance")]
    assert hover == "relevance 1.00 of the range (raw relevance 0.0042)"
    assert figure.layout.yaxis.title.text == "relevance, scaled"
    flat = timeline.timeline_figure(drawn(raw[:1], 4.0))
    assert list(next(t for t in flat.data if t.type == "scatter").y) == [1.0]  # one segment: ATA gives it all


def test_the_live_and_the_finished_timeline_come_from_one_function(monkeypatch):
    import ast
    from pathlib import Path

    drawn_with: list[int] = []
    draw = timeline._timeline
    monkeypatch.setattr(timeline, "_timeline", lambda *args, **kwargs: drawn_with.append(len(args[0])) or
                        draw(*args, **kwargs))
    run = RunProgress()
    for event in stream():  # every step of a run, from the probe to the finished answer, through one function
        run.update(event)
        timeline.timeline_figure(run)
    assert drawn_with == [0, 1, 2, 3, 4, 5, 5, 5, 5, 5]
    root = Path(timeline.__file__).parents[2]
    callers = {str(path.relative_to(root)) for folder in ("tempo", "demo") for path in (root / folder).rglob("*.py")
               if any("_timeline" in (getattr(node, "id", None), getattr(node, "attr", None),
                                      getattr(node, "name", None))
                      for node in ast.walk(ast.parse(path.read_text())))}
    assert callers == {"tempo/render/timeline.py"}  # nothing else draws a run's timeline its own way


def test_a_short_evidence_band_stays_visible_and_the_answers_time_is_marked():
    hour = timeline.timeline_figure(drawn(RELEVANCE, 3600.0, TOKENS, "At 100.5 seconds."), evidence=[(100.0, 101.0)])
    (x0, x1), = {(shape.x0, shape.x1) for shape in hour.layout.shapes if shape.type == "rect"}
    assert x1 - x0 >= 3600 * timeline.EVIDENCE_MIN_SHARE - 1e-9 and x0 < 100.5 < x1
    assert "evidence" in [trace.name for trace in hour.data]  # named in the legend, not over the plot
    assert "answer 01:40" in [a.text for a in hour.layout.annotations]
    assert any(shape.type == "line" and shape.x0 == 100.5 for shape in hour.layout.shapes)
    assert timeline.named_times("At 01:40, then 12.5 s and 9999 s.", 3600.0) == [12.5, 100.0]


def test_a_long_videos_filmstrip_groups_neighbours_into_at_most_128_cells():
    import re

    from tempo.render.report import filmstrip_html

    tokens = [4 + (i * 7919) % 29 for i in range(1024)]
    segments = [Segment(i, 4.0 * i, 4.0 * i + 4, 0.5, k, frame(0)) for i, k in enumerate(tokens)]
    strip = filmstrip_html(segments, 4, 32)
    cells = re.findall(r"data-segment='(\d+)' data-seconds='([\d.]+)'", strip)
    assert len(cells) == 128
    for number, (index, seconds) in enumerate(cells):  # groups of 8: the one that kept most, from its start
        group = range(8 * number, 8 * number + 8)
        assert int(index) == max(group, key=lambda i: (tokens[i], -i)) and float(seconds) == 32.0 * number
    assert filmstrip_html(segments[:38], 4, 32).count("data-segment=") == 38


def test_stage_timings_add_up_to_the_total_with_decoding_alongside(fixture_model, fixtures):
    import tempo
    from tempo.render.text import timings_text

    finished = tempo.answer(fixture_model, fixtures / "videos" / "shapes_40s_320x240.mp4", "What moves?")
    serial = [name for name in finished.timings if name not in finished.alongside and name != "total"]
    assert "decode" in finished.alongside and "compress" in serial and "other" in serial
    assert sum(finished.timings[name] for name in serial) == pytest.approx(finished.timings["total"], abs=2e-3)
    text = timings_text(finished.timings, finished.alongside)
    assert f"= {finished.timings['total']:.2f} s · alongside: " in text and "decode" in text.split("alongside")[1]


def test_the_timeline_shades_and_numbers_each_moment_and_the_report_lists_them():
    from tempo.render.report import Asked, html_report
    from tempo.times import span

    run = drawn([0.1, 0.2, 0.9, 0.8, 0.1, 0.1, 0.7, 0.1], 32.0, [4, 4, 32, 30, 4, 4, 24, 4], answer="there")
    moments = run.finished.moments
    assert len(moments) >= 2  # two peaks apart: two moments
    fig = timeline.timeline_figure(run)
    shaded = [s for s in fig.layout.shapes if s.fillcolor == timeline.MOMENT_FILL]
    assert len(shaded) == len(moments)
    for moment, shape in zip(moments, shaded):
        assert shape.x0 <= moment.start + 1e-6 and moment.end - 1e-6 <= shape.x1
    ranks = [a.text for a in fig.layout.annotations if a.text and a.text.startswith("<b>")]
    assert ranks == [f"<b>{rank}</b>" for rank in range(1, len(moments) + 1)]
    page = html_report([Asked(run)], model="tiny")
    listed = page[page.index("Moments:"):page.index("</ol>")]
    assert [listed.index(span(m.start, m.end)) for m in moments] == sorted(
        listed.index(span(m.start, m.end)) for m in moments)  # best first
    assert listed.count("<li>") == len(moments)  # each listed once (no key frame here: the run kept no pixels)


def facts(fragment: str) -> list[str]:
    """What a person reads of one moment's HTML, fact by fact ("score 0.95" and "0.95" read alike)."""
    return [part.strip().removeprefix("score ") for node in re.findall(r">([^<>]+)<", fragment)
            for part in unescape(node).split(" · ") if part.strip()]


def test_the_page_the_report_and_the_timeline_word_each_moment_alike_and_only_those_shown():
    run = drawn([0.01, 0.01, 0.95, 0.01, 0.01, 0.5, 0.01, 0.01, 0.04, 0.01, 0.01, 0.01], 48.0, [4] * 12, answer=".")
    assert [m.score for m in run.finished.moments] == [0.95, 0.5, 0.04]  # the third: under a tenth of the best
    expected = [["1", "00:09–00:11", "2 s", "0.95"], ["2", "00:21–00:23", "2 s", "0.50"]]
    page = re.findall(r"<button class='tempo-moment'.*?</button>", html.moments_html(run.finished.moments))
    report = re.findall(r"<figcaption>.*?</figcaption>", report_moments(run))
    assert [facts(m) for m in page] == [facts(m) for m in report] == expected
    hovers = [a.hovertext for a in timeline.timeline_figure(run).layout.annotations if a.hovertext]
    assert hovers == [f"moment {rank}: {when} · {length} · score {value}" for rank, when, length, value in expected]
