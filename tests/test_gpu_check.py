"""The GPU check (benchmarks/gpu) cannot rot while no GPU is lent: its whole sequence runs here on the CPU with tiny
sizes (the cold call and every compiled decoding path a CPU can build included), it fails when a part is broken or
a compiled path's output leaves its tolerance, and the Space's GPU reservations are held to the figures it
recorded."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from benchmarks.gpu.aoti_env import TESTS
from demo.device import COST, DATA_SHEETS, FIXED_UNCERTAINTY, MARGIN, ZEROGPU_HALF_RTX_PRO_6000, GpuCost, StepFit
from tests.conftest import ROOT

pytestmark = pytest.mark.slow

RESULTS = ROOT / "benchmarks" / "results" / "gpu_check-h200.json"
# The newest figures from each card: the H200's at 4223d31 measured its bandwidth and a cold call, the first did not.
FITTED = [ROOT / "benchmarks" / "results" / f"gpu_check-{card}.json" for card in ("h100", "h200-4223d31")]
RECORDED = ("device", "hour_seconds", "followup_seconds", "peak_memory_gb", "compressor_speedup", "conformance")
PARTS = ("environment", "loader", "conformance", "load", "videos", "warm_up", "hour", "ten_minutes", "follow_ups",
         "decoding", "compiled", "mfu", "compressor", "pixels", "cold_call", "int8")


def dry_run(out) -> tuple[int, dict, str]:
    done = subprocess.run([str(ROOT / "benchmarks" / "gpu" / "check"), "--dry-run"], cwd=ROOT, capture_output=True,
                          text=True, timeout=1200, env={**os.environ, "OUT": str(out), "PYTHON": sys.executable})
    figures = json.loads((out / "gpu_check.json").read_text())
    return done.returncode, figures, done.stderr


def test_the_dry_run_goes_through_every_part(tmp_path):
    from benchmarks.gpu.report import HEADLINE

    code, figures, stderr = dry_run(tmp_path)
    assert code == 0, stderr[-3000:]
    assert figures["errors"] == {} and figures["failed"] == []
    assert set(PARTS) <= set(figures["parts"])
    assert all(figures[key] is not None for key in HEADLINE if key != "peak_memory_gb")  # no GPU memory on a CPU
    assert figures["parts"]["hour"]["tokens"] == 8 and figures["parts"]["hour"]["segments"] == 8
    assert figures["parts"]["follow_ups"]["same_answer_from_cache"]
    assert len(re.findall(r"part \w+ \(at ", (tmp_path / "gpu_check.log").read_text())) >= len(PARTS)
    # every compiled path a CPU builds, against the eager forward, and the app's requests with the fastest
    compiled = figures["parts"]["compiled"]
    assert {"flash", "split"} <= {name for name, built in compiled["packages"].items() if "path" in built}
    assert "skipped" in compiled["packages"]["flex"]  # Inductor's CPU FlexAttention: see benchmarks/gpu/compiled.py
    assert {"graphs_split", "graphs_fused", "graphs_flash", "graphs_fused_step", "compiled_flash",
            "compiled_split"} <= set(compiled["paths"])
    assert all(path["within_tolerance"] and path["same_tokens"] for path in compiled["paths"].values())
    assert compiled["requests"]["same_tokens"] and compiled["floor"]["floor_ms"] > 0
    # the fused step: the same tokens as the eager forward, within tolerance, and its operations counted (the
    # issue's goal is at most 25 a layer; the model's own layers ran about 65 in bf16)
    decoding = figures["parts"]["decoding"]
    assert decoding["same_tokens"] and decoding["fused"]["within_tolerance"]
    assert decoding["operations_per_layer"]["fused"] <= 25 < decoding["operations_per_layer"]["eager"]
    assert figures["operations_per_layer"] == decoding["operations_per_layer"]
    # the cold call: the weights packed into a file, a fresh process given the model without them, reading them
    # through the double buffers (unpinned on a CPU), warmed up on the first two micro-batches (1 and 4 segments
    # here), each part timed, the same answer
    cold = figures["parts"]["cold_call"]
    assert cold["same_tokens"] and cold["first_request"]["tokens"] == 8
    assert cold["cold_call_s"] >= cold["first_request"]["total_s"] + cold["warm_up_s"] > 0
    read = cold["weights_read"]
    assert read["gb"] == cold["pack_gb"] > 0 and read["pinned"] is False and read["buffer_mb"] == 128
    assert isinstance(read["direct_io"], bool) and cold["pack_file_system"]
    assert cold["warm_up"]["segments"] == 5 and cold["warm_up"]["request_s"] > 0
    assert all(figures["parts"]["mfu"][f"{part}_tflop"] > 0 for part in ("vision", "compressor", "prefill"))
    # the loader variants, each in a process of its own, and the compiled part loading its packages as chosen
    loader = figures["parts"]["loader"]
    assert loader["passed"] == ["plain", "once"] and loader["chosen"] == figures["loader_chosen"] == "once"
    assert all(v["wrong_cache_refused"] and v["relative_difference"] <= 1e-4 for v in loader["variants"].values())
    assert compiled["variant"]["loader"] == "once"
    # before them, the diagnosis: a one-layer package built (with $CXX; here it is the system's g++, so built once),
    # its library read, and each way of loading it tried in a process of its own; here every way loads
    diagnosis = loader["diagnosis"]
    assert diagnosis["builds"]["default"]["ok"] and diagnosis["builds"]["system"]["ok"]
    assert set(diagnosis["tests"]) == set(TESTS) and all(test["ok"] for test in diagnosis["tests"].values())
    assert diagnosis["libraries"][0]["stack"] in ("RW", "RWE") and diagnosis["environment"]["torch"]
    assert figures["loader_cause"] == diagnosis["cause"] and figures["loader_remedy"] == diagnosis["remedy"] == "none"
    assert figures["weights_read_gb_s"] > 0
    # int8 weights: the decoder's logits against the same model before rounding, and the hour answered with them
    int8 = figures["parts"]["int8"]
    assert int8["saved_gb"] > 0 and int8["within_tolerance"] and int8["hour"]["tokens"] == 8
    assert 0 < int8["logits_max_relative"] == figures["int8_logits_max_relative"]


def planted(fault: str, out, only: str) -> tuple[int, dict]:
    """The dry run with `fault` planted, in a process of its own (tests/aoti_process.py says why), through the
    parts in `only` (and those every part needs)."""
    done = subprocess.run([sys.executable, "-m", "tests.aoti_process", "fault", fault, str(out),
                           "--only", only], cwd=ROOT, capture_output=True, text=True, timeout=900)
    return done.returncode, json.loads((out / "gpu_check.json").read_text())


@pytest.mark.parametrize("broken", ["vision", "decoding"])
def test_a_broken_part_fails_the_check(tmp_path, broken):
    """A vision tower that raises fails every part that compresses; a decoding step that attends wrongly is caught
    by the graphed path's comparison with the eager forward, and no loader variant passes with it, so the compiled
    part stops before it times anything."""
    code, figures = planted(broken, tmp_path, "hour" if broken == "vision" else "decoding,compiled")
    assert code == 1
    if broken == "vision":
        assert "vision tower broken on purpose" in figures["errors"]["hour"]
        assert figures["hour_seconds"] is None
    else:
        assert any("graphed decoding" in line for line in figures["failed"])
        assert "no way of loading the compiled layer step ran (loader part)" in figures["failed"]
        assert figures["fastest_compiled"] is None and "compiled" in figures["errors"]


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
    passed = re.findall(r"(\d+)/(\d+) (float32|bf16)", figures["conformance"])
    assert [dtype for *_, dtype in passed] == ["float32", "bf16"] and all(a == b for a, b, _ in passed)


def runs() -> list[dict]:
    return [json.loads(path.read_text()) for path in FITTED]


def test_the_space_reserves_what_the_recorded_figures_give():
    """demo.device.COST is GpuCost.fitted on the committed GPU figures of both cards: re-running the check and
    committing its JSON without refitting fails here."""
    assert GpuCost.fitted(runs()) == COST


def test_the_fit_follows_the_figures():
    figures = runs()
    figures[1]["parts"]["hour"]["timings"]["per_token"] *= 2
    assert GpuCost.fitted(figures).token > COST.token
    figures = runs()
    figures[0]["parts"]["hour"]["timings"]["prefill"] *= 2  # the slower card's compute sets the reservation
    assert GpuCost.fitted(figures).answer > COST.answer


def test_the_start_is_the_larger_cold_call_excess_rounded_up():
    """The H100's cold call was 5.14 s over its warm request, the H200's 4.62 s: the start is 5.2 s. An H200 excess
    of 6.01 s would make it 6.1 s; without a cold call on the H200, the H100's alone gives 5.2 s again."""
    figures = runs()
    assert [run["parts"]["cold_call"]["cold_minus_warm_s"] for run in figures] == [5.1393, 4.6192]
    assert GpuCost.fitted(figures).start == 5.2
    figures[1]["parts"]["cold_call"]["cold_minus_warm_s"] = 6.01
    assert GpuCost.fitted(figures).start == 6.1
    del figures[1]["parts"]["cold_call"]
    assert GpuCost.fitted(figures).start == 5.2


