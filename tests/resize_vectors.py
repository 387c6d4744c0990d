"""Reference outputs of Pillow 13's BICUBIC resize, which `tempo.resample` must reproduce bit for bit.

Recorded once with Pillow 13 installed in a throwaway directory (the project never depends on it):

    pip install --no-deps --target /tmp/pillow13 pillow==13.0.0
    PYTHONPATH=/tmp/pillow13 .venv/bin/python tests/resize_vectors.py tests/fixtures/resize

Inputs are not stored: `pattern` rebuilds them from integer arithmetic alone (no random generator whose stream could
change between numpy versions). `cases.json` lists every case with the SHA-256 of Pillow's output; `outputs.npz`
also keeps the pixels of the small outputs, to show where a difference is.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np

RANDOM_CASES = 500
SMALL_OUTPUT = 48 * 48  # outputs up to this many pixels are stored whole
SPECIAL = [  # (width, height, new width, new height, channels): the sizes video frames meet, and the edges
    (1280, 720, 512, 288, 3), (1920, 1080, 512, 288, 3), (854, 480, 512, 288, 3), (640, 360, 512, 288, 3),
    (1080, 1920, 288, 512, 3), (720, 1920, 192, 512, 3), (512, 288, 512, 256, 3), (176, 144, 192, 128, 3),
    (320, 240, 320, 256, 3), (333, 199, 320, 192, 3), (160, 120, 128, 128, 3), (64, 48, 64, 64, 3),
    (1, 1, 64, 48, 3), (1, 300, 1, 64, 3), (300, 1, 64, 1, 3), (1, 200, 64, 64, 3), (200, 1, 64, 64, 3),
    (2, 500, 64, 128, 3), (500, 2, 128, 64, 3), (7, 3, 300, 200, 3), (512, 288, 16, 9, 3), (4000, 16, 512, 2, 3),
    (16, 4000, 2, 512, 3), (97, 89, 96, 88, 1), (96, 88, 97, 89, 1),
]


def pattern(height: int, width: int, channels: int, seed: int) -> np.ndarray:
    """A deterministic, noise-like uint8 image [height, width, channels] (a multiplicative hash of the indices)."""
    y, x, c = np.meshgrid(np.arange(height, dtype=np.uint64), np.arange(width, dtype=np.uint64),
                          np.arange(channels, dtype=np.uint64), indexing="ij")
    mixed = (y * np.uint64(73856093)) ^ (x * np.uint64(19349663)) ^ (c * np.uint64(83492791)) ^ \
        np.uint64(seed * 2654435761 % 2**32)
    return ((mixed * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(56)).astype(np.uint8)


def cases() -> list[dict]:
    """Every recorded case: the special sizes, then random size pairs from 1 to 160 pixels (up and down)."""
    rng = random.Random(2026)
    found = [dict(width=w, height=h, new_width=nw, new_height=nh, channels=c) for w, h, nw, nh, c in SPECIAL]
    for _ in range(RANDOM_CASES):
        found.append(dict(width=rng.randint(1, 160), height=rng.randint(1, 160), new_width=rng.randint(1, 160),
                          new_height=rng.randint(1, 160), channels=rng.choice([3, 3, 3, 1])))
    return [dict(case, seed=i) for i, case in enumerate(found)]


def source(case: dict) -> np.ndarray:
    return pattern(case["height"], case["width"], case["channels"], case["seed"])


def record(directory: Path) -> None:
    import PIL
    from PIL import Image

    if not PIL.__version__.startswith("13."):
        raise SystemExit(f"record with Pillow 13 (this is {PIL.__version__})")
    directory.mkdir(parents=True, exist_ok=True)
    listing, stored = [], {}
    for case in cases():
        pixels = source(case)
        image = Image.fromarray(pixels[..., 0], "L") if case["channels"] == 1 else Image.fromarray(pixels, "RGB")
        out = np.asarray(image.resize((case["new_width"], case["new_height"]), Image.Resampling.BICUBIC))
        out = out.reshape(case["new_height"], case["new_width"], case["channels"])
        listing.append(dict(case, sha256=hashlib.sha256(out.tobytes()).hexdigest()))
        if case["new_width"] * case["new_height"] <= SMALL_OUTPUT:
            stored[str(case["seed"])] = out
    lines = ",\n".join(json.dumps(case) for case in listing)  # one case a line
    (directory / "cases.json").write_text(f'{{"pillow": "{PIL.__version__}", "cases": [\n{lines}\n]}}\n')
    np.savez_compressed(directory / "outputs.npz", **stored)
    print(f"recorded {len(listing)} cases ({len(stored)} stored whole) with Pillow {PIL.__version__}")


if __name__ == "__main__":
    record(Path(sys.argv[1]))
