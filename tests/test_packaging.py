"""What `pip install .` gives: a wheel with every module of tempo/ and the embedded model, importable anywhere."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (building in place would leave build/ in the checkout)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("tempo", "assets"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("dist")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                             "--quiet", "-w", str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    (built,) = out.glob("tempo-*.whl")
    return built


def test_the_wheel_holds_every_module_and_the_embedded_model(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tempo").rglob("*.py")}
    assert modules and not modules - names, f"missing from the wheel: {sorted(modules - names)}"
    model = {p.relative_to(ROOT / "assets").as_posix() for p in (ROOT / "assets" / "tempo-tiny").rglob("*")
             if p.is_file()}
    data = {n.split("/share/tempo/", 1)[1] for n in names if "/share/tempo/" in n}
    assert model and not model - data, f"model files missing from the wheel: {sorted(model - data)}"


def test_the_wheel_installs_the_tempo_command(wheel):
    archive = zipfile.ZipFile(wheel)
    (entry_points,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
    scripts = archive.read(entry_points).decode().split("[console_scripts]\n", 1)[1].split("\n\n")[0]
    assert scripts.strip() == "tempo = tempo.cli:main"


def test_every_module_imports_from_the_unpacked_wheel(wheel, tmp_path):
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    modules = sorted(n[:-3].replace("/", ".").removesuffix(".__init__")  # __main__ modules would run their CLI
                     for n in zipfile.ZipFile(wheel).namelist()
                     if n.startswith("tempo/") and n.endswith(".py") and not n.endswith("__main__.py"))
    code = ("import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\n"
            "import tempo; print(tempo.__file__)")
    result = subprocess.run([sys.executable, "-c", code, *modules], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().startswith(str(target))  # not the checkout's copy
