import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run_conformance(directory, *extra):
    return subprocess.run([sys.executable, "-m", "tempo", "conformance", str(directory), *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)


def test_every_fixture_case_and_ata_vector_conforms(fixtures):
    result = run_conformance(fixtures)
    failed = "\n".join(line for line in result.stdout.splitlines() if line.startswith("FAIL"))
    assert result.returncode == 0, failed + "\n" + result.stdout[-2000:] + result.stderr[-3000:]
    assert "FAIL" not in result.stdout
    assert "ATA vectors: 36 exact, 3 deliberate differences, of 39" in result.stdout
    for case in (fixtures / "cases").iterdir():
        assert re.search(rf"ok\s+{case.name}\s+run:generated_ids", result.stdout)


@pytest.mark.slow
def test_runner_detects_a_wrong_recorded_value(fixture_copy):
    case_file = fixture_copy / "cases" / "shapes_red_circle" / "case.json"
    case = json.loads(case_file.read_text())
    case["generated_text"] += "!"
    case_file.write_text(json.dumps(case))
    vectors_file = fixture_copy / "ata_vectors.json"
    vectors = json.loads(vectors_file.read_text())
    vectors["vectors"][10]["allocations"][0] += 1
    vectors_file.write_text(json.dumps(vectors))
    result = run_conformance(fixture_copy, "--case", "shapes_red_circle")
    assert result.returncode == 1
    assert re.search(r"FAIL\s+shapes_red_circle\s+run:answer", result.stdout)
    assert re.search(rf"FAIL\s+ata:{vectors['vectors'][10]['name']}\s+allocations", result.stdout)
    assert "2 FAILED" in result.stdout


@pytest.mark.slow
def test_a_machine_without_pyav_checks_everything_but_the_pipeline(fixtures, tmp_path):
    # The GPU check's machine has decord and no PyAV: every reader that needs PyAV must step aside, not raise.
    (tmp_path / "av.py").write_text("raise ImportError('PyAV hidden for this test')\n")
    # PYTHONPATH comes before the installed packages, so the stand-in is the `av` found
    result = subprocess.run([sys.executable, "-m", "tempo", "conformance", str(fixtures), "--case",
                             "shapes_red_circle"],
                            cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, PYTHONPATH=str(tmp_path)))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"ok\s+shapes_red_circle\s+run\s+skipped: PyAV is not installed", result.stdout)
    assert re.search(r"ok\s+shapes_red_circle\s+generated_ids\s+exact", result.stdout)
