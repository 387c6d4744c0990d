"""`tempo batch --engine ray` (`tempo[ray]`): two actors on a local Ray give the local engine's lines, streamed as jobs
end, and a run stopped part-way resumes with only the jobs it had not answered."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tempo import cli
from tempo.errors import InputError
from tempo.integrations import MissingExtra, ray_batch, require
from tempo.train.eval_videos import write_jobs

pytestmark = pytest.mark.slow

MAX_NEW_TOKENS = "12"


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> Path:
    """17 jobs: four questions about each of two synthetic videos at two budgets, and one about a missing file."""
    directory = tmp_path_factory.mktemp("ray-jobs")
    path = directory / "jobs.jsonl"
    write_jobs(str(path), 2, 900, [64, 128], 20.0, 30.0, str(directory / "videos"))
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps({"id": "missing", "video": "missing.mp4", "question": "What colour is the star?"}) + "\n")
    return path


@pytest.fixture(scope="module")
def local(jobs, tmp_path_factory) -> dict[str, dict]:
    """The local engine's results, by id."""
    output = tmp_path_factory.mktemp("local") / "results.jsonl"
    status = cli.main(["batch", "--input", str(jobs), "--output", str(output), "--max-new-tokens", MAX_NEW_TOKENS],
                      io.StringIO(), io.StringIO())
    assert status == 1  # the missing video
    return results(output)


def results(output: Path) -> dict[str, dict]:
    """An output's lines by id, without the timings (which two runs never share: they depend on what each engine's
    cache already held); ids must not repeat."""
    lines = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    by_id = {line["id"]: {key: value for key, value in line.items() if not key.startswith("timings")}
             for line in lines}
    assert len(by_id) == len(lines), "an id was written twice"
    return by_id


def ray_batch_command(jobs: Path, output: Path) -> list[str]:
    return [sys.executable, "-m", "tempo", "batch", "--engine", "ray", "--actors", "2", "--input", str(jobs),
            "--output", str(output), "--max-new-tokens", MAX_NEW_TOKENS]


def start(command: list[str], log: Path) -> subprocess.Popen:
    """The command in a session of its own, so whatever Ray starts for it can be found and ended after it."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    with log.open("w") as stderr:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, env=env, start_new_session=True)


def end_session(process: subprocess.Popen) -> None:
    """Stop what the run left of its Ray processes (normally nothing: Ray stops its own on exit)."""
    for other in psutil.process_iter():
        try:
            if os.getsid(other.pid) == process.pid:
                other.kill()
        except (ProcessLookupError, psutil.Error):
            pass


def finish(process: subprocess.Popen, log: Path, timeout: float = 240) -> str:
    try:
        process.wait(timeout=timeout)
    finally:
        end_session(process)
    return log.read_text()


def test_two_actors_give_the_local_engines_lines(jobs, local, tmp_path):
    output = tmp_path / "results.jsonl"
    process = start(ray_batch_command(jobs, output), tmp_path / "stderr.txt")
    stderr = finish(process, tmp_path / "stderr.txt")
    assert process.returncode == 1, stderr[-3000:]  # the missing video, as locally
    assert "17 jobs: 16 answered, 0 skipped (already answered), 1 failed" in stderr
    assert results(output) == local
    assert "not found" in local["missing"]["error"]


def test_a_run_stopped_part_way_resumes_with_the_missing_jobs_only(jobs, local, tmp_path):
    output, log = tmp_path / "results.jsonl", tmp_path / "stderr.txt"
    process = start(ray_batch_command(jobs, output), log)
    try:
        deadline = time.monotonic() + 200
        while time.monotonic() < deadline and process.poll() is None and lines(output) < 4:
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)  # lines are streamed: some jobs are in the output before the end
    finally:
        finish(process, log)
    first = {}  # what the stopped run wrote (a line it was writing as it stopped would be cut short)
    for line in output.read_text(encoding="utf-8").splitlines():
        try:
            first[json.loads(line)["id"]] = json.loads(line)
        except json.JSONDecodeError:
            pass
    assert 4 <= len(first) < len(local), "the run was not stopped part-way"
    with output.open("a", encoding="utf-8") as f:
        f.write('{"id": "901-global-128", "answer": "half a li')  # as if it was killed in the middle of a line

    process = start(ray_batch_command(jobs, output), log)
    stderr = finish(process, log)
    answered = len([job for job in first.values() if "answer" in job])
    assert f"17 jobs: {16 - answered} answered, {answered} skipped (already answered), 1 failed" in stderr, stderr
    assert results(output) == local


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


def test_actors_take_a_gpu_each_where_the_cluster_has_them():
    assert ray_batch.actor_pool({"CPU": 16, "GPU": 4}, None) == (4, {"num_gpus": 1})
    assert ray_batch.actor_pool({"CPU": 16, "GPU": 4}, 2) == (2, {"num_gpus": 1})
    assert ray_batch.actor_pool({"CPU": 2}, None) == (1, {"num_cpus": 1})
    with pytest.raises(InputError, match="has 2 CPUs, so it cannot hold 3 actors"):
        ray_batch.actor_pool({"CPU": 2}, 3)
    died = Exception("The actor died in its creation task\n  File x, line 1\n\x1b[31mtempo.errors.ModelError: "
                     "No Tempo checkpoint at 'x'.\x1b[0m\n")
    assert ray_batch.reason(died) == "tempo.errors.ModelError: No Tempo checkpoint at 'x'."


def test_engine_options_and_a_missing_extra_are_one_line_each(jobs, tmp_path, monkeypatch):
    err = io.StringIO()
    assert cli.main(["batch", "--input", str(jobs), "--output", str(tmp_path / "o"), "--actors", "2"], err=err) == 2
    assert err.getvalue() == "error: --address and --actors are options of --engine ray.\n"
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    with pytest.raises(MissingExtra, match=r'pip install "tempo\[ray\]"'):
        require("ray", "ray")
    err = io.StringIO()
    assert cli.main(["batch", "--engine", "ray", "--input", str(jobs), "--output", str(tmp_path / "o")], err=err) == 2
    message = err.getvalue()
    assert message.startswith("error: This needs the 'ray' extra") and 'pip install "tempo[ray]"' in message
