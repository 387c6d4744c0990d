"""The fused RMSNorm (`tempo.model.fused_norms`, what a GPU runs in the compressor and the decoder) keeps the
conformance fixtures' recorded outputs, and the checkpoint's names."""

from __future__ import annotations

import copy

import pytest
import torch

from tempo.conformance.checks import check_case
from tempo.conformance.report import Report
from tempo.model.fused_norms import FusedRMSNorm, fuse_norms

CASES = ("tiny_3frames_equal",)


@pytest.fixture(scope="module")
def fused_model(fixture_model):
    model = copy.deepcopy(fixture_model)
    assert fuse_norms(model) == 18  # 4 a layer over the compressor's 2 and the decoder's 2 layers, and each final one
    return model


def test_fused_norms_conform_to_the_recorded_outputs(fixtures, fused_model, capsys):
    """Compressor memories and relevance, allocation, decoder logits and tokens, within float32's tolerances."""
    report = Report()
    for case in CASES:
        check_case(str(fixtures), case, fused_model, report)
    assert report.failures == 0, "\n".join(line for line in report.lines if line.startswith("FAIL"))
    assert len(report.lines) >= 8


def test_a_wrong_epsilon_is_caught(fixtures, fused_model):
    """The check can fail: norms with eps 1e-2 instead of the config's 1e-6 leave the recorded outputs."""
    model = copy.deepcopy(fused_model)
    for module in model.modules():
        if isinstance(module, FusedRMSNorm):
            module.variance_epsilon = 1e-2
    report = Report()
    check_case(str(fixtures), CASES[0], model, report)
    assert report.failures > 0


def test_the_weights_keep_their_names_and_tensors(fixture_model, fused_model):
    before = dict(fixture_model.named_parameters())
    after = dict(fused_model.named_parameters())
    assert before.keys() == after.keys()
    assert all(torch.equal(before[name], after[name]) for name in before)
