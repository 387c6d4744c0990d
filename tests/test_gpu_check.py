"""The GPU check (benchmarks/gpu) cannot rot while no GPU is lent: its whole sequence runs here on the CPU with tiny
sizes (the cold call and every compiled decoding path a CPU can build included), it fails when a stage is broken or
a compiled path's output leaves its tolerance, and the Space's GPU reservations are held to the figures it
recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from demo.device import COST, DATA_SHEETS, GpuCost
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

RESULTS = ROOT / "benchmarks" / "results" / "gpu_check-h200.json"
RECORDED = ("device", "hour_seconds", "followup_seconds", "peak_memory_gb", "compressor_speedup", "conformance")
PHASES = ("environment", "conformance", "load", "videos", "warm_up", "hour", "ten_minutes", "follow_ups", "decoding",
          "compiled", "mfu", "compressor", "pixels", "cold_call")


def dry_run(out) -> tuple[int, dict, str]:
    done = subprocess.run([str(ROOT / "benchmarks" / "gpu" / "check"), "--dry-run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "OUT": str(out), "PYTHON": sys.executable})
    figures = json.loads((out / "gpu_check.json").read_text())
    return done.returncode, figures, done.stderr


def test_the_dry_run_goes_through_every_phase(tmp_path):
    from benchmarks.gpu.report import HEADLINE

    code, figures, stderr = dry_run(tmp_path)
    assert code == 0, stderr[-3000:]
    assert figures["errors"] == {} and figures["failed"] == []
    assert set(PHASES) <= set(figures["phases"])
    assert all(figures[key] is not None for key in HEADLINE if key != "peak_memory_gb")  # no GPU memory on a CPU
    assert figures["phases"]["hour"]["tokens"] == 8 and figures["phases"]["hour"]["segments"] == 8
    assert figures["phases"]["follow_ups"]["same_answer_from_cache"]
    assert (tmp_path / "gpu_check.log").read_text().count("phase ") >= len(PHASES)
    # every compiled path a CPU builds, against the eager forward, and the app's requests with the fastest
    compiled = figures["phases"]["compiled"]
    assert {"flash", "split"} <= {name for name, built in compiled["packages"].items() if "path" in built}
    assert "skipped" in compiled["packages"]["flex"]  # Inductor's CPU FlexAttention: see benchmarks/gpu/compiled.py
    assert {"graphs_split", "graphs_fused", "graphs_flash", "compiled_flash", "compiled_split"} <= set(
        compiled["paths"])
    assert all(path["within_tolerance"] and path["same_tokens"] for path in compiled["paths"].values())
    assert compiled["requests"]["same_tokens"] and compiled["floor"]["floor_ms"] > 0
    # the cold call: a fresh process given the model in host memory, each part timed, the same answer
    cold = figures["phases"]["cold_call"]
    assert cold["same_tokens"] and cold["first_request"]["tokens"] == 8
    assert cold["cold_call_s"] >= cold["first_request"]["total_s"] > 0
    assert all(figures["phases"]["mfu"][f"{stage}_tflop"] > 0 for stage in ("vision", "compressor", "prefill"))


def planted(fault: str, out, only: str) -> tuple[int, dict]:
    """The dry run with `fault` planted, in a process of its own (tests/aoti_process.py says why), through the
    phases in `only` (and those every phase needs)."""
    done = subprocess.run([sys.executable, "-m", "tests.aoti_process", "fault", fault, str(out),
                           "--only", only], cwd=ROOT, capture_output=True, text=True, timeout=900)
    return done.returncode, json.loads((out / "gpu_check.json").read_text())


@pytest.mark.parametrize("broken", ["vision", "decoding"])
def test_a_broken_stage_fails_the_check(tmp_path, broken):
    """A vision tower that raises fails every phase that compresses; a decoding step that attends wrongly is caught
    by the comparisons with the eager forward."""
    code, figures = planted(broken, tmp_path, "hour" if broken == "vision" else "decoding,compiled")
    assert code == 1
    if broken == "vision":
        assert "vision tower broken on purpose" in figures["errors"]["hour"]
        assert figures["hour_seconds"] is None
    else:
        assert any("graphed decoding" in line for line in figures["failed"])
        assert any("decoding path graphs_split off the eager forward" in line for line in figures["failed"])


def test_a_compiled_path_out_of_tolerance_fails_the_check(tmp_path):
    """A compiled layer step whose output is perturbed (as a miscompiled kernel's would be) is caught: the check
    exits 1 and `failed` names that path alone; the uncompiled paths still pass."""
    code, figures = planted("compiled", tmp_path, "compiled")
    assert code == 1 and all(error == "skipped: not in --only" for error in figures["errors"].values())
    assert [line.split(":")[0] for line in figures["failed"]] == ["decoding path compiled_split off the eager forward"]
    assert figures["fastest_compiled"] is None and figures["hour_seconds_compiled"] is None


def test_the_recorded_gpu_figures_have_the_headline_keys():
    figures = json.loads(RESULTS.read_text())
    assert figures["device"] in DATA_SHEETS and figures["errors"] == {}
    assert all(figures[key] is not None for key in RECORDED)
    assert figures["conformance"].startswith("215/215 float32, 215/215 bf16")


def test_the_space_reserves_what_the_recorded_figures_give():
    """demo.device.COST is GpuCost.fitted on the committed GPU figures: re-running the check and committing its JSON
    without refitting fails here."""
    assert GpuCost.fitted(json.loads(RESULTS.read_text())) == COST


def test_the_fit_follows_the_figures():
    figures = json.loads(RESULTS.read_text())
    figures["phases"]["hour"]["stages"]["per_token"] *= 2
    assert GpuCost.fitted(figures).token > COST.token


def test_a_phase_left_out_does_not_run(tmp_path):
    from benchmarks.gpu.measure import DRY_RUN, Check

    check = Check(DRY_RUN, tmp_path, only=frozenset({"mfu"}))
    ran = []
    assert check.run("conformance", lambda: ran.append("conformance") or {}) is None
    assert check.run("mfu", lambda: ran.append("mfu") or {"x": 1}) == {"x": 1}
    assert check.run("hour", lambda: ran.append("hour") or {}) == {}  # every phase needs it
    assert ran == ["mfu", "hour"]
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["errors"] == {"conformance": "skipped: not in --only"}
    assert saved["phases"]["mfu"]["x"] == 1
