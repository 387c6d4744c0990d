"""The GPU cost model (`demo.device`) on made-up constants and figures, each expected value worked out by hand here:
the reservation rounds up, is capped at an anonymous day, and a refit of the Space's own constants changes none of
these numbers."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

import demo.device as device
from demo.device import FIXED_UNCERTAINTY, MARGIN, ZEROGPU, GpuCost, StepFit, ZeroGpu, current_keys, gpu_seconds

# start 5 s, 0.1 s a segment, 1.5 s an answer, 0.02 s a token
MADE_UP = GpuCost(start=5.0, segment=0.1, answer=1.5, token=0.02)


def test_the_quota_as_the_hub_gave_it():
    # docs/hub/spaces-zerogpu: 2, 5 and 40 minutes a day; the whole card counts twice, the default half once
    assert [ZEROGPU.daily_seconds(v) for v in ("anonymous", "free", "pro")] == [120.0, 300.0, 2400.0]
    assert (ZEROGPU.counted("large"), ZEROGPU.counted("xlarge")) == (1.0, 2.0)
    other = ZeroGpu(sizes=(("s", "", 8, 3.0),), daily_minutes=(("anonymous", 1.5),))
    assert (other.counted("s"), other.daily_seconds("anonymous")) == (3.0, 90.0)


def test_a_reservation_rounds_up_to_the_second():
    # 5 + 0.1 * 10 + 1.5 + 0.02 * 90 = 9.3 s: 10, never 9 (the nearest second would under-reserve)
    assert MADE_UP.reserved(10, 1, 90) == 10
    # 5 + 0.1 * 3 + 1.5 * 2 + 0.02 * 1 = 8.32 s: 9
    assert MADE_UP.reserved(3, 2, 1) == 9
    assert isinstance(MADE_UP.reserved(10, 1, 90), int)


def test_a_reservation_stops_at_a_day_at_its_size():
    # an anonymous day is 120 s; on the whole card (counted twice) 60 s
    assert MADE_UP.cap == 120.0
    assert GpuCost(size="xlarge").cap == 60.0
    assert MADE_UP.reserved(1000, 10, 10_000) == 120  # 5 + 100 + 15 + 200 = 320 s asked
    assert GpuCost(start=5.0, segment=0.1, answer=1.5, token=0.02, size="xlarge").reserved(1000, 10, 10_000) == 60


def test_use_is_the_fit_without_its_margin():
    # the start is measured, the rest carries the margin: 5 + (0.1 * 10 + 1.5 * 2 + 0.02 * 100) / MARGIN
    assert MADE_UP.used(10, 2, 100) == pytest.approx(5.0 + 6.0 / MARGIN)
    assert MADE_UP.used(0, 0, 0) == 5.0


def test_questions_a_day_by_hand():
    """Start 10 s and 0.1 s a token: a 512-token reservation is ceil(10 + 51.2) = 62 s, and a 64-token answer uses
    10 + 6.4 / MARGIN. A question starts while what is left covers 62 s."""
    cost = GpuCost(start=10.0, segment=0.0, answer=0.0, token=0.1)
    used = 10.0 + 6.4 / MARGIN
    for visitor, day in (("anonymous", 120.0), ("free", 300.0), ("pro", 2400.0)):
        # the n-th question starts when day - (n - 1) * used >= 62
        assert cost.questions_a_day(visitor) == math.floor((day - 62) / used) + 1, visitor
    # counted twice: the reservation is capped at 60 s (counted 120, the whole day): one question, after which
    # 120 - 2 * used is left, short of 120
    assert GpuCost(start=10.0, segment=0.0, answer=0.0, token=0.1, size="xlarge").questions_a_day() == 1
    # a 64-token answer reserving 10 tokens: it would use more than it reserved, so none
    assert cost.questions_a_day(max_new_tokens=10) == 0
    # the same with 5 s an answer: ceil(10 + 5 + 1) = 16 s reserved for 10 + (5 + 6.4) / 1.25 = 19.12 s of use
    assert GpuCost(start=10.0, segment=0.0, answer=5.0, token=0.1).questions_a_day(max_new_tokens=10) == 0
    # the segments count: 128 at 0.1 s add 12.8 s to the reservation (ceil(74.0) = 74) and 12.8 / MARGIN to use
    with_video = GpuCost(start=10.0, segment=0.1, answer=0.0, token=0.1)
    assert with_video.questions_a_day() == math.floor((120 - 74) / (used + 12.8 / MARGIN)) + 1


def test_questions_a_day_reserve_one_answer_of_an_hour_s_video():
    """The defaults are an hour (128 segments), one answer of 64 tokens under a 512-token reservation. Start 5 s,
    0.1 s a segment, 1.5 s an answer, 0.1 s a token: the reservation is ceil(5 + 12.8 + 1.5 + 51.2) = 71 s and a
    question uses 5 + (12.8 + 1.5 + 6.4) / 1.25 = 21.56 s; a pro day, 2400 s: 1 + floor(2329 / 21.56) = 109."""
    assert MARGIN == 1.25
    assert GpuCost(start=5.0, segment=0.1, answer=1.5, token=0.1).questions_a_day("pro") == 109
    # start 8.5 s: ceil(74.0) = 74 s reserved, 25.06 s used; a free day: 1 + floor(226 / 25.06) = 10
    assert GpuCost(start=8.5, segment=0.1, answer=1.5, token=0.1).questions_a_day("free") == 10
    # one answer, not two, is held to its reservation: 8 s an answer, 100 tokens of 0.1 s, start 1 s: 19 s reserved,
    # 1 + 18 / 1.25 = 15.4 s used (two answers would use 21.8, more than reserved); 1 + floor(101 / 15.4) = 7
    assert GpuCost(start=1.0, segment=0.0, answer=8.0, token=0.1).questions_a_day(answer_tokens=100,
                                                                                  max_new_tokens=100) == 7
    # a question that uses exactly what it reserves still runs: 10 s each, 12 in 120 s
    assert GpuCost(start=10.0, segment=0.0, answer=0.0, token=0.0).questions_a_day() == 12


def test_gpu_seconds_reserves_each_answer_s_tokens(monkeypatch):
    monkeypatch.setattr(device, "COST", MADE_UP)
    answers = [SimpleNamespace(generation=SimpleNamespace(max_new_tokens=n)) for n in (100, 90)]
    # 5 + 0.1 * 10 + 1.5 * 2 + 0.02 * 190 = 12.8 s: 13
    assert gpu_seconds(SimpleNamespace(to_compress=10, answer_configs=answers)) == 13
    # a cached compression: 5 + 1.5 + 0.02 * 100 = 8.5 s: 9
    assert gpu_seconds(SimpleNamespace(to_compress=0, answer_configs=answers[:1])) == 9


def figures(device_name: str, per_token: float, memory_gb_s: float | None, floor: bool, vision: float = 1.0,
            old_keys: bool = False, cold_excess: float | None = None) -> dict:
    """A GPU check's JSON, cut to what the fit reads (`cold_excess`: its cold call's seconds over the warm one)."""
    parts = {"environment": {"memory_gb_s": memory_gb_s} if memory_gb_s else {},
             "hour": {"segments": 10, "timings": {"per_token": per_token, "vision": vision, "compress": 0.5,
                                                  "allocate": 0.1, "prefill": 0.4}}}
    if cold_excess is not None:
        parts["cold_call"] = {"cold_minus_warm_s": cold_excess}
    if floor:
        parts["compiled"] = {"floor": {"decoder_weights_gb": 1.0, "kv_cache_gb": 0.2}}
    run = {"device": device_name, "parts": parts}
    return {"device": device_name, "phases": {**parts, "hour": {"segments": 10, "stages": parts["hour"]["timings"]}}} \
        if old_keys else run


RUNS = [figures("NVIDIA H200", 0.0015, 2400.0, True, cold_excess=4.62),
        figures("NVIDIA H100 80GB HBM3", 0.002, 2010.0, False, 2.0, cold_excess=5.14)]


def test_the_step_fit_by_hand():
    """1.2 GB a step (1.0 of weights, 0.2 of cache, from the run that has the floor); efficiency the lower of
    2.4 / 4.8 and 2.01 / 3.35 (0.5 and 0.6); the H200's fixed cost 0.0015 - 1.2e9 / (4.8e12 * 0.5) = 0.001, the
    H100's 0.002 - 1.2e9 / (3.35e12 * 0.5) = 0.00128358..., kept to 5 decimals."""
    fit = StepFit.fitted(RUNS)
    assert (fit.fixed_s, fit.bytes, fit.efficiency) == (pytest.approx((0.001, 0.00128)), 1.2e9, 0.5)
    # at 1 TB/s: 1.2e9 / (1e12 * 0.5) = 0.0024 s streamed; the fixed costs' mean 0.00114 moved either way, and the
    # highest of them (0.00128) at its most uncertain for the high end
    low, central, high = fit.seconds(1.0)
    assert central == 0.0024 + (0.001 + 0.00128) / 2  # exactly: 1.2e9 / 5e11 is 0.0024 in floats too
    assert low == pytest.approx(0.0024 + 0.00114 * (1 - FIXED_UNCERTAINTY))
    assert central == pytest.approx(0.0024 + 0.00114)
    assert high == pytest.approx(0.0024 + 0.00128 * (1 + FIXED_UNCERTAINTY))


