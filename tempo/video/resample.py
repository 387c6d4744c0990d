"""Pillow's bicubic resize, reproduced bit for bit as Pillow 13 runs it, a whole segment at a time.

The released pipeline shrinks every frame with PIL (`Image.resize(..., BICUBIC)`), twice: to a long edge of 512,
then to multiples of 64. Pillow resizes in two one-dimensional passes, each with 22-bit fixed-point weights and a
round to uint8 in between. Until 12.x it always ran the horizontal pass first; 13.0 runs the vertical pass first
when the height shrinks by more than twice as many pixels as the width. The two orders round differently, so the
same frame gave different pixels under different Pillows. This module is that arithmetic in our own code, in
Pillow 13's order, so the pixels no longer depend on which Pillow is installed (tests/fixtures/resize holds the
outputs recorded from Pillow 13).

Each pass is a sum over whole rows: output row i = sum_t w[i, t] * input row (first_i + t), accumulated in int32,
compiled by numba. A horizontal pass runs on the frames transposed, so that rows are contiguous there too.
"""

from __future__ import annotations

import functools
import math

import cv2
import numba
import numpy as np
import torch

PRECISION_BITS = 22  # Pillow's 8-bit resampling: 32 bits less 8 for the value and 2 for the overshoot
SUPPORT = 2.0  # bicubic's support at scale 1
A = -0.5  # the bicubic's free parameter, as in Pillow


def bicubic(x: float) -> float:
    """Pillow's bicubic convolution kernel."""
    x = abs(x)
    if x < 1.0:
        return ((A + 2.0) * x - (A + 3.0)) * x * x + 1
    if x < 2.0:
        return (((x - 5) * x + 8) * x - 4) * A
    return 0.0


@functools.lru_cache(maxsize=512)
def coefficients(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Which input rows every output row reads and with what weights, as Pillow computes them (in float64, in
    the same order of operations), then rounded to its fixed point: bounds [out, 2] (first row, count) int64 and
    weights [out, taps] int32, zero beyond each count."""
    scale = in_size / out_size
    filter_scale = max(scale, 1.0)
    support = SUPPORT * filter_scale
    taps = int(math.ceil(support)) * 2 + 1
    inverse_scale = 1.0 / filter_scale
    bounds = np.zeros((out_size, 2), dtype=np.int64)
    weights = np.zeros((out_size, taps), dtype=np.int32)
    one = float(1 << PRECISION_BITS)
    for i in range(out_size):
        center = (i + 0.5) * scale
        first = max(int(center - support + 0.5), 0)
        count = min(int(center + support + 0.5), in_size) - first
        row = [bicubic((x + first - center + 0.5) * inverse_scale) for x in range(count)]
        total = 0.0
        for w in row:  # summed in order: float addition is not associative
            total += w
        for x, w in enumerate(row):
            w = w / total if total != 0.0 else w
            weights[i, x] = int(-0.5 + w * one) if w < 0 else int(0.5 + w * one)
        bounds[i] = first, count
    return bounds, weights


# Compiled for its one signature when defined (from numba's disk cache, in a fraction of a second), so that a
# decoding process forked from a warm one never compiles it again.
@numba.njit("void(uint8[:, :, ::1], int64[:, ::1], int32[:, ::1], uint8[:, :, ::1])", nogil=True, cache=True)
def _resample_rows(source: np.ndarray, bounds: np.ndarray, weights: np.ndarray, out: np.ndarray) -> None:
    """uint8 source [N, rows_in, R] -> out [N, rows_out, R]: each output row a weighted sum of input rows."""
    half = np.int32(1 << (PRECISION_BITS - 1))
    acc = np.empty(source.shape[2], dtype=np.int32)
    for n in range(source.shape[0]):
        for i in range(out.shape[1]):
            acc[:] = half
            first = bounds[i, 0]
            for t in range(bounds[i, 1]):
                weight = weights[i, t]
                row = source[n, first + t]
                for r in range(acc.shape[0]):
                    acc[r] += np.int32(row[r]) * weight
            for r in range(acc.shape[0]):
                value = acc[r] >> PRECISION_BITS
                out[n, i, r] = 0 if value < 0 else (255 if value > 255 else value)


def _transpose(frames: np.ndarray) -> np.ndarray:
    """uint8 [T, A, B, C] -> contiguous [T, B, A, C]; OpenCV's transpose (pixels of 1 to 4 bytes) is about 3x
    quicker than torch's strided copy on 720p RGB."""
    t, a, b, c = frames.shape
    if c > 4:
        return torch.from_numpy(frames).transpose(1, 2).contiguous().numpy()
    out = np.empty((t, b, a, c), dtype=np.uint8)
    for n in range(t):
        cv2.transpose(frames[n], dst=out[n])
    return out


def _pass(frames: np.ndarray, axis: int, size: int) -> np.ndarray:
    """Resample uint8 [T, H, W, C] along axis 1 (rows) or 2 (columns) to `size`."""
    if axis == 2:  # columns: transpose so that they are rows
        return _transpose(_pass(_transpose(frames), 1, size))
    t, rows, width, channels = frames.shape
    bounds, weights = coefficients(rows, size)
    out = np.empty((t, size, width, channels), dtype=np.uint8)
    _resample_rows(frames.reshape(t, rows, width * channels), bounds, weights, out.reshape(t, size, -1))
    return out


def vertical_first(height: int, width: int, new_height: int, new_width: int) -> bool:
    """Pillow 13's pass order: vertical first when the height shrinks by more than twice what the width does."""
    return new_height < height and height - new_height > 2 * (width - new_width)


def resize(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """uint8 frames [T, H, W, C] (any C) resized to [T, height, width, C] exactly as Pillow 13's BICUBIC resize
    does each frame; the frames themselves when the size is unchanged."""
    if frames.dtype != np.uint8 or frames.ndim != 4:
        raise ValueError(f"expected uint8 frames [T, H, W, C], got {frames.dtype} {frames.shape}")
    if min(height, width) < 1:
        raise ValueError(f"cannot resize to {width}x{height}")
    frames = np.ascontiguousarray(frames)
    order = (1, 2) if vertical_first(frames.shape[1], frames.shape[2], height, width) else (2, 1)
    for axis in order:
        size = height if axis == 1 else width
        if frames.shape[axis] != size:
            frames = _pass(frames, axis, size)
    return frames
