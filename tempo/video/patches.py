"""Segment frames -> Qwen3-VL patch rows, reproducing the released resize chain pixel for pixel.

The released pipeline (its infer.py, qwen-vl-utils, then the Qwen3-VL processor) applies:
  0. per frame, PIL bicubic to a long edge of at most 512 (`fit_long_edge`);
  1. per frame, PIL bicubic to a size snapped to multiples of 2*factor (qwen-vl-utils passes its 32-pixel
     factor where a patch size is expected, so the factor doubles to 64);
  2. an even frame count, repeating the last frame;
  3. per clip, torch bicubic with antialias to multiples of factor with at least 128 merged tokens per
     frame -- small videos are *up*-scaled and the aspect ratio can change;
  4. rescale + normalise, then cut into (temporal x spatial) patches ordered by 2x2 merge block.
Steps 0 and 1 are Pillow's arithmetic as Pillow 13 runs it, in our own code (`resample.py`), over a whole segment.
Every step acts on one frame at a time, so frames can be reduced as soon as they are decoded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import VideoError
from .resample import resize
from .sampling import long_edge_size

MAX_ASPECT_RATIO = 200
FRAME_MIN_TOKENS = 4  # qwen-vl-utils image defaults, in units of (2*factor)^2 pixels
FRAME_MAX_TOKENS = 16384
CLIP_MIN_TOKENS = 128  # qwen-vl-utils video defaults, in units of factor^2 pixels
CLIP_MAX_TOKENS = 768
CLIP_TOTAL_PIXELS_TOKENS = 128000 * 0.9  # MODEL_SEQ_LEN * 0.9


@dataclass(frozen=True)
class PatchGeometry:
    """Patch layout and normalisation of the compressor's vision tower (from the base processor config)."""

    patch_size: int = 16
    temporal_patch_size: int = 2
    merge_size: int = 2
    image_mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    image_std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    rescale_factor: float = 1 / 255

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    @classmethod
    def from_processor_config(cls, config: dict) -> PatchGeometry:
        return cls(
            patch_size=int(config.get("patch_size", 16)),
            temporal_patch_size=int(config.get("temporal_patch_size", 2)),
            merge_size=int(config.get("merge_size", 2)),
            image_mean=tuple(config.get("image_mean", (0.5, 0.5, 0.5))),
            image_std=tuple(config.get("image_std", (0.5, 0.5, 0.5))),
            rescale_factor=float(config.get("rescale_factor", 1 / 255)),
        )


def snap_size(height: int, width: int, factor: int, min_pixels: float, max_pixels: float) -> tuple[int, int]:
    """qwen-vl-utils `smart_resize`: nearest multiples of `factor`, then scaled into the pixel range."""
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise VideoError(f"Frames of {width}x{height} are too elongated (aspect ratio above {MAX_ASPECT_RATIO}).")
    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = math.floor(height / beta / factor) * factor
        w = math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def fit_long_edge(frames: np.ndarray, long_edge: int = 512) -> np.ndarray:
    """Step 0: uint8 [T, H, W, 3] with the long edge shrunk to `long_edge_size` (unchanged when it fits)."""
    width, height = long_edge_size(frames.shape[2], frames.shape[1], long_edge)
    return resize(frames, height, width)


def frame_size(height: int, width: int, geometry: PatchGeometry) -> tuple[int, int]:
    """Step 1's target: multiples of 2*factor within qwen-vl-utils' image pixel range."""
    factor = 2 * geometry.factor
    return snap_size(height, width, factor, FRAME_MIN_TOKENS * factor**2, FRAME_MAX_TOKENS * factor**2)


def clip_size(height: int, width: int, num_frames: int, geometry: PatchGeometry) -> tuple[int, int]:
    """Step 3's target size for a clip of `num_frames` frames of height x width."""
    factor = geometry.factor
    min_pixels = CLIP_MIN_TOKENS * factor**2
    total_pixels = CLIP_TOTAL_PIXELS_TOKENS * factor**2
    max_pixels = max(min(CLIP_MAX_TOKENS * factor**2, total_pixels / num_frames * 2), int(min_pixels * 1.05))
    return snap_size(height, width, factor, min_pixels, max_pixels)


def resize_frames(frames: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Step 3: torchvision-equivalent bicubic+antialias on uint8 [T, 3, H, W] (float math, clamp, round)."""
    if tuple(frames.shape[-2:]) == tuple(size):
        return frames
    resized = F.interpolate(frames.float(), size=list(size), mode="bicubic", align_corners=False, antialias=True)
    return resized.clamp(0, 255).round().to(torch.uint8)


def even_clip_length(num_frames: int, geometry: PatchGeometry) -> int:
    """Step 2: frame count after padding to a multiple of the temporal patch size."""
    t = geometry.temporal_patch_size
    return max(t, -(-num_frames // t) * t)


def model_frames(frames: np.ndarray, geometry: PatchGeometry, clip_frames: int | None = None) -> torch.Tensor:
    """Steps 1 and 3: uint8 [T, H, W, 3] (long edge fitted) -> [T, 3, h, w], the size the vision tower sees for a
    clip of `clip_frames` frames (default: these frames, padded to an even count)."""
    snapped = torch.from_numpy(resize(frames, *frame_size(frames.shape[1], frames.shape[2], geometry)))
    snapped = snapped.permute(0, 3, 1, 2)  # [T, 3, h1, w1]
    clip_frames = clip_frames or even_clip_length(len(frames), geometry)
    return resize_frames(snapped, clip_size(snapped.shape[2], snapped.shape[3], clip_frames, geometry))


def patchify(frames: torch.Tensor, geometry: PatchGeometry) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """Step 4 layout: uint8 [T, 3, H, W] -> rows [t*h*w, 3*tp*p*p] ordered by merge block, and grid (t, h, w)."""
    t_patch, p, m = geometry.temporal_patch_size, geometry.patch_size, geometry.merge_size
    num_frames, channels, height, width = frames.shape
    if num_frames % t_patch:
        pad = t_patch - num_frames % t_patch
        frames = torch.cat([frames, frames[-1:].expand(pad, -1, -1, -1)])
        num_frames += pad
    grid = (num_frames // t_patch, height // p, width // p)
    blocks = frames.reshape(grid[0], t_patch, channels, grid[1] // m, m, p, grid[2] // m, m, p)
    rows = blocks.permute(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(grid[0] * grid[1] * grid[2], -1)
    return rows, grid


def normalize(rows: torch.Tensor, geometry: PatchGeometry) -> torch.Tensor:
    """Step 4 values: fused rescale + normalise of uint8 rows, exactly as the Qwen3-VL processor computes it."""
    channels = len(geometry.image_mean)
    mean = torch.tensor([m / geometry.rescale_factor for m in geometry.image_mean], dtype=torch.float32,
                        device=rows.device)
    std = torch.tensor([s / geometry.rescale_factor for s in geometry.image_std], dtype=torch.float32,
                       device=rows.device)
    values = rows.reshape(rows.shape[0], channels, -1).float()
    return ((values - mean[None, :, None]) / std[None, :, None]).reshape(rows.shape)