def test_the_token_is_worked_out_by_hand():
    """Bytes 8.045 + 1.211 GB; efficiency the lower of 3016.8/3350 (H100) and 4256.2/4800 (H200), 0.887; fixed
    9.29 - 3.116 = 6.174 ms and 8.73 - 2.175 = 6.555 ms; on the half card 9.256e9 / (0.896e12 x 0.887) = 11.646 ms
    of bytes plus their mean 6.364 ms is 18.01 ms, 22.5 ms with the margin."""
    fit = StepFit.fitted(runs())
    assert fit.efficiency == 0.887 and fit.fixed_s == (0.00617, 0.00656)
    assert fit.seconds(ZEROGPU_HALF_RTX_PRO_6000[1])[1] == pytest.approx(0.01801, abs=2e-5)
    assert COST.token == 0.0225


def test_figures_written_before_the_rename_still_fit():
    """A GPU check's JSON from before `phases`, `phase_s` and `stages` became `parts`, `part_s` and `timings`."""
    old = [json.loads(json.dumps(run).replace('"parts"', '"phases"').replace('"part_s"', '"phase_s"')
                      .replace('"timings"', '"stages"')) for run in runs()]
    assert "phases" in old[0] and "stages" in old[0]["phases"]["hour"]
    assert GpuCost.fitted(old) == COST and StepFit.fitted(old) == StepFit.fitted(runs())


