import io
import json
import subprocess
import sys

import pytest

from tempo.cli import main, sparkline


def run_cli(*args):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def model_args(fixtures):
    return ["--model", str(fixtures / "tempo"), "--base", str(fixtures / "base" / "tiny-qwen3-vl")]


def test_infer_writes_answer_and_json(fixtures, model_args, tmp_path):
    out_json = tmp_path / "result.json"
    code, out, err = run_cli("infer", "--video", str(fixtures / "videos" / "bikes.mp4"), "--query",
                             "How many bikes pass the camera?", "--budget", "10", "--max-new-tokens", "8",
                             "--json", str(out_json), *model_args)
    assert code == 0, err
    result = json.loads(out_json.read_text())
    assert result["answer"] == out.strip() != ""
    assert [s["tokens"] for s in result["segments"]] == [3, 4, 3]  # the recorded bikes_min_fallback allocation
    assert result["tokens_used"] <= result["budget"] == 10
    assert {"start", "end", "relevance", "tokens"} <= set(result["segments"][0])
    assert result["timings"]["total"] > 0
    assert "3 segments" in err and "compressing 3/3" in err


def test_fast_seek_samples_intra_frames_only(fixtures, model_args, tmp_path):
    out_json = tmp_path / "result.json"
    video = str(fixtures / "videos" / "shapes_40s_320x240.mp4")
    code, _, err = run_cli("infer", "--video", video, "--query", "When does the red circle appear?", "--fast-seek",
                           "--budget", "64", "--max-new-tokens", "4", "--json", str(out_json), *model_args)
    assert code == 0, err
    from tempo.video import open_video

    intra_frame_times = open_video(video, fast_seek=True).intra_frame_times
    starts = [s["start"] for s in json.loads(out_json.read_text())["segments"]]
    assert starts and all(start in intra_frame_times for start in starts)


@pytest.mark.parametrize("video,query,extra,message", [
    ("missing.mp4", "What happens?", [], "not found"),
    ("README", "What happens?", [], "not a readable video"),
    ("bikes", "   ", [], "type a question"),
    ("bikes", "What happens?", ["--budget", "2"], "cannot keep even one token"),
    ("bikes", "What happens?", ["--budget", "-5"], "Visual token budget -5 is less than minimum 1"),
    ("bikes", "What happens?", ["--temperature", "nan"], "Temperature"),
    ("bikes", "What happens?", ["--max-frames", "0"], "Max sampled frames 0 is less than minimum 1"),
])
def test_bad_input_is_one_clear_line(fixtures, model_args, tmp_path, video, query, extra, message):
    paths = {"bikes": str(fixtures / "videos" / "bikes.mp4"), "missing.mp4": str(tmp_path / "missing.mp4")}
    if video == "README":
        paths["README"] = str(tmp_path / "notes.mp4")
        (tmp_path / "notes.mp4").write_text("not a video")
    code, out, err = run_cli("infer", "--video", paths[video], "--query", query, *extra, *model_args)
    assert code == 2
    error_lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and message in error_lines[0]
    assert "Traceback" not in err


def test_module_entry_point_reports_errors_without_traceback(fixtures, tmp_path):
    result = subprocess.run([sys.executable, "-m", "tempo", "infer", "--video", str(tmp_path / "nope.mp4"),
                             "--query", "hi", "--model", str(fixtures / "tempo"), "--base",
                             str(fixtures / "base" / "tiny-qwen3-vl")], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: Video file not found")
    assert "Traceback" not in result.stderr


def test_sparkline():
    assert sparkline([0, 4, 8]) == " ▄█"
    assert sparkline([]) == ""
