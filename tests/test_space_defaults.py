"""What the Space reserves and offers by default where GPU time is counted: ZeroGPU's quota as its page gave it
(read on the date `demo.device.ZEROGPU` records), the questions a day that follow from the fitted `GpuCost` (they
follow a refit: nothing here is pinned to today's constants), and the settings table's defaults that depend on where
the model runs (max new tokens on a ZeroGPU Space, the micro-batch on CUDA), the CPU's unchanged."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from demo.device import COST, ZEROGPU, Device, GpuCost
from tempo.config import RunConfig
from tempo.engine.accelerator import micro_batch
from tempo.errors import InputError
from tempo.settings import setting_named, validate, with_settings


def test_the_deploy_guide_states_the_quota_the_space_reserves_under():
    """docs/deploy.md gives visitors the sizes and daily minutes `ZEROGPU` holds: a change to either alone fails."""
    from tests.conftest import ROOT

    guide = " ".join((ROOT / "docs" / "deploy.md").read_text(encoding="utf-8").split())
    minutes = [round(ZEROGPU.daily_seconds(visitor) / 60) for visitor in ("anonymous", "free", "pro")]
    assert (f"The day holds {minutes[0]} minutes for an anonymous visitor, {minutes[1]} for a free account and "
            f"{minutes[2]} for") in guide
    said = {1.0: "counted once", 2.0: "counted twice"}
    for name, _, gb, _ in ZEROGPU.sizes:
        assert f"{gb} GB" in guide and said[ZEROGPU.counted(name)] in guide


def test_a_reservation_never_exceeds_an_anonymous_day():
    # an anonymous day is 2 minutes (the hub's page), counted once on the default size and twice on the whole card
    assert COST.size == "large" and COST.cap == 120.0
    assert COST.reserved(128, 6, 6 * 2048) == 120  # the longest request asks for the whole day, no more
    assert dataclasses.replace(COST, size="xlarge").cap == 60.0


def test_questions_a_day_follow_the_fit():
    """More for each kind of visitor up, fewer on the card counted twice, more with a cheaper token or a smaller
    reservation; none when a question would use more than the most it can reserve."""
    per_visitor = [COST.questions_a_day(visitor) for visitor in ("anonymous", "free", "pro")]
    assert 0 < per_visitor[0] < per_visitor[1] < per_visitor[2]
    assert COST.questions_a_day(max_new_tokens=128) >= COST.questions_a_day(max_new_tokens=512)
    assert dataclasses.replace(COST, size="xlarge").questions_a_day() < COST.questions_a_day()
    assert dataclasses.replace(COST, token=COST.token / 3).questions_a_day() >= COST.questions_a_day()
    assert GpuCost(start=121.0).questions_a_day() == 0
    # each question is charged what it uses, and may start only while the day covers its reservation
    asked = COST.questions_a_day()
    assert 120 - asked * COST.used(128, 1, 64) < COST.reserved(128, 1, 512) <= 120 - (asked - 1) * COST.used(
        128, 1, 64)


def test_the_space_starts_with_shorter_answers():
    """On a ZeroGPU Space the page offers 128 max new tokens (every token reserves GPU time), says it can be raised,
    and keeps the library's range; elsewhere 512."""
    from demo.settings import control

    setting = setting_named("max_new_tokens")
    spec = SimpleNamespace(num_memory_tokens=128, visual_token_budget=8192)
    assert setting.default(spec) == setting.default(spec, "cpu") == 512
    assert setting.default(spec, "zero_gpu") == 128
    assert Device(lambda job: iter(()), remote=True).place == "zero_gpu"
    assert Device(lambda job: iter(()), remote=False).place is None
    on_space = control(setting, spec, "zero_gpu")
    assert on_space.value == 128 and on_space.maximum == 2048 and "raise it" in on_space.info
    assert control(setting, spec).value == 512 and "raise it" not in control(setting, spec).info
    assert "default 512; 128 on a ZeroGPU Space" in setting.describe()


def test_the_micro_batch_depends_on_the_device_and_the_cpu_keeps_four():
    """Declared once in the settings table: 4 on a CPU (as before), 16 on CUDA; a chosen one wins; None is valid
    (the device's) and zero is not."""
    setting = setting_named("micro_batch")
    assert RunConfig().micro_batch is None
    on = {kind: micro_batch(SimpleNamespace(device=SimpleNamespace(type=kind)), RunConfig().micro_batch)
          for kind in ("cpu", "cuda", "mps")}
    assert on == {"cpu": 4, "cuda": 16, "mps": 4}
    chosen = with_settings(RunConfig(), {"micro_batch": 2})
    assert micro_batch(SimpleNamespace(device=SimpleNamespace(type="cuda")), chosen.micro_batch) == 2
    validate(RunConfig())
    assert setting.check(None) is None
    with pytest.raises(InputError, match="Micro-batch 0 is less than minimum 1"):
        with_settings(RunConfig(), {"micro_batch": 0})
    assert "default 4 on a CPU, 16 on CUDA" in setting.describe()


def test_requirements_admit_every_torch_zerogpu_runs():
    from packaging.requirements import Requirement

    from tests.conftest import ROOT

    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    torch = next(Requirement(line) for line in lines if line.startswith("torch"))
    assert [version for version in ZEROGPU.torch if version not in torch.specifier] == []


def test_what_ten_questions_would_take_is_the_edge_of_ten():
    """`needed`'s answers are edges: at the value found the day starts 10 questions, 0.2 ms above it fewer; a part
    that cannot reach 10 even at zero is None."""
    from benchmarks.gpu_reservations import GOAL, largest

    def day(cost: GpuCost) -> int:
        return cost.questions_a_day(max_new_tokens=512)

    segment = largest(COST, "segment")
    assert segment is not None and day(dataclasses.replace(COST, segment=segment)) >= GOAL
    assert day(dataclasses.replace(COST, segment=segment + 2e-4)) < GOAL
    assert largest(COST, "token") is None and day(dataclasses.replace(COST, token=0.0)) < GOAL
    assert largest(COST, "segment", goal=day(COST)) == COST.segment  # a goal already met asks for nothing
