"""Weight-only int8 (`tempo.model.int8`): each weight within half a rounding step of its own, and the fixture model
loaded with int8 weights answers within the tolerance bf16 is held to (`BF16_RTOL`), with the same answer.

Why BF16_RTOL: rounding a weight to 255 levels of its row's largest magnitude is a relative error of at most 1/254
per weight, the same order as bf16's 2^-9, and it accumulates layer by layer the same way. On the conformance set in
float32 (benchmarks/int8_deviation.py, benchmarks/results/int8-cpu.json) int8 weights put the decoder's logits at
most 4.5e-2 (relative, in norm) from full precision over 72 teacher-forced steps, with 1 top token flipped; a wrong
scale or a transposed channel is off by order 1."""

from __future__ import annotations

import io
import os

import pytest
import torch
from torch import nn

from tempo.conformance.report import BF16_RTOL
from tempo.model.int8 import LEVELS, Int8Linear, quantize, quantize_model


def test_each_weight_is_within_half_a_step_of_its_own():
    torch.manual_seed(0)
    linear = nn.Linear(48, 32)
    linear.weight.data[3] *= 50  # one loud row: its step is its own, not the others'
    rounded = Int8Linear.from_linear(linear)
    widened = rounded.weight.float() * rounded.scale[:, None]  # [out, in]
    step = linear.weight.abs().amax(dim=1, keepdim=True) / LEVELS  # [out, 1]
    assert rounded.weight.dtype == torch.int8
    assert ((widened - linear.weight).abs() <= step / 2 + 1e-7).all()
    x = torch.randn(5, 48)
    assert torch.allclose(rounded(x), x @ widened.T + linear.bias, atol=1e-5)


def test_quantize_replaces_the_linear_layers_it_is_given_and_says_what_it_saved():
    model = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Sequential(nn.Linear(16, 8)), nn.Linear(8, 4))
    saved = quantize(model, skip=("3",))
    assert [type(m).__name__ for m in (model[0], model[2][0], model[3])] == ["Int8Linear", "Int8Linear", "Linear"]
    assert saved == (16 * 16 + 16 * 8) * 3 - (16 + 8) * 4  # float32 to int8, less a float32 scale per row


def test_a_row_s_step_is_its_own_however_small():
    """Rows whose largest magnitude is 5e-12 and 1.27e-10: each weight within half of its own row's step (the
    largest over 127), relative, not absolute; an all-zero row stays zero."""
    linear = nn.Linear(4, 3, bias=False)
    linear.weight.data = torch.tensor([[5e-12, -2.5e-12, 1e-12, 0.0], [1.27e-10, 1e-10, -0.5e-10, 3e-11],
                                       [0.0, 0.0, 0.0, 0.0]])
    rounded = Int8Linear.from_linear(linear)
    widened = rounded.weight.float() * rounded.scale[:, None]
    step = torch.tensor([5e-12, 1.27e-10, 1.0])[:, None] / 127
    assert ((widened - linear.weight).abs() <= step / 2 * (1 + 1e-5)).all()
    assert rounded.weight[0].tolist() == [127, -64, 25, 0]  # 5e-12 / (5e-12 / 127) and its fractions, rounded
    assert rounded.weight[2].tolist() == [0, 0, 0, 0]
    assert rounded(torch.ones(1, 4))[0, 2].item() == 0.0


def test_int8_keeps_the_model_s_dtype_and_says_what_it_is():
    linear = nn.Linear(8, 2).to(torch.bfloat16)
    rounded = Int8Linear.from_linear(linear)
    assert (rounded.weight.dtype, rounded.scale.dtype, rounded.bias.dtype) == (torch.int8, torch.bfloat16,
                                                                               torch.bfloat16)
    out = rounded(torch.ones(3, 8, dtype=torch.bfloat16))
    assert out.dtype == torch.bfloat16 and out.shape == (3, 2)
    assert not rounded.bias.requires_grad
    assert repr(rounded) == "Int8Linear(in_features=8, out_features=2, int8 per-channel)"
    # without a bias: x @ (q * scale).T, here one row of 1s of scale 3 / 127 (its largest, 3, is 127 steps)
    plain = Int8Linear.from_linear(nn.Linear(2, 1, bias=False))
    plain.weight.fill_(127)
    plain.scale.fill_(3 / 127)
    assert plain.bias is None and torch.allclose(plain(torch.tensor([[1.0, 2.0]])), torch.tensor([[9.0]]))


