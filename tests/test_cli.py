"""`tempo`, the one command: its subcommands, the work each hands to its module, and the old entry points."""

import importlib
import io
import json
import os
import re
import runpy
import subprocess
import sys

import pytest

from tempo.cli import checkout, main, sparkline
from tempo.command_line import DROPPED_IN
from tests.conftest import ROOT

COMMANDS = ["serve", "ask", "batch", "bench", "train", "eval", "conformance", "gpu-check"]  # issue 58's list


def run_cli(*args):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def model_args(fixtures):
    return ["--model", str(fixtures / "tempo"), "--base", str(fixtures / "base" / "tiny-qwen3-vl")]


def test_ask_writes_answer_and_json(fixtures, model_args, tmp_path):
    out_json = tmp_path / "result.json"
    code, out, err = run_cli("ask", "--video", str(fixtures / "videos" / "bikes.mp4"), "--question",
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
    code, _, err = run_cli("ask", "--video", video, "--question", "When does the red circle appear?", "--fast-seek",
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
    code, out, err = run_cli("ask", "--video", paths[video], "--question", query, *extra, *model_args)
    assert code == 2
    error_lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1 and message in error_lines[0]
    assert "Traceback" not in err


def test_module_entry_point_reports_errors_without_traceback(fixtures, tmp_path):
    """`python -m tempo` is `tempo`; `infer --query` is `ask --question` under its old names, each named in a
    warning with the release that drops it (the one test that calls the old names)."""
    result = subprocess.run([sys.executable, "-m", "tempo", "infer", "--video", str(tmp_path / "nope.mp4"),
                             "--query", "hi", "--model", str(fixtures / "tempo"), "--base",
                             str(fixtures / "base" / "tiny-qwen3-vl")], capture_output=True, text=True)
    assert result.returncode == 2
    infer, query, error = result.stderr.splitlines()
    assert infer == "warning: `tempo infer` is deprecated and will be removed in tempo 0.2.0: use `tempo ask`"
    assert query == "warning: `--query` is deprecated and will be removed in tempo 0.2.0: use `--question`"
    assert error.startswith("error: Video file not found")
    new = subprocess.run([sys.executable, "-m", "tempo", "ask", "--video", str(tmp_path / "nope.mp4"),
                          "--question", "hi"], capture_output=True, text=True)
    assert new.returncode == 2 and new.stderr.startswith("error: Video file not found")  # no warning


def test_the_old_names_go_in_the_minor_release_after_this_one():
    version = re.search(r'^version = "(\d+)\.(\d+)\.\d+"', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    assert version is not None
    assert DROPPED_IN == f"{version[1]}.{int(version[2]) + 1}.0"


def test_sparkline():
    assert sparkline([0, 4, 8]) == " ▄█"
    assert sparkline([]) == ""


def test_pyproject_installs_this_main_as_the_one_console_script():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert list(scripts) == ["tempo"]
    module, _, name = scripts["tempo"].partition(":")
    assert getattr(importlib.import_module(module), name) is main


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_its_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: tempo {command} ")


def test_python_m_tempo_lists_every_command(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["tempo", "--help"])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("tempo", run_name="__main__")
    listed = {line.split()[0] for line in capsys.readouterr().out.split("COMMAND\n")[-1].splitlines()
              if line.startswith("    ")}
    assert exit_info.value.code == 0 and set(COMMANDS) <= listed


@pytest.mark.parametrize("argv, message", [
    (["train", "--scale", "0"], "--scale must be positive"),
    (["eval", "synthetic", "--n", "0"], "--n must be at least 1"),
    (["conformance", "no-such-folder"], "no-such-folder is not a conformance fixture set"),
    (["synthetic", "render", "--seed", "-1", "--out", "x.mp4"], "--seed must be non-negative"),
    (["serve", "--port", "70000"], "--port must be between 1 and 65535"),
    (["bench", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    (["eval"], "required: EVALUATION"),
])
def test_each_module_s_refusal_is_one_error_line(argv, message):
    code, out, err = run_cli(*argv)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("module, argv, new, message", [
    ("tempo.train", ["--scale", "0"], "tempo train", "--scale must be positive"),
    ("tempo.train.evaluate", ["--n", "0"], "tempo eval synthetic", "--n must be at least 1"),
    ("tempo.conformance", ["no-such-folder"], "tempo conformance", "no-such-folder is not a conformance fixture set"),
    ("tempo.synthetic", ["render", "--seed", "-1", "--out", "x.mp4"], "tempo synthetic", "--seed must be non-negative"),
    ("tempo.bench", ["--no-such-option"], "tempo bench", "unrecognized arguments: --no-such-option"),
    ("tempo.eval.export", ["--seed", "0", "--n", "0", "--out", "x"], "tempo eval export", "--n must be at least 1"),
    ("tempo.eval.grounding", [], "tempo eval grounding", "required: --annotations"),
])
@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # the module was imported already
def test_the_old_entry_points_warn_then_run_the_same_code(module, argv, new, message, monkeypatch, capsys):
    """`python -m MODULE`, as Python runs it, in this process: a warning naming the `tempo` command and the release
    that drops the old name, then the command's own refusal."""
    monkeypatch.setattr(sys, "argv", [module, *argv])
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    warning, error = capsys.readouterr().err.splitlines()
    assert warning == f"warning: `python -m {module}` is deprecated and will be removed in tempo 0.2.0: use `{new}`"
    assert exit_info.value.code == 2
    assert error.startswith(f"python -m {module}: error: ") and message in error, error


def fake_program(folder, relative, monkeypatch):
    """A clone whose program writes its arguments and the settings it was given."""
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""#!{sys.executable}
import json, os, sys
keys = ("GRADIO_SERVER_NAME", "GRADIO_SERVER_PORT", "TEMPO_MODEL", "TEMPO_BASE", "PYTHON", "OUT")
print(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), **{{k: os.environ.get(k) for k in keys}}}}))
sys.exit(3)
""", encoding="utf-8")
    path.chmod(0o755)
    monkeypatch.setattr(checkout, "checkout", lambda: folder)


def test_serve_runs_the_clone_s_app_with_its_settings(tmp_path, monkeypatch, capfd):
    fake_program(tmp_path, "app.py", monkeypatch)
    for name in ("GRADIO_SERVER_NAME", "TEMPO_BASE"):
        monkeypatch.delenv(name, raising=False)
    assert main(["serve", "--port", "7999", "--model", "outputs/m"]) == 3  # the app's own exit status
    ran = json.loads(capfd.readouterr().out)
    assert ran == {"argv": [], "cwd": str(tmp_path), "GRADIO_SERVER_NAME": None, "GRADIO_SERVER_PORT": "7999",
                   "TEMPO_MODEL": "outputs/m", "TEMPO_BASE": None, "PYTHON": os.environ.get("PYTHON"),
                   "OUT": os.environ.get("OUT")}


@pytest.mark.parametrize("argv, passed", [([], []), (["--dry-run"], ["--dry-run"]), (["--fetch"], ["fetch"])])
def test_gpu_check_runs_the_clone_s_script(tmp_path, monkeypatch, capfd, argv, passed):
    fake_program(tmp_path, "benchmarks/gpu/check", monkeypatch)
    monkeypatch.delenv("PYTHON", raising=False)
    assert main(["gpu-check", *argv, "--out", "outputs/x"]) == 3
    ran = json.loads(capfd.readouterr().out)
    assert (ran["argv"], ran["cwd"], ran["PYTHON"], ran["OUT"]) == (passed, str(tmp_path), sys.executable,
                                                                    "outputs/x")


def test_a_library_without_a_clone_says_where_serve_needs_one(tmp_path, monkeypatch):
    monkeypatch.setattr(checkout, "checkout", lambda: tmp_path)
    code, _, err = run_cli("serve")
    assert code == 2 and err.startswith("error: `tempo serve` runs app.py from a clone") and str(tmp_path) in err
