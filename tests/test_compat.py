"""The code keeps to Python 3.10 (what Hugging Face ZeroGPU runs): no 3.11+ syntax or standard library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SOURCES = ["app.py", "demo", "tempo", "tests", "benchmarks", "examples"]


def vermin(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "vermin"), "-t=3.10-", "--violations",
                           "--eval-annotations", "--no-tips", *paths], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_nothing_needs_more_than_python_3_10():
    result = vermin(*SOURCES)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_the_check_catches_3_11_code(tmp_path):
    newer = tmp_path / "newer.py"
    newer.write_text("import tomllib\n\ntry:\n    pass\nexcept* ValueError:\n    pass\n")
    result = vermin(str(newer))
    assert result.returncode != 0 and "tomllib" in result.stdout
