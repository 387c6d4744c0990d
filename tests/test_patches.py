import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tempo.errors import VideoError
from tempo.video.patches import PatchGeometry, clip_size, model_frames, normalize, patchify, snap_size

GEOMETRY = PatchGeometry()


@pytest.mark.parametrize("h,w,expected", [(240, 320, (256, 320)), (120, 160, (128, 128)), (48, 64, (128, 192)),
                                          (288, 512, (256, 512))])
def test_frame_snapping_uses_factor_64(h, w, expected):
    assert snap_size(h, w, 64, 16384, 67108864) == expected


@pytest.mark.parametrize("w,h,expected_hw", [(160, 120, (384, 384)), (240, 432, (480, 288)), (64, 48, (320, 448)),
                                             (512, 256, (256, 512)), (512, 288, (256, 512))])
def test_small_frames_are_upscaled_to_at_least_128_tokens(w, h, expected_hw):
    frames = np.tile(np.array([10, 20, 30], dtype=np.uint8), (8, h, w, 1))
    model = model_frames(frames, GEOMETRY)
    assert tuple(model.shape) == (8, 3, *expected_hw)
    assert model.shape[2] * model.shape[3] >= 128 * 32 * 32
    assert (model[:, 0] == 10).all() and (model[:, 2] == 30).all()  # a flat frame stays flat through the chain


def test_clip_size_limits():
    assert clip_size(256, 512, 8, GEOMETRY) == (256, 512)
    assert clip_size(2000, 2000, 8, GEOMETRY) == (864, 864)  # capped at 768 merged tokens


def test_extreme_aspect_ratio_is_a_clear_error():
    with pytest.raises(VideoError, match="elongated"):
        snap_size(2, 500, 64, 16384, 67108864)


def unpatchify(rows, grid, geometry=GEOMETRY):
    t, h, w = grid
    tp, p, m = geometry.temporal_patch_size, geometry.patch_size, geometry.merge_size
    blocks = rows.reshape(t, h // m, w // m, m, m, 3, tp, p, p)
    return blocks.permute(0, 6, 5, 1, 3, 7, 2, 4, 8).reshape(t * tp, 3, h * p, w * p)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_patchify_is_a_lossless_relayout(frames, bh, bw, seed):
    video = torch.randint(0, 256, (frames, 3, bh * 32, bw * 32), dtype=torch.uint8,
                          generator=torch.Generator().manual_seed(seed))
    rows, grid = patchify(video, GEOMETRY)
    assert rows.shape == (grid[0] * grid[1] * grid[2], 3 * 2 * 16 * 16)
    restored = unpatchify(rows, grid)
    padded = torch.cat([video, video[-1:]]) if frames % 2 else video
    assert torch.equal(restored, padded)


def test_normalize_matches_processor_formula():
    rows = torch.tensor([[0, 127, 128, 255] * 384], dtype=torch.uint8)
    values = normalize(rows, GEOMETRY)
    expected = (rows.float() - 127.5) / 127.5
    assert torch.equal(values, expected)
