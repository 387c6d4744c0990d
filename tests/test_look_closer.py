""""Look closer": the question again over the window around a chosen moment, sampled at the full rate, as a new
turn of the conversation whose timeline spans the window and shows where it sits in the whole video."""

from __future__ import annotations

import gradio as gr
import pytest

import tempo
from demo import handlers
from demo.chat import Conversation
from demo.server import Server

TEN_MINUTES = "examples/synthetic-900002-10min.mp4"
QUESTION = "When does the yellow star appear?"


@pytest.mark.parametrize("moment, duration, window", [
    (300.0, 600.0, (44.0, 556.0)),  # 1,024 frames at 2 fps: 512 s around the moment
    (10.0, 2700.0, (0.0, 512.0)),  # kept inside the video at its start
    (2690.0, 2700.0, (2188.0, 2700.0)),  # and at its end
    (60.0, 150.0, None),  # a video that samples at the full rate already
])
def test_the_window_samples_at_the_full_rate_around_the_moment(moment, duration, window):
    assert tempo.SamplingConfig().closer_window(moment, duration) == window


@pytest.fixture(scope="module")
def server():
    return Server(tempo.from_pretrained(device="cpu"), tempo.Limits())


def last(updates):
    return list(updates)[-1]


@pytest.mark.slow
def test_looking_closer_is_a_new_turn_over_the_window(server):
    settings = {"max_new_tokens": 6}
    first = last(handlers.analyze(server, TEN_MINUTES, QUESTION, **settings))
    talk = first["conversation"]
    closer = last(handlers.look_closer(server, TEN_MINUTES, QUESTION, {"seconds": 300.0}, conversation=talk,
                                       **settings))
    talk = closer["conversation"]
    assert isinstance(talk, Conversation) and len(talk.turns) == 2 and talk.selected == 1
    finished = talk.turns[1].finished
    assert finished.video.window == (44.0, 556.0)
    assert all(44.0 <= s.start and s.end <= 556.0 + 1 for s in finished.segments)
    assert "over 00:44–09:16 of 10:00" in closer["chat"][-1]["content"]
    figure = closer["timeline"]
    assert list(figure.layout.xaxis.range) == [44.0, 556.0]
    assert any("a closer look" in (a.text or "") for a in figure.layout.annotations)


def test_without_a_moment_it_looks_where_the_compressor_looked(server):
    settings = {"max_new_tokens": 4}
    talk = last(handlers.analyze(server, TEN_MINUTES, QUESTION, **settings))["conversation"]
    looked = max(talk.turns[0].finished.segments, key=lambda s: (s.relevance, -s.index))
    talk = last(handlers.look_closer(server, TEN_MINUTES, QUESTION, {}, conversation=talk, **settings))["conversation"]
    start, end = talk.turns[-1].finished.video.window
    assert start <= (looked.start + looked.end) / 2 <= end


def test_there_is_nothing_to_look_closer_at_before_a_question(server):
    with pytest.raises(gr.Error, match="Ask a question first"):
        list(handlers.look_closer(server, TEN_MINUTES, QUESTION, {"seconds": 30.0}))
