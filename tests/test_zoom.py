"""Zoom, the coarse-to-fine answer: which questions look closer, where, and that one answer carries both passes
(the window's answer in the video's own time, the whole video's relevance with it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

import tempo
from tempo.config import RunConfig, SamplingConfig, Zoom
from tempo.engine import Answers, Request
from tempo.engine.request import answer_configs, sweep_budgets
from tempo.engine.zoom import asks_order, coarse_to_fine, looks_closer, moment_of, peaks, reason_to_zoom, zoomable
from tempo.events import Compressed, Compression, Finished, Segment, SegmentCompressed, VideoProbed, Zoomed
from tempo.video import SamplingPlan
from tests.conftest import ROOT

TWO_MINUTES = str(ROOT / "examples" / "synthetic-900001-2min.mp4")
SMALL = SamplingConfig(max_frames=64)  # 32 s at the full 2 fps: a two-minute video zooms, cheaply


@pytest.mark.parametrize("question, mode, zooms", [
    ("When does the red circle appear?", "auto", "the question asks when"),
    ("From when to when is the blue star visible?", "auto", "the question asks when"),
    ("Which appears first, the red circle or the blue star?", "auto", "the question asks which comes first"),
    ("What colour is the triangle?", "auto", None),
    ("Which shape appears most?", "auto", None),
    ("When does the red circle appear?", "off", None),
    ("What colour is the triangle?", "always", "zoom is always on"),
])
def test_which_questions_look_closer(question, mode, zooms):
    assert reason_to_zoom(question, mode) == zooms


def test_a_question_of_order_names_two_things():
    assert asks_order("Which appears first, the red circle or the blue star?")
    assert not asks_order("What appears first?") and not asks_order("Is it red or blue?")


def test_the_window_samples_at_the_full_rate_inside_the_range_asked():
    assert SamplingConfig().closer_window(2418.0, 2700.0) == (2162.0, 2674.0)
    assert SamplingConfig().closer_window(2690.0, 2700.0) == (2188.0, 2700.0)  # kept inside the video
    assert SamplingConfig().closer_window(100.0, 500.0) is None  # 2 fps throughout already
    ranged = replace(SamplingConfig(), start=1000.0, end=2000.0)
    assert ranged.closer_window(1010.0, 2700.0) == (1000.0, 1512.0)  # kept inside the range
    assert replace(ranged, end=1400.0).closer_window(1500.0, 2700.0) is None
    probed = VideoProbed("v.mp4", 120.0, 4.0, 480, 512, 256, 64, 0.53, 8, "test")
    assert zoomable(probed, SMALL) and not zoomable(probed, SamplingConfig())


def compression_of(relevance: list[float], seconds_per_segment: float = 10.0) -> Compression:
    frames = len(relevance) * 8
    plan = SamplingPlan(list(range(frames)), [i * seconds_per_segment / 8 for i in range(frames)],
                        8 / seconds_per_segment, [range(i * 8, i * 8 + 8) for i in range(len(relevance))], 8,
                        len(relevance) * seconds_per_segment)
    probed = VideoProbed("v.mp4", plan.duration, 4.0, frames * 4, 512, 256, frames, plan.real_fps, len(relevance),
                         "test")
    return Compression("q", probed, plan, [], relevance)


def test_it_looks_at_the_most_relevant_moment_and_for_order_between_two_peaks():
    relevance = [0.1, 0.2, 0.9, 0.8, 0.1, 0.1, 0.7, 0.1, 0.1, 0.1]
    assert peaks(relevance, 2) == [2, 6]  # segment 3 neighbours the best: the same moment
    compression = compression_of(relevance)
    assert moment_of(compression, "When does it appear?", SMALL) == 25.0
    wide = replace(SMALL, max_frames=128)  # 64 s: both peaks (20-30 s and 60-70 s) fit in one window
    assert moment_of(compression, "Which appears first, the red circle or the blue star?", wide) == 45.0
    assert moment_of(compression, "Which appears first, the red circle or the blue star?", SMALL) is None


def scripted(passes: list[list]) -> list:
    """A stand-in for one pass of serve: each call yields the next script, and records the request it was given."""
    calls = []

    def one_pass(request):
        calls.append(request)
        yield from passes[len(calls) - 1]
    return one_pass, calls


def finished_over(video: VideoProbed, answer: str = "At 42.0 seconds.") -> Finished:
    return Finished(answer, [], [], 10, 10, 16, {"total": 1.0}, video)


def test_one_answer_carries_both_passes_and_the_time_of_both():
    whole = compression_of([0.1] * 4 + [0.9] + [0.1] * 7)  # 120 s, most relevant at 40-50 s
    window = replace(whole.video, window=(29.0, 61.0))
    serve, calls = scripted([[whole.video, Compressed(whole)], [window, finished_over(window)]])
    request = Request("v.mp4", "When does it appear?", RunConfig(sampling=SMALL, zoom="auto"))
    events = list(coarse_to_fine(serve, request, lambda r: [4] * len(r), "because"))
    zoomed, = [e for e in events if isinstance(e, Zoomed)]
    assert zoomed.window == (29.0, 61.0) and zoomed.moment == 45.0 and len(zoomed.segments) == 12
    assert calls[0] == request and looks_closer(request.question, request.config, whole.video)  # compresses ...
    closer = calls[1].config
    assert (closer.sampling.start, closer.sampling.end) == zoomed.window and calls[1].answers is Answers.ONE
    assert closer.zoom == Zoom.OFF  # ... and the second never zooms again
    finished = events[-1]
    assert finished.zoom == zoomed and finished.video.window == (29.0, 61.0)
    assert finished.timings["total"] == pytest.approx(1.0 + finished.timings["first pass"])


def test_a_video_too_short_to_zoom_is_answered_in_one_pass():
    short = compression_of([0.5] * 3)  # 30 s: 2 fps throughout
    serve, calls = scripted([[short.video, Compressed(short), finished_over(short.video)]])
    request = Request("v.mp4", "When?", RunConfig(sampling=SMALL, zoom="always"))
    events = list(coarse_to_fine(serve, request, lambda r: [4] * len(r), "because"))
    assert not looks_closer(request.question, request.config, short.video) and len(calls) == 1
    assert not any(isinstance(e, Zoomed) for e in events) and events[-1].zoom is None


def test_two_moments_too_far_apart_are_answered_from_the_whole_video_without_repeating_it():
    whole = compression_of([0.9] + [0.1] * 10 + [0.8])
    replay = [whole.video, Compressed(whole, from_cache=True), SegmentCompressed(Segment(0, 0.0, 10.0, 0.9), 12),
              finished_over(whole.video, "The red circle.")]
    serve, calls = scripted([[whole.video, Compressed(whole)], replay])
    request = Request("v.mp4", "Which appears first, the red circle or the blue star?",
                      RunConfig(sampling=SMALL, zoom="auto"))
    events = list(coarse_to_fine(serve, request, lambda r: [4] * len(r), "because"))
    assert [type(e) for e in events] == [VideoProbed, Compressed, Finished]
    assert calls[1] == replace(request, config=replace(request.config, zoom="off"))  # answered, not zoomed again
    assert not looks_closer(request.question, calls[1].config, whole.video) and events[-1].answer == "The red circle."


@pytest.fixture(scope="module")
def model():
    return tempo.from_pretrained(device="cpu")


def test_zoom_on_the_embedded_model_answers_over_the_window_in_the_video_s_time(model):
    question = "When does the red circle appear?"
    config = RunConfig(sampling=SMALL, zoom="auto")
    cache = tempo.VideoCache(2**30)
    events = list(tempo.run(model, TWO_MINUTES, question, config, cache=cache))
    zoomed, = [e for e in events if isinstance(e, Zoomed)]
    finished = events[-1]
    assert finished.zoom == zoomed and finished.video.window is not None
    low, high = zoomed.window
    assert high - low == pytest.approx(32.0, abs=0.2) and low <= zoomed.moment <= high
    assert all(low - 0.1 <= s.start and s.end <= high + 0.1 for s in finished.segments)
    whole = [e for e in events if isinstance(e, Compressed)][0].compression
    assert [s.relevance for s in zoomed.segments] == whole.relevance  # the first pass as it was compressed
    assert max(zoomed.segments, key=lambda s: s.relevance).start <= zoomed.moment
    plain = tempo.answer(model, TWO_MINUTES, question, replace(config, zoom="off"), cache=cache)
    assert plain.zoom is None and plain.video.window is None
    asked_colour = list(tempo.run(model, TWO_MINUTES, "What colour is the triangle?", config, cache=cache))
    assert not any(isinstance(e, Zoomed) for e in asked_colour)  # auto zooms into questions of time only


def test_a_request_names_its_answers_and_only_one_answer_zooms():
    config = RunConfig(sampling=SMALL, zoom="always")
    other = replace(config, allocation=replace(config.allocation, strategy="uniform"))
    probed = VideoProbed("v.mp4", 120.0, 4.0, 480, 512, 256, 64, 0.53, 8, "test")
    asked = {answers: answer_configs(Request("v.mp4", "q", config, answers), probed, 16)
             for answers in Answers if answers is not Answers.COMPARED}
    assert asked[Answers.NONE] == () and asked[Answers.ONE] == (config,)
    assert answer_configs(Request("v.mp4", "q", config), probed, 16, looks_closer=True) == ()  # the first pass
    sweep = asked[Answers.BUDGETS]
    assert [c.allocation.budget for c in sweep] == sweep_budgets(8, 16) and sweep[-1].allocation.strategy == "off"
    compared = Request("v.mp4", "q", config, Answers.COMPARED, compared_with=other)
    assert answer_configs(compared, probed, 16) == (config, other)
    with pytest.raises(ValueError, match="compared_with"):
        Request("v.mp4", "q", config, Answers.COMPARED)
