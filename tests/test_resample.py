"""tempo.resample against Pillow 13's recorded outputs (tests/fixtures/resize), and the properties it must keep."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from resize_vectors import source

from tempo.video import resample
from tests.conftest import ROOT

VECTORS = ROOT / "tests" / "fixtures" / "resize"


@pytest.fixture(scope="module")
def recorded() -> tuple[list[dict], dict[str, np.ndarray]]:
    listing = json.loads((VECTORS / "cases.json").read_text())
    assert listing["pillow"].startswith("13.")
    with np.load(VECTORS / "outputs.npz") as stored:
        return listing["cases"], {key: stored[key] for key in stored.files}


def resized(case: dict) -> np.ndarray:
    return resample.resize(source(case)[None], case["new_height"], case["new_width"])[0]


def mismatches(cases: list[dict], stored: dict[str, np.ndarray]) -> list[str]:
    """Every case whose output is not Pillow 13's, with the differing pixels where the output is stored."""
    wrong = []
    for case in cases:
        out = resized(case)
        if hashlib.sha256(out.tobytes()).hexdigest() == case["sha256"]:
            continue
        name = f"{case['width']}x{case['height']}x{case['channels']} -> {case['new_width']}x{case['new_height']}"
        expected = stored.get(str(case["seed"]))
        if expected is not None and expected.shape == out.shape:
            name += f": {int((expected != out).sum())} values differ"
        wrong.append(name)
    return wrong


def test_every_recorded_size_matches_pillow_13_bit_for_bit(recorded):
    cases, stored = recorded
    assert len(cases) > 500
    assert mismatches(cases, stored) == []


def test_one_perturbed_coefficient_is_caught(recorded, monkeypatch):
    """The comparison can fail: one weight of one output column, off by 1/1024, is enough."""
    cases, stored = recorded
    coefficients = resample.coefficients

    def perturbed(in_size: int, out_size: int):
        bounds, weights = coefficients(in_size, out_size)
        if (in_size, out_size) == (1280, 512):
            weights = weights.copy()
            weights[100, 3] += 1 << 12
        return bounds, weights

    monkeypatch.setattr(resample, "coefficients", perturbed)
    assert mismatches(cases[:1], stored) == ["1280x720x3 -> 512x288"]


def test_the_pass_order_is_pillow_13s():
    assert resample.vertical_first(144, 176, 128, 192)  # QCIF snapped to multiples of 64: width grows, height shrinks
    assert not resample.vertical_first(720, 1280, 288, 512)  # 16:9 shrinks more in width
    assert resample.vertical_first(1920, 720, 512, 192)  # taller than 2:1 shrinks more in height, by over twice
    assert not resample.vertical_first(240, 320, 256, 320)  # growing never goes first


frames = st.tuples(st.integers(1, 3), st.integers(1, 40), st.integers(1, 40), st.sampled_from([1, 3, 4]))


@settings(max_examples=60, deadline=None)
@given(frames, st.integers(1, 50), st.integers(1, 50), st.integers(0, 255))
def test_a_flat_image_stays_flat(shape, height, width, value):
    out = resample.resize(np.full(shape, value, dtype=np.uint8), height, width)
    assert out.shape == (shape[0], height, width, shape[3]) and (out == value).all()


@settings(max_examples=40, deadline=None)
@given(frames, st.integers(1, 50), st.integers(1, 50), st.integers(0, 2**31))
def test_frames_and_channels_are_resized_independently(shape, height, width, seed):
    pixels = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
    whole = resample.resize(pixels, height, width)
    for t in range(shape[0]):
        for c in range(shape[3]):
            alone = resample.resize(np.ascontiguousarray(pixels[t:t + 1, :, :, c:c + 1]), height, width)
            assert np.array_equal(alone[0, :, :, 0], whole[t, :, :, c])


def test_same_size_is_the_frames_themselves_and_bad_input_is_refused():
    pixels = np.arange(2 * 3 * 4 * 3, dtype=np.uint8).reshape(2, 3, 4, 3)
    assert np.array_equal(resample.resize(pixels, 3, 4), pixels)
    with pytest.raises(ValueError, match="uint8"):
        resample.resize(pixels.astype(np.float32), 2, 2)
    with pytest.raises(ValueError, match="cannot resize"):
        resample.resize(pixels, 0, 2)
