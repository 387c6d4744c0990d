"""Seeded procedural long videos: moving shapes in scenes plus rare "needle" events, with exact ground truth."""

from __future__ import annotations

import dataclasses
import logging
import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np

log = logging.getLogger(__name__)

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

MIN_DURATION = 20.0  # the shortest video that still fits two events 10 s apart
SCENE_SECONDS = (20.0, 120.0)
SHAPES_PER_SCENE = (1, 3)
SHAPE_SIZE = (28, 56)
SHAPE_SPEED = (20.0, 80.0)  # px/s
DOMINANT_SHARE = 0.6  # minimum fraction of regular shapes (counted per scene) of the dominant kind
EVENT_PAIRS = (2, 5)
EVENT_REPEATS = (2, 4)
EVENT_SECONDS = (2.0, 6.0)
SPARSEST_SAMPLING = 1024  # frames a model samples from a video at most: long videos stretch their events
EVENT_SIZE = (64, 96)
EVENT_GAP = 10.0  # seconds between the end of one event and the start of the next
EVENT_MARGIN = 1.0  # seconds kept free at both ends so every event is fully inside the video


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


def event_seconds(duration: float) -> tuple[float, float]:
    """Range of event lengths: 2-6 s, stretched in long videos so an event spans >= 2 of 1024 sampled frames."""
    shortest = max(EVENT_SECONDS[0], 2 * duration / SPARSEST_SAMPLING)
    return shortest, max(EVENT_SECONDS[1], 3 * shortest)