def test_the_step_fit_rounds_as_it_says():
    runs = [figures("NVIDIA H200", 0.00150123456, 2345.6, True)]
    fit = StepFit.fitted(runs)
    # efficiency 2.3456 / 4.8 = 0.48866..., kept to 3 decimals; the fixed cost, from the efficiency before rounding,
    # 0.00150123456 - 1.2e9 / 2.3456e12 = 0.00098964..., kept to 5
    assert fit.efficiency == 0.489
    assert fit.fixed_s == (0.00099,)


def test_the_cost_fit_by_hand():
    """Compute-bound parts carried from each card by bf16 throughput (989 TFLOP/s both) to the half card's, with
    the margin, the slower card's kept: the H100 run's segment (2.0 + 0.5) / 10 and answer 0.1 + 0.4."""
    half_flops, half_bandwidth = device.ZEROGPU_HALF_RTX_PRO_6000
    cost = GpuCost.fitted(RUNS)
    assert cost.segment == round(0.25 * 989.0 / half_flops * MARGIN, 3)
    assert cost.answer == round(0.5 * 989.0 / half_flops * MARGIN, 3)
    central = 1.2e9 / (half_bandwidth * 1e12 * 0.5) + 0.00114
    assert cost.token == pytest.approx(round(central * MARGIN, 4))
    assert (cost.start, cost.size) == (5.2, "large")  # the larger cold call's excess, 5.14 s, up to the tenth



