"""End to end: app.py served on loopback, driven through gradio_client like any API user would."""

from __future__ import annotations

import glob
import os
import tempfile

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from appserver import load_app_model, serve

QUESTION = "What shapes move across the screen?"
FAST = dict(max_new_tokens=8)  # the answers of the test model are gibberish; a few tokens prove streaming works


@pytest.fixture(scope="module")
def client(fixtures):
    with serve(load_app_model(fixtures)) as url:
        yield Client(url, verbose=False)


@pytest.fixture(scope="module")
def video(fixtures):
    return handle_file(str(fixtures / "videos" / "shapes_40s_320x240.mp4"))


@pytest.fixture(scope="module")
def example():
    """The first shipped example: a 2.5-minute synthetic video and a question Tempo-Tiny knows how to answer."""
    import json
    from pathlib import Path

    examples = Path(__file__).resolve().parent.parent / "examples"
    entry = json.loads((examples / "examples.json").read_text())[0]
    return handle_file(str(examples / entry["video"])), entry["question"]


def _leftovers() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "tempo-app-*")))


def test_answer_returns_the_result_json(client, example):
    video, question = example
    result = client.predict(video, question, api_name="/answer")
    assert result["stage"] == "done"
    assert result["answer"].strip()
    segments = result["segments"]
    assert len(segments) == result["num_segments"] == 38  # 150 s at 2 fps: 300 frames in 8-frame segments
    assert all(set(s) >= {"start", "end", "relevance", "tokens"} for s in segments)
    assert [s["start"] for s in segments] == sorted(s["start"] for s in segments)
    assert sum(s["tokens"] for s in segments) == result["tokens_used"] <= result["budget"]
    assert result["timings"]["total"] > 0


@pytest.mark.parametrize("strategy", ["ata", "uniform", "topk"])
def test_allocations_fit_a_tight_budget(client, video, strategy):
    result = client.predict(video, QUESTION, budget=64, strategy=strategy, **FAST, api_name="/answer")
    assert sum(s["tokens"] for s in result["segments"]) == result["tokens_used"] <= 64


def test_answer_streams_segments_before_the_answer(client, video):
    updates = list(client.submit(video, QUESTION, **FAST, api_name="/answer"))
    stages = [u["stage"] for u in updates]
    assert stages[-1] == "done"
    first = next(u for u in updates if u["segments"])
    assert first["stage"] == "compressing" and first["answer"] == ""


def test_bad_file_is_refused_and_the_app_keeps_serving(client, video, tmp_path):
    fake = tmp_path / "notes.mp4"
    fake.write_text("this is not a video\n")
    with pytest.raises(AppError, match="not a readable video"):
        client.predict(handle_file(str(fake)), QUESTION, api_name="/answer")
    assert client.predict(video, QUESTION, **FAST, api_name="/answer")["answer"].strip()


@pytest.mark.parametrize("question, settings, message", [
    ("   ", {}, "Please type a question"),
    (QUESTION, {"max_frames": 2048, "budget": 64}, "cannot keep even one token"),
    (QUESTION, {"budget": 0}, "less than minimum"),
    (QUESTION, {"temperature": 9}, "greater than maximum"),
])
def test_bad_settings_get_clear_errors(client, fixtures, question, settings, message):
    long_video = handle_file(str(fixtures / "videos" / "long_6min_160x120.mp4"))  # 90 segments at 2048 frames
    with pytest.raises(AppError, match=message):
        client.predict(long_video, question, **settings, api_name="/answer")


def test_missing_video_is_a_clear_error(client):
    with pytest.raises(AppError, match="Please upload a video"):
        client.predict(None, QUESTION, api_name="/answer")


def test_ui_endpoint_fills_every_output_and_leaves_no_files(client, video):
    before = _leftovers()
    status, plot, answer, gallery, stats, json_file, csv_file = client.predict(
        video, QUESTION, 1024, 8192, 4, "ata", "head", 0, 8, False, api_name="/analyze")
    assert "Done" in status and answer.strip() and "segments" in stats
    assert plot and 1 <= len(gallery) <= 6
    for download in (json_file, csv_file):
        assert os.path.getsize(download["value"]) > 0  # Gradio's copy; the app's own folder is gone
    assert _leftovers() == before


def test_ui_endpoint_reports_errors_in_the_status_too(client, tmp_path):
    empty = tmp_path / "empty.mp4"
    empty.touch()
    with pytest.raises(AppError, match="empty"):
        client.predict(handle_file(str(empty)), QUESTION, 1024, 8192, 4, "ata", "head", 0, 8, False,
                       api_name="/analyze")
