"""The decoder's layer step compiled ahead of time (torch.export, then AOTInductor: `tempo.model.compiled_decoding`)
computes what the eager forward computes, on the embedded Tempo-Tiny, with its weights handed to the package
rather than copied into it; and a package is refused by a model it was not built for.

The package is built and run in a process of its own (tests/aoti_process.py says why): 20-30 s on this project's
2-core CPU beside a training job, most of it the build. The GPU check (benchmarks/gpu) builds every way of
attending on CUDA and times them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict:
    directory = tmp_path_factory.mktemp("compiled")
    done = subprocess.run([sys.executable, "-m", "tests.aoti_process", "tiny", str(directory)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((directory / "tiny.json").read_text())


def test_compiled_steps_match_the_eager_forward_on_the_embedded_model(tiny):
    """Every layer, one package: 24 steps teacher-forced over a 500-position prefill (the cache grows past a
    256-slot piece), float32 summed in another order, as the static steps' own test allows."""
    assert tiny["layers"] == tiny["model_layers"] > 1 and tiny["attention"] == "flash" and tiny["capacity"] == 768
    assert tiny["max_difference"] < 5e-5 and tiny["same_argmax"]


def test_the_package_holds_no_weights(tiny):
    """Weights are handed over at load time: the package is its code (about 1.8 MB), whatever the model."""
    assert tiny["package_bytes"] < 4e6 and tiny["layer_weight_bytes"] > 0


def test_a_package_built_for_another_layer_is_refused(tiny):
    """The fixture decoder's layers are narrower: handing them to Tempo-Tiny's package would read past them."""
    assert tiny["refused"] is not None and "built for another decoder layer" in tiny["refused"]
    assert "hidden_size" in tiny["refused"]
