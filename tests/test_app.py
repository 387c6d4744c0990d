"""End to end: app.py served on loopback, driven through gradio_client like any API user would."""

from __future__ import annotations

import glob
import io
import json
import os
import tempfile

import pytest
from appserver import load_app_model, serve
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from tempo import cli
from tempo.errors import InputError
from tempo.render import text

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
    from pathlib import Path

    examples = Path(__file__).resolve().parent.parent / "examples"
    entry = json.loads((examples / "examples.json").read_text())[0]
    return handle_file(str(examples / entry["video"])), entry["question"]


def _leftovers() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "tempo-app-*")))


def test_answer_returns_the_result_json(client, example):
    video, question = example
    result = client.predict(video, question, api_name="/answer")
    assert result["status"] == result["stage"] == "done"  # `stage`: the key's first name, kept for clients
    assert result["answer"].strip()
    segments = result["segments"]
    assert len(segments) == result["num_segments"] == 38  # 150 s at 2 fps: 300 frames in 8-frame segments
    assert all(set(s) >= {"start", "end", "relevance", "tokens"} for s in segments)
    assert [s["start"] for s in segments] == sorted(s["start"] for s in segments)
    assert sum(s["tokens"] for s in segments) == result["tokens_used"] <= result["budget"]
    assert result["timings"]["total"] > 0
    moments = result["moments"]
    assert moments and all(set(m) == {"start", "end", "score"} for m in moments)
    assert [m["score"] for m in moments] == sorted((m["score"] for m in moments), reverse=True)  # best first
    assert all(0 <= m["start"] < m["end"] <= result["duration"] for m in moments)


@pytest.mark.parametrize("strategy", ["ata", "uniform", "topk"])
def test_allocations_fit_a_tight_budget(client, video, strategy):
    result = client.predict(video, QUESTION, budget=64, strategy=strategy, **FAST, api_name="/answer")
    assert sum(s["tokens"] for s in result["segments"]) == result["tokens_used"] <= 64


def test_answer_streams_segments_before_the_answer(client, video):
    updates = list(client.submit(video, QUESTION, **FAST, api_name="/answer"))
    statuses = [u["status"] for u in updates]
    assert statuses[-1] == "done"
    first = next(u for u in updates if u["segments"])
    assert first["status"] == first["stage"] == "compressing" and first["answer"] == ""


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
    (status, plot, chat, key_frames, stats, json_file, csv_file, report_file, filmstrip, truth, moments, clip_file,
     highlights_file) = client.predict(video, QUESTION, 1024, 8192, 4, "ata", "head", 0, 8, False, api_name="/analyze")
    assert "Done" in status and "segments" in stats
    (asked, reply), = zip(chat[::2], chat[1::2])  # one turn: the question, then the reply
    assert QUESTION in asked["content"][0]["text"] and "data-turn='0'" in reply["content"][0]["text"]
    assert plot and 1 <= key_frames.count("tempo-seek tempo-key") <= 6
    for download in (json_file, csv_file, report_file):
        assert os.path.getsize(download["value"]) > 0  # Gradio's copy; the app's own folder is gone
    listed = moments.count("class='tempo-moment'")
    assert clip_file["visible"] is False  # a clip waits for a click
    offered = highlights_file.get("visible") is not False and bool(highlights_file.get("value"))
    assert offered == (listed > 0)  # the highlights picture exactly when the run found moments
    if offered:
        assert os.path.getsize(highlights_file["value"]) > 0
    assert filmstrip.count("data-segment=") == 10  # one thumbnail per segment of the 40 s clip
    assert truth == ""  # not one of the shipped examples
    assert _leftovers() == before


def test_chat_takes_its_history_and_returns_every_turn(client, example):
    video, question = example
    first = client.predict(video, question, max_new_tokens=8, api_name="/chat")
    (turn,) = first["turns"]
    assert turn["question"] == question and turn["truth"]["expected"] == "yellow"
    relevance = sorted((s["relevance"] for s in turn["segments"]), reverse=True)
    assert [s["relevance"] for s in turn["looked_at"]] == relevance[:3]  # where the compressor looked, best first
    again = client.predict(video, "What moves?", history=first, max_new_tokens=8, api_name="/chat")
    assert [t["question"] for t in again["turns"]] == [question, "What moves?"]
    assert again["turns"][0] == turn  # earlier turns come back as they were sent
    single = client.predict(video, question, max_new_tokens=8, api_name="/answer")
    assert single["answer"] == turn["answer"]  # the same answer as /answer gives: history does not change it
    with pytest.raises(AppError, match="history must be the list of turns"):
        client.predict(video, question, history=["what?"], api_name="/chat")


def test_a_chat_history_is_checked_and_bounded():
    from demo import api

    turn = {"question": "What moves?", "answer": "a star"}
    assert api.previous_turns(None) == [] and api.previous_turns({"turns": [turn]}) == [turn]
    assert len(api.previous_turns([turn] * 100)) == 23  # the latest turns, and this one makes 24
    with pytest.raises(InputError, match="this server takes up to 8 MB of earlier turns"):
        api.previous_turns([{"question": "x" * 2**20}] * 9)


def test_an_example_answer_carries_its_ground_truth(client, example):
    video, question = example
    result = client.predict(video, question, max_new_tokens=8, api_name="/answer")
    truth = result["truth"]
    assert truth["expected"] == "yellow" and len(truth["evidence"]) == 1
    assert truth["correct"] == (result["answer"].strip().lower() == "yellow")


