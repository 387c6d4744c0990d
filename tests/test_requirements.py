"""What installs where: the Space's torch and Python are on ZeroGPU's lists, while `make` pins the CPU build."""

from __future__ import annotations

import re

from packaging.requirements import Requirement
from packaging.version import Version

from demo.device import ZEROGPU
from tests.conftest import ROOT

# ZeroGPU installs only the torch versions on its list, on its Pythons: demo/device.py's ZEROGPU, as read from the hub.
ZEROGPU_TORCH = ZEROGPU.torch
ZEROGPU_PYTHONS = ZEROGPU.python


def requirements(name: str) -> dict[str, Requirement]:
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    found = [Requirement(line) for line in (line.split("#")[0].strip() for line in lines) if line]
    return {requirement.name: requirement for requirement in found}


def test_the_space_can_install_a_zerogpu_torch():
    torch = requirements("requirements.txt")["torch"]
    admitted = [version for version in ZEROGPU_TORCH if torch.specifier.contains(version)]
    assert admitted, f"{torch} admits none of ZeroGPU's torch versions {ZEROGPU_TORCH}"
    assert admitted[0] == "2.8.0"  # the oldest: what `make matrix` resolves the floors with


def test_make_installs_the_cpu_build_within_that_range():
    pinned = requirements("constraints-cpu.txt")["torch"]
    (version,) = [Version(spec.version) for spec in pinned.specifier]
    assert requirements("requirements.txt")["torch"].specifier.contains(version)
    assert "-c constraints-cpu.txt" in (ROOT / "Makefile").read_text(encoding="utf-8")


def test_the_space_runs_a_zerogpu_python():
    front_matter = (ROOT / "README.md").read_text(encoding="utf-8").split("---")[1]
    python = re.search(r'^python_version:\s*"?([\d.]+)"?', front_matter, re.M).group(1)
    assert any(full.startswith(python + ".") or full == python for full in ZEROGPU_PYTHONS), python


def test_the_tests_see_the_spaces_package_the_space_gets():
    pinned = requirements("requirements-dev.txt")["spaces"]
    assert str(pinned.specifier).startswith("==")
    assert requirements("requirements.txt")["spaces"].specifier.contains(str(pinned.specifier)[2:])