def test_quantize_skips_by_qualified_name_and_quantize_model_sums_its_parts():
    model = nn.Module()
    model.a = nn.Sequential(nn.Linear(16, 16), nn.Sequential(nn.Linear(16, 8)))
    model.b = nn.Linear(8, 4)
    model.c = nn.Sequential(nn.Linear(4, 4))
    # in model.a, "1.0" is the nested layer's name: skipped, so only a.0 (16 x 16) is rounded
    assert quantize(model.a, skip=("1.0",)) == 16 * 16 * 3 - 16 * 4
    assert type(model.a[1][0]) is nn.Linear
    # parts b and c: the layers under them are rounded, b (a layer itself) has none; c's 4 x 4 float32 weights to
    # int8, less a float32 scale per row
    assert quantize_model(model, parts=("b", "c")) == 4 * 4 * 3 - 4 * 4
    assert type(model.b) is nn.Linear and isinstance(model.c[0], Int8Linear)
    assert quantize(nn.Linear(2, 2)) == 0  # a bare layer has no parent to replace it in


@pytest.fixture(scope="module")
def logits(tmp_path_factory):
    from benchmarks.int8_deviation import case_logits, load
    from tempo.conformance.fixtures import Case
    from tempo.model import from_pretrained
    from tests.conftest import ROOT

    os.environ.setdefault("TEMPO_CACHE", str(tmp_path_factory.mktemp("cache")))
    case = Case.read(str(ROOT / "tests" / "fixtures" / "conformance"), "shapes_red_circle")
    fixtures = ROOT / "tests" / "fixtures" / "conformance"
    rounded = from_pretrained(fixtures / "tempo", base=fixtures / "base" / "tiny-qwen3-vl", device="cpu", int8=True)
    return case_logits(load(torch.float32), case), case_logits(rounded, case), rounded


def test_int8_weights_answer_within_the_bf16_tolerance(logits):
    full, rounded, _ = logits
    relative = (rounded - full).norm(dim=-1) / full.norm(dim=-1)  # [steps]
    assert full.shape[0] == 8 and relative.max() <= BF16_RTOL
    assert torch.equal(full.argmax(-1), rounded.argmax(-1))


def test_the_lm_head_keeps_its_weights(logits):
    """The decoder's LM head is its embedding table (tied): rounding it would copy, not save."""
    model = logits[2]
    assert model.int8 and isinstance(model.compressor.vlm.visual.blocks[0].mlp.linear_fc1, Int8Linear)
    assert isinstance(model.decoder.lm.model.layers[0].mlp.up_proj, Int8Linear)
    assert type(model.decoder.lm.lm_head) is nn.Linear


def test_the_ray_engine_loads_each_actor_with_int8_when_asked(tmp_path, monkeypatch):
    """`tempo batch --engine ray --int8` hands the choice to the actors, which load their model with it."""
    from tempo import cli
    from tempo.batch import Summary
    from tempo.config import RunConfig
    from tempo.integrations import ray_batch

    handed: list[ray_batch.Loading] = []
    monkeypatch.setattr(ray_batch, "run_batch", lambda jobs, output, base, err, loading, cluster, reports:
                        handed.append(loading) or Summary())
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text('{"id": "a", "video": "v.mp4", "question": "What colour is the star?"}\n', encoding="utf-8")
    assert cli.main(["batch", "--engine", "ray", "--int8", "--input", str(jobs), "--output", str(tmp_path / "o")],
                    err=io.StringIO()) == 0
    assert [loading.int8 for loading in handed] == [True]
    loaded: list[bool] = []
    monkeypatch.setattr(ray_batch, "from_pretrained", lambda *args, **kwargs: loaded.append(kwargs["int8"]))
    ray_batch.Answerer(handed[0], RunConfig(), None)
    assert loaded == [True]


@pytest.mark.parametrize("shape", [(1, 1, 48), (3, 48), (2, 4, 48)])
def test_the_packed_kernel_computes_what_widening_does(monkeypatch, shape):
    """A decoding step's rows multiply the int8 matrix in PyTorch's weight-only kernel on a GPU; forced here on the
    CPU (which has the kernel too), it gives the widened product within bf16's rounding, in every input shape."""
    from tempo.model import int8

    torch.manual_seed(0)
    layer = Int8Linear.from_linear(torch.nn.Linear(48, 24, bias=True).to(torch.bfloat16))
    x = torch.randn(shape, dtype=torch.bfloat16)
    widened = layer(x)
    monkeypatch.setattr(int8, "uses_packed_kernel", lambda x, in_features: True)
    packed = layer(x)
    assert packed.shape == widened.shape == (*shape[:-1], 24)
    # bf16 outputs of magnitude ~1: a product rounded once instead of twice moves them by a step or two of 2^-7
    assert ((packed.float() - widened.float()).norm() / widened.float().norm()).item() < 1e-2