def step_by_hand() -> tuple[float, float, list[float]]:
    """The step model worked from the JSONs as StepFit says it is made (not by it): the bytes a step reads (weights
    and cache, from the run that measured the compiled floor), the lowest measured over data-sheet bandwidth, and
    each card's measured step time."""
    floor = next(run["parts"]["compiled"]["floor"] for run in runs() if run["parts"].get("compiled", {}).get("floor"))
    read = 1e9 * (floor["decoder_weights_gb"] + floor["kv_cache_gb"])
    efficiency = min(run["parts"]["environment"]["memory_gb_s"] / 1e3 / DATA_SHEETS[run["device"]][1]
                     for run in runs() if run["parts"]["environment"].get("memory_gb_s"))
    return read, efficiency, [run["parts"]["hour"]["timings"]["per_token"] for run in runs()]


def test_the_step_fit_explains_both_cards():
    """Fixed cost plus bytes over bandwidth gives each card's measured step back, the fixed part is most of a
    Hopper step (the H200's 1.43x bandwidth made it 1.07x faster), and positive."""
    read, efficiency, measured = step_by_hand()
    fit = StepFit.fitted(runs())
    assert fit.bytes == read and fit.efficiency == round(efficiency, 3)
    for run, fixed, seconds in zip(runs(), fit.fixed_s, measured):
        streamed = read / (DATA_SHEETS[run["device"]][1] * 1e12 * efficiency)
        assert abs(fixed + streamed - seconds) < 1e-5 and 0.5 * seconds < fixed < seconds


def test_a_reservation_covers_the_slowest_token_the_fit_allows():
    """The guarantee: a reservation never cuts an answer short, so each token reserves at least the high end of
    the half card's range (the fixed cost at its most uncertain), and a full answer's reservation covers its use at
    that high end for every length and video."""
    read, efficiency, measured = step_by_hand()
    fixed = [seconds - read / (DATA_SHEETS[run["device"]][1] * 1e12 * efficiency)
             for run, seconds in zip(runs(), measured)]
    # the half card's high end: its bytes at the fitted efficiency, the highest fixed cost at its most uncertain
    high = read / (ZEROGPU_HALF_RTX_PRO_6000[1] * 1e12 * efficiency) + max(fixed) * (1 + FIXED_UNCERTAINTY)
    low, central, fitted_high = StepFit.fitted(runs()).seconds(ZEROGPU_HALF_RTX_PRO_6000[1])
    assert fitted_high == pytest.approx(high, rel=1e-3) and low < central < fitted_high <= COST.token
    for segments in (0, 8, 128):
        for tokens in (1, 64, 512, 2048):
            slowest = COST.start + (COST.segment * segments + COST.answer) / MARGIN + high * tokens
            assert COST.reserved(segments, 1, tokens) >= min(COST.cap, slowest)


def test_a_part_left_out_does_not_run(tmp_path):
    from benchmarks.gpu.record import DRY_RUN, Check

    check = Check(DRY_RUN, tmp_path, only=frozenset({"mfu"}))
    ran = []
    assert check.run("conformance", lambda: ran.append("conformance") or {}) is None
    assert check.run("mfu", lambda: ran.append("mfu") or {"x": 1}) == {"x": 1}
    assert check.run("hour", lambda: ran.append("hour") or {}) == {}  # every part needs it
    assert ran == ["mfu", "hour"]
    saved = json.loads((tmp_path / "gpu_check.json").read_text())
    assert saved["errors"] == {"conformance": "skipped: not in --only"}
    assert saved["parts"]["mfu"]["x"] == 1