def test_the_start_is_the_larger_cold_excess_up_to_the_tenth():
    """Cold calls 3.21 s and 2.5 s over a warm one: the larger, 3.21, up to the tenth: 3.3 (not the default 5.2); 5.1
    is already a tenth (10 x 5.1 is 51.00000000000001 in floats, which the rounding keeps at 51)."""
    for excesses, start in (((3.21, 2.5), 3.3), ((5.1, 2.5), 5.1)):
        runs = [figures("NVIDIA H200", 0.0015, 2400.0, True, cold_excess=excesses[0]),
                figures("NVIDIA H100 80GB HBM3", 0.002, 2010.0, False, 2.0, cold_excess=excesses[1])]
        assert GpuCost.fitted(runs).start == start, excesses

def test_figures_with_the_old_keys_fit_the_same():
    old = [figures("NVIDIA H200", 0.0015, 2400.0, True, old_keys=True, cold_excess=4.62),
           figures("NVIDIA H100 80GB HBM3", 0.002, 2010.0, False, 2.0, old_keys=True, cold_excess=5.14)]
    assert current_keys({"phases": {"stages": 1, "x": [2]}, "phase_s": 3}) == {"parts": {"timings": 1, "x": [2]},
                                                                              "part_s": 3}
    assert current_keys([1, "a"]) == [1, "a"]
    assert StepFit.fitted(old).fixed_s == pytest.approx((0.001, 0.00128))
    assert GpuCost.fitted(old).segment == GpuCost.fitted(RUNS).segment
