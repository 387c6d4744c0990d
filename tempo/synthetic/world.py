"""The synthetic world's videos as described by their ground truth (scenes of moving shapes, rare "needle" events)
and their frames, rendered from that description at any time."""

from __future__ import annotations

import dataclasses
import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np

KINDS = ("circle", "square", "triangle", "star", "diamond", "cross")
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (230, 30, 30),
    "green": (30, 200, 50),
    "blue": (40, 80, 255),
    "yellow": (250, 230, 20),
    "purple": (170, 50, 230),
    "orange": (255, 140, 0),
    "white": (245, 245, 245),
    "cyan": (0, 230, 240),
}
BACKGROUNDS: tuple[tuple[int, int, int], ...] = (
    (16, 18, 32), (36, 14, 18), (14, 34, 20), (32, 32, 32), (30, 16, 40), (12, 32, 40),
)


@dataclass(frozen=True)
class Shape:
    """A regular shape: starts at centre (x, y) when its scene starts, moves at (vx, vy) px/s, bounces off borders."""

    kind: str
    colour: str
    size: int
    x: float
    y: float
    vx: float
    vy: float


@dataclass(frozen=True)
class Scene:
    """A time span [start, end) with one background colour and its regular shapes."""

    start: float
    end: float
    background: tuple[int, int, int]
    shapes: tuple[Shape, ...]


@dataclass(frozen=True)
class Event:
    """A needle: a large static shape centred at (x, y), visible during [start, end), drawn above everything."""

    kind: str
    colour: str
    start: float
    end: float
    x: float
    y: float
    size: int


@dataclass(frozen=True)
class Sprite:
    """A shape as drawn in one frame: its box's top-left corner and size in pixels; `event` for a needle."""

    kind: str
    colour: str
    left: int
    top: int
    size: int
    event: bool

    def paint(self, canvas: np.ndarray, value: object) -> None:
        """Set this shape's pixels of `canvas` [height, width, ...] to `value`."""
        canvas[self.top:self.top + self.size, self.left:self.left + self.size][sprite(self.kind, self.size)] = value


@dataclass(frozen=True)
class SyntheticVideo:
    """A generated video and its ground truth; frames are rendered on demand from this description."""

    seed: int
    duration: float
    width: int
    height: int
    dominant_kind: str
    scenes: tuple[Scene, ...]
    events: tuple[Event, ...]

    @property
    def name(self) -> str:
        """The file name (without its ending) an evaluation writes the video under, and its benchmark `vid`."""
        return f"synthetic-{self.seed}-{self.duration:.1f}s"

    @cached_property
    def _scene_starts(self) -> list[float]:
        return [scene.start for scene in self.scenes]

    def frame(self, t: float) -> np.ndarray:
        """The RGB frame at time t seconds, shape (height, width, 3), uint8."""
        out = np.empty((self.height, self.width, 3), np.uint8)
        self._render(out, t)
        return out

    def frames(self, times: Sequence[float] | np.ndarray) -> np.ndarray:
        """RGB frames at the given times, shape (T, height, width, 3), uint8."""
        out = np.empty((len(times), self.height, self.width, 3), np.uint8)
        for i, t in enumerate(times):
            self._render(out[i], float(t))
        return out

    def to_dict(self) -> dict:
        """JSON-ready ground truth (colours as words, times in seconds, positions in pixels)."""
        return dataclasses.asdict(self)

    def sprites(self, t: float) -> list[Sprite]:
        """What is drawn at time t, bottom to top: the scene's moving shapes, then the events shown."""
        if not 0.0 <= t <= self.duration:
            raise ValueError(f"t={t} is outside the video [0, {self.duration}]")
        scene = self._scene(t)
        drawn = []
        for shape in scene.shapes:
            half = shape.size / 2
            x = _bounce(shape.x + shape.vx * (t - scene.start), half, self.width - half)
            y = _bounce(shape.y + shape.vy * (t - scene.start), half, self.height - half)
            drawn.append(self._placed(shape.kind, shape.colour, shape.size, x, y, False))
        drawn += [self._placed(e.kind, e.colour, e.size, e.x, e.y, True) for e in self.events if e.start <= t < e.end]
        return drawn

    def _placed(self, kind: str, colour: str, size: int, x: float, y: float, event: bool) -> Sprite:
        left = min(max(round(x - size / 2), 0), self.width - size)
        top = min(max(round(y - size / 2), 0), self.height - size)
        return Sprite(kind, colour, left, top, size, event)

    def _scene(self, t: float) -> Scene:
        return self.scenes[max(bisect_right(self._scene_starts, t) - 1, 0)]

    def _render(self, out: np.ndarray, t: float) -> None:
        drawn = self.sprites(t)  # checks t
        out[:] = self._scene(t).background
        for placed in drawn:
            placed.paint(out, COLOURS[placed.colour])


def _bounce(p: float, lo: float, hi: float) -> float:
    """Position of a point moving freely along p, reflected back and forth inside [lo, hi] (a triangle wave)."""
    span = hi - lo
    q = (p - lo) % (2 * span)
    return lo + span - abs(q - span)


@cache
def sprite(kind: str, size: int) -> np.ndarray:
    """Boolean (size, size) mask of a shape filling its box; cached because only a few sizes ever occur."""
    c = (np.arange(size) + 0.5) / size * 2 - 1  # pixel centres in [-1, 1]; y grows downwards
    u, v = np.meshgrid(c, c)
    if kind == "circle":
        mask = u * u + v * v <= 1.0
    elif kind == "square":
        # Inset so a square's area is close to a circle's of the same size: size alone must not give the kind away.
        mask = (np.abs(u) <= 0.85) & (np.abs(v) <= 0.85)
    elif kind == "diamond":
        mask = np.abs(u) + np.abs(v) <= 1.0
    elif kind == "cross":
        arm = 0.3
        mask = ((np.abs(u) <= arm) | (np.abs(v) <= arm)) & (np.abs(u) <= 1.0) & (np.abs(v) <= 1.0)
    elif kind == "triangle":
        mask = _polygon_mask([(0.0, -1.0), (1.0, 0.8), (-1.0, 0.8)], u, v)
    elif kind == "star":
        angles = -math.pi / 2 + np.arange(10) * math.pi / 5  # first point straight up
        radii = np.where(np.arange(10) % 2 == 0, 1.0, 0.45)
        mask = _polygon_mask(list(zip(radii * np.cos(angles), radii * np.sin(angles))), u, v)
    else:
        raise ValueError(f"unknown shape kind {kind!r}; expected one of {KINDS}")
    mask.flags.writeable = False  # shared by every frame through the cache
    return mask


def _polygon_mask(vertices: list[tuple[float, float]], u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Even-odd point-in-polygon test over the whole grid, one edge at a time."""
    inside = np.zeros(u.shape, bool)
    for (x1, y1), (x2, y2) in zip(vertices, vertices[1:] + vertices[:1]):
        if y1 == y2:
            continue  # a horizontal edge is never crossed by a horizontal ray
        crosses = (y1 > v) != (y2 > v)
        x_at = x1 + (v - y1) * (x2 - x1) / (y2 - y1)
        inside ^= crosses & (u < x_at)
    return inside