def generate_video(seed: int, duration: float | None = None, *, min_duration: float = 60.0,
                   max_duration: float = 3600.0, width: int = 512, height: int = 256) -> SyntheticVideo:
    """A random video; `duration` (seconds) is drawn log-uniformly in [min_duration, max_duration] when None."""
    if not MIN_DURATION <= min_duration <= max_duration:
        raise ValueError(f"need {MIN_DURATION} <= min_duration <= max_duration, got {min_duration}, {max_duration}")
    if width < EVENT_SIZE[1] or height < EVENT_SIZE[1]:
        raise ValueError(f"width and height must be at least {EVENT_SIZE[1]} px (the largest event), "
                         f"got {width}x{height}")
    rng = np.random.default_rng(seed)
    # Drawn even when a duration is given so that the rest of the video only depends on (seed, duration).
    log_duration = rng.uniform(math.log(min_duration), math.log(max_duration))
    if duration is None:
        duration = min(max(round(math.exp(log_duration), 1), min_duration), max_duration)
    elif not MIN_DURATION <= duration < math.inf:
        raise ValueError(f"duration must be a finite number of seconds >= {MIN_DURATION}, got {duration}")
    duration = float(duration)

    spans = _scene_spans(rng, duration)
    # Room for n events: n * shortest event + (n - 1) gaps + margins.
    max_events = int((duration - 2 * EVENT_MARGIN + EVENT_GAP) // (EVENT_SECONDS[0] + EVENT_GAP))
    n_pairs = int(rng.integers(EVENT_PAIRS[0], min(EVENT_PAIRS[1], max_events) + 1))
    kinds = [str(k) for k in rng.permutation(KINDS)]
    dominant, event_kinds, other_kinds = kinds[0], kinds[1:1 + n_pairs], kinds[1 + n_pairs:]

    scenes = _scenes(rng, spans, width, height, dominant, other_kinds)
    dominant_count = sum(shape.kind == dominant for scene in scenes for shape in scene.shapes)
    # A repeated event must still appear fewer times than the dominant kind, so "most" stays unambiguous.
    max_repeat = min(EVENT_REPEATS[1], max_events - n_pairs + 1, dominant_count - 1)
    events = _events(rng, duration, width, height, event_kinds, max_repeat)
    return SyntheticVideo(int(seed), duration, width, height, dominant, scenes, events)


def _scene_spans(rng: np.random.Generator, duration: float) -> list[tuple[float, float]]:
    shortest, longest = SCENE_SECONDS
    spans, t = [], 0.0
    while t < duration:
        length = float(rng.uniform(shortest, longest))
        left = duration - t
        if left - length < shortest:
            # Never leave a sliver of a scene at the end: take the rest, or leave exactly one shortest scene.
            length = left if left <= longest else left - shortest
        spans.append((t, t + length if length < left else duration))
        t = spans[-1][1]
    return spans


def _scenes(rng: np.random.Generator, spans: list[tuple[float, float]], width: int, height: int,
            dominant: str, other_kinds: list[str]) -> tuple[Scene, ...]:
    backgrounds: list[int] = []
    kinds: list[list[str]] = []
    for _ in spans:
        choices = [i for i in range(len(BACKGROUNDS)) if not backgrounds or i != backgrounds[-1]]
        backgrounds.append(int(rng.choice(choices)))
        # A lone scene gets two shapes so the dominant kind outnumbers a single event even then.
        n = int(rng.integers(SHAPES_PER_SCENE[0] + (len(spans) == 1), SHAPES_PER_SCENE[1] + 1))
        kinds.append([dominant if not other_kinds or rng.random() < 0.7 else str(rng.choice(other_kinds))
                      for _ in range(n)])

    # Every scene shows the dominant kind (so it also has the most screen time) ...
    for scene_kinds in kinds:
        if dominant not in scene_kinds:
            scene_kinds[0] = dominant
    # ... and it makes up at least DOMINANT_SHARE of all regular shapes.
    flat = [(i, j) for i, scene_kinds in enumerate(kinds) for j in range(len(scene_kinds))]
    while sum(kinds[i][j] == dominant for i, j in flat) < math.ceil(DOMINANT_SHARE * len(flat)):
        others = [(i, j) for i, j in flat if kinds[i][j] != dominant]
        i, j = others[int(rng.integers(len(others)))]
        kinds[i][j] = dominant

    scenes = []
    for (start, end), background, scene_kinds in zip(spans, backgrounds, kinds):
        shapes = []
        for kind in scene_kinds:
            size = int(rng.integers(SHAPE_SIZE[0], SHAPE_SIZE[1] + 1))
            speed, angle = rng.uniform(*SHAPE_SPEED), rng.uniform(0, 2 * math.pi)
            shapes.append(Shape(kind, str(rng.choice(list(COLOURS))), size,
                                float(rng.uniform(size / 2, width - size / 2)),
                                float(rng.uniform(size / 2, height - size / 2)),
                                float(speed * math.cos(angle)), float(speed * math.sin(angle))))
        scenes.append(Scene(start, end, BACKGROUNDS[background], tuple(shapes)))
    return tuple(scenes)


def _events(rng: np.random.Generator, duration: float, width: int, height: int, kinds: list[str],
            max_repeat: int) -> tuple[Event, ...]:
    pairs = [(kind, str(rng.choice(list(COLOURS)))) for kind in kinds]
    labels = list(pairs)
    if max_repeat >= EVENT_REPEATS[0] and rng.random() < 0.75:
        repeated = pairs[int(rng.integers(len(pairs)))]
        labels += [repeated] * (int(rng.integers(EVENT_REPEATS[0], max_repeat + 1)) - 1)
    labels = [labels[i] for i in rng.permutation(len(labels))]
    n = len(labels)

    # Durations shrink towards the minimum only when a short video could not hold them otherwise.
    lengths = rng.uniform(*event_seconds(duration), size=n)
    room = duration - 2 * EVENT_MARGIN - EVENT_GAP * (n - 1)
    if lengths.sum() > room:
        lengths = EVENT_SECONDS[0] + (lengths - EVENT_SECONDS[0]) * (room - n * EVENT_SECONDS[0]) / (
            lengths.sum() - n * EVENT_SECONDS[0])
    # The spare time is split at random between the n + 1 gaps around the events.
    spare = rng.dirichlet(np.ones(n + 1)) * max(room - lengths.sum(), 0.0)

    events, t = [], EVENT_MARGIN + spare[0]
    for (kind, colour), length, after in zip(labels, lengths, spare[1:]):
        size = int(rng.integers(EVENT_SIZE[0], EVENT_SIZE[1] + 1))
        events.append(Event(kind, colour, float(t), float(t + length),
                            float(rng.uniform(size / 2, width - size / 2)),
                            float(rng.uniform(size / 2, height - size / 2)), size))
        t += length + EVENT_GAP + after
    return tuple(events)


def write_mp4(video: SyntheticVideo, path: str, fps: float = 4.0) -> str:
    """Encode round(duration * fps) frames at exactly `fps` to an H.264 mp4; returns the path."""
    import imageio_ffmpeg  # only writing files needs ffmpeg; rendering frames does not

    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")
    if video.width % 2 or video.height % 2:
        raise ValueError(f"yuv420p needs an even frame size, got {video.width}x{video.height}")
    path = str(path)
    n = round(video.duration * fps)
    writer = imageio_ffmpeg.write_frames(
        path, (video.width, video.height), fps=fps, codec="libx264", pix_fmt_out="yuv420p", quality=None,
        # Even sizes are enough for libx264; the default (16) would silently rescale other sizes.
        macro_block_size=2,
        # faststart puts the index first so a browser can start playing before the whole file arrives.
        output_params=["-crf", "28", "-preset", "fast", "-movflags", "+faststart"],
    )
    writer.send(None)
    chunk = 64  # frames rendered at once: bounded memory for hour-long videos
    for first in range(0, n, chunk):
        writer.send(video.frames(np.arange(first, min(first + chunk, n)) / fps))
    writer.close()
    log.debug("wrote %s: %d frames at %g fps", path, n, fps)
    return path
