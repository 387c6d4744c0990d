"""The GPU check (benchmarks/gpu) cannot rot while no GPU is lent: its whole sequence runs here on the CPU with tiny
sizes, it fails when a stage is broken, and the Space's GPU reservations are held to the figures it recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from demo.device import COST, DATA_SHEETS, GpuCost
from tests.conftest import ROOT

RESULTS = ROOT / "benchmarks" / "results" / "gpu_check-h200.json"
HEADLINE = ("device", "hour_seconds", "followup_seconds", "peak_memory_gb", "compressor_speedup", "conformance")
PHASES = ("environment", "conformance", "load", "videos", "warm_up", "hour", "ten_minutes", "follow_ups", "decoding",
          "compressor", "pixels")


def dry_run(out) -> tuple[int, dict, str]:
    done = subprocess.run([str(ROOT / "benchmarks" / "gpu" / "check"), "--dry-run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "OUT": str(out), "PYTHON": sys.executable})
    figures = json.loads((out / "gpu_check.json").read_text())
    return done.returncode, figures, done.stderr


def test_the_dry_run_goes_through_every_phase(tmp_path):
    code, figures, stderr = dry_run(tmp_path)
    assert code == 0, stderr[-3000:]
    assert figures["errors"] == {} and figures["failed"] == []
    assert set(PHASES) <= set(figures["phases"])
    assert all(figures[key] is not None for key in HEADLINE if key != "peak_memory_gb")  # no GPU memory on a CPU
    assert figures["phases"]["hour"]["tokens"] == 8 and figures["phases"]["hour"]["segments"] == 8
    assert figures["phases"]["follow_ups"]["same_answer_from_cache"]
    assert (tmp_path / "gpu_check.log").read_text().count("phase ") >= len(PHASES)


@pytest.mark.parametrize("broken", ["vision", "decoding"])
def test_a_broken_stage_fails_the_check(tmp_path, monkeypatch, broken):
    """A vision tower that raises fails every phase that compresses; a decoding step that attends wrongly is caught
    by the comparison with the eager forward."""
    import torch

    from benchmarks.gpu import measure
    from tempo.model.compressor import LocalCompressor
    from tempo.model.static_decoding import StaticDecoding

    if broken == "vision":
        def encode_vision(self, pixel_values, grids):
            raise RuntimeError("vision tower broken on purpose")
        monkeypatch.setattr(LocalCompressor, "encode_vision", encode_vision)
    else:
        monkeypatch.setattr(StaticDecoding, "_attend", lambda self, q, keys, values, visible, scale: torch.zeros_like(q))
    assert measure.main(["--dry-run", "--out", str(tmp_path)]) == 1
    figures = json.loads((tmp_path / "gpu_check.json").read_text())
    if broken == "vision":
        assert "vision tower broken on purpose" in figures["errors"]["hour"]
        assert figures["hour_seconds"] is None
    else:
        assert any("graphed decoding" in line for line in figures["failed"])


def test_the_recorded_gpu_figures_have_the_headline_keys():
    figures = json.loads(RESULTS.read_text())
    assert figures["device"] in DATA_SHEETS and figures["errors"] == {}
    assert all(figures[key] is not None for key in HEADLINE)
    assert figures["conformance"].startswith("215/215 float32, 215/215 bf16")


def test_the_space_reserves_what_the_recorded_figures_give():
    """demo.device.COST is GpuCost.fitted on the committed GPU figures: re-running the check and committing its JSON
    without refitting fails here."""
    assert GpuCost.fitted(json.loads(RESULTS.read_text())) == COST


def test_the_fit_follows_the_figures():
    figures = json.loads(RESULTS.read_text())
    figures["phases"]["hour"]["stages"]["per_token"] *= 2
    assert GpuCost.fitted(figures).token > COST.token
