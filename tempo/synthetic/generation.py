"""Seeded procedural long videos: a synthetic video drawn from a seed (its length, scenes, shapes and events), under
the rules that keep its questions unambiguous."""

from __future__ import annotations

import math

import numpy as np

from .world import BACKGROUNDS, COLOURS, KINDS, Event, Scene, Shape, SyntheticVideo

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