def test_compare_reallocates_one_compression(client, example):
    video, question = example
    result = client.predict(video, question, max_new_tokens=8, other_strategy="uniform", other_budget=1024,
                            other_k_min=4, other_truncation="head", api_name="/compare")
    first, second = result["first"], result["second"]
    assert first["settings"]["strategy"] == "ata" and second["settings"]["strategy"] == "uniform"
    assert len(set(s["tokens"] for s in second["segments"])) == 1  # a uniform share
    assert [s["relevance"] for s in first["segments"]] == [s["relevance"] for s in second["segments"]]
    changes = result["token_changes"]
    assert changes == [b["tokens"] - a["tokens"] for a, b in zip(first["segments"], second["segments"])]
    assert sorted(result["most_changed"], key=lambda i: -abs(changes[i]))[:1] == result["most_changed"][:1]


def test_compare_names_a_bad_other_setting(client, example):
    video, question = example
    with pytest.raises(AppError, match="Visual token budget 0 is less than minimum 1"):
        client.predict(video, question, other_strategy="uniform", other_budget=0, other_k_min=4,
                       other_truncation="head", api_name="/compare")


def test_sweep_answers_at_every_budget(client, example):
    video, question = example
    result = client.predict(video, question, max_new_tokens=8, api_name="/sweep")
    assert result["budgets"] == [r["budget"] for r in result["results"]] == [38, 76, 152, 304, 608, 1216]
    assert all(r["tokens_used"] <= r["budget"] and r["answer"] for r in result["results"])
    top = result["results"][-1]
    assert top["tokens_used"] == top["budget"] == 38 * 32 and top["settings"]["strategy"] == "off"
    assert all(isinstance(r["usable"], bool) and isinstance(r["correct"], bool) for r in result["results"])


def test_segment_shows_its_frames_and_where_it_stands(client, example):
    video, question = example
    answered = client.predict(video, question, max_new_tokens=8, api_name="/answer")
    facts, frames = client.predict(video, question, max_new_tokens=8, segment=30, api_name="/segment")
    segment = answered["segments"][30]
    assert (facts["start"], facts["end"], facts["tokens"]) == (segment["start"], segment["end"], segment["tokens"])
    assert facts["relevance"] == pytest.approx(segment["relevance"])
    assert facts["rank"] == 1 + sum(s["relevance"] > segment["relevance"] for s in answered["segments"])
    assert len(frames) == 8
    with pytest.raises(AppError, match="This video has segments 0 to 37"):
        client.predict(video, question, segment=38, api_name="/segment")


def test_report_is_one_html_file(client, example):
    video, question = example
    page = client.predict(video, question, max_new_tokens=8, api_name="/report")
    text = open(page, encoding="utf-8").read()
    assert text.startswith("<!doctype html>") and question in text and "Expected: yellow" in text


def test_a_moment_s_clip_and_the_gallery_come_as_files(client, example):
    import av
    from PIL import Image

    video, question = example
    moment = client.predict(video, question, max_new_tokens=8, api_name="/answer")["moments"][0]
    clip = client.predict(video, start=moment["start"], end=moment["end"], api_name="/clip")
    with av.open(clip) as taken:
        frame = 1 / float(taken.streams.video[0].average_rate)
        assert taken.duration / av.time_base == pytest.approx(moment["end"] - moment["start"], abs=frame + 0.01)
    with pytest.raises(AppError, match="this server cuts clips of up to"):
        client.predict(video, start=0, end=3600, api_name="/clip")
    gallery = Image.open(client.predict(video, question, max_new_tokens=8, api_name="/gallery"))
    assert gallery.format == "PNG" and gallery.width >= 400


def test_ui_endpoint_reports_errors_in_the_status_too(client, tmp_path):
    empty = tmp_path / "empty.mp4"
    empty.touch()
    with pytest.raises(AppError, match="empty"):
        client.predict(handle_file(str(empty)), QUESTION, 1024, 8192, 4, "ata", "head", 0, 8, False,
                       api_name="/analyze")


def test_an_empty_answer_is_shown_as_such():
    assert text.answer_text("yellow") == "yellow"
    assert text.answer_text(" \n") == text.NO_ANSWER and "no answer" in text.NO_ANSWER


def test_one_bad_value_gets_one_message_through_the_page_the_api_the_cli_and_a_batch(client, example, tmp_path):
    """Temperature 9, through each way in: the page's own handler (/analyze), the API (/answer), the command line
    and a batch job. The settings table checks it everywhere, so the message is the same."""
    video, question = example
    path = video["path"]
    messages = []
    for call in (lambda: client.predict(video, question, 1024, 1024, 4, "ata", "head", 9, 8, False,
                                        api_name="/analyze"),
                 lambda: client.predict(video, question, temperature=9, api_name="/answer")):
        with pytest.raises(AppError) as error:
            call()
        messages.append(str(error.value))
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["ask", "--video", path, "--question", question, "--temperature", "9"], out=out, err=err) == 2
    messages.append(err.getvalue().strip().removeprefix("error: "))
    jobs, results = tmp_path / "jobs.jsonl", tmp_path / "results.jsonl"
    jobs.write_text(json.dumps({"id": "hot", "video": path, "question": question, "temperature": 9}) + "\n")
    assert cli.main(["batch", "--input", str(jobs), "--output", str(results)], out=out, err=io.StringIO()) == 1
    messages.append(json.loads(results.read_text())["error"])
    assert messages == ["Temperature 9 is greater than maximum 2 (allowed range 0–2)."] * 4
