"""v7's fix for digits copied twice: inputs whose time tags are not evenly spaced.

With evenly spaced tags a tag's leading digits follow from its place among the others, and an interval's second
time shares its leading digits with the first, so the decoder learnt to read only a tag's last digits and to write
the first ones from context; near 100 or 1,000 s that writes a digit too many (experiments/tiny-v7/README.md).
Here the gaps between consecutive tags vary, so a tag's leading digits can only be read off the tag itself.
"""

from __future__ import annotations

import math

import numpy as np

from .compose_long import VideoTags

SPACING = (2.0, 28.0)  # seconds: the mean gap, as `compose.tagged` draws its spacing
SPREAD = 3.0  # each gap is the mean times 1/SPREAD to SPREAD (log-uniform)
FIRST = 64  # the first tag lies up to this many mean gaps in, as `compose.tagged` starts its tags


def uneven_tags(count: int, rng: np.random.Generator) -> tuple[list[float], float]:
    """Increasing tags whose gaps vary around a mean spacing, and that mean (a "when" answer's tolerance and a
    one-segment interval's width, as for evenly spaced tags)."""
    step = float(rng.uniform(*SPACING))
    gaps = step * np.exp(rng.uniform(-math.log(SPREAD), math.log(SPREAD), size=count - 1))
    first = step * float(rng.uniform(0.5, FIRST))
    return [round(first + float(t), 1) for t in np.concatenate([[0.0], np.cumsum(gaps)])], step


class UnevenTags(VideoTags):
    """`share` of `sampler`'s inputs re-tagged by `uneven_tags` (their answers read off the new tags), the rest as
    drawn."""

    def retag(self, count: int, rng: np.random.Generator) -> tuple[list[float], float]:
        return uneven_tags(count, rng)
