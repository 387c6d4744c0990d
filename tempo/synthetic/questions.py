"""Questions with exact answers about a synthetic video, the rule that grades a predicted answer, and relevance
labels."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .world import COLOURS, KINDS, Event, SyntheticVideo

FAMILIES = ("needle", "grounding", "counting", "global")
TEMPORAL_FAMILIES = ("interval", "order")  # issue 47: asked by `temporal_questions`, from a stream of their own
ALL_FAMILIES = FAMILIES + TEMPORAL_FAMILIES
TIMED_FAMILIES = ("grounding", "interval")  # answered with times in the video
INTERVAL_IOU = 0.5  # an interval answer is right at this temporal IoU with the truth or more (R@1, IoU = 0.5)
TEMPORAL_STREAM = 47  # with the video's seed, seeds the new families' draws
NUMBER_WORDS = {"zero": 0, "one": 1, "once": 1, "two": 2, "twice": 2, "three": 3, "thrice": 3, "four": 4,
                "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
PLURALS = {kind: kind + ("es" if kind.endswith("s") else "s") for kind in KINDS}
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[a-z]+")
_SECONDS = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?|\d+(?:\.\d+)?")  # "-3" is negative; "10-20" is two numbers
_ORDER = re.compile(r"the ([a-z]+) ([a-z]+) or the ([a-z]+) ([a-z]+)\?$")


@dataclass(frozen=True)
class Question:
    """One question, its reference answer, and the time spans (seconds) holding the information needed."""

    family: str
    text: str
    answer: str
    evidence: tuple[tuple[float, float], ...]


def occurrences(video: SyntheticVideo) -> dict[tuple[str, str], list[Event]]:
    """Events grouped by (kind, colour), in order of first appearance."""
    groups: dict[tuple[str, str], list[Event]] = {}
    for event in sorted(video.events, key=lambda e: e.start):
        groups.setdefault((event.kind, event.colour), []).append(event)
    return groups


def make_questions(video: SyntheticVideo, rng: np.random.Generator) -> list[Question]:
    """One question per family, in FAMILIES order, skipping a family only if the video cannot support it."""
    groups = occurrences(video)
    spans = {pair: tuple((e.start, e.end) for e in events) for pair, events in groups.items()}
    colours_of: dict[str, set[str]] = {}
    for kind, colour in groups:
        colours_of.setdefault(kind, set()).add(colour)
    questions = []

    needle = [(kind, colour) for kind, colour in groups if len(colours_of[kind]) == 1]
    if needle:
        kind, colour = needle[int(rng.integers(len(needle)))]
        questions.append(Question("needle", f"What colour is the {kind}?", colour, spans[kind, colour]))

    once = [pair for pair, events in groups.items() if len(events) == 1]
    if once:
        kind, colour = once[int(rng.integers(len(once)))]
        (start, end), = spans[kind, colour]
        questions.append(Question("grounding", f"When does the {colour} {kind} appear?",
                                  f"At {round((start + end) / 2)} seconds.", spans[kind, colour]))

    if groups:
        # Half the time ask about the repeated pair, if any: a uniform pick would make "1" the usual answer.
        repeated = [pair for pair, events in groups.items() if len(events) > 1]
        pool = repeated if repeated and rng.random() < 0.5 else list(groups)
        kind, colour = pool[int(rng.integers(len(pool)))]
        questions.append(Question("counting", f"How many times does the {colour} {kind} appear?",
                                  str(len(groups[kind, colour])), spans[kind, colour]))

    questions.append(Question("global", "Which shape appears most?", video.dominant_kind, ((0.0, video.duration),)))
    return questions


def temporal_questions(video: SyntheticVideo) -> list[Question]:
    """An interval and an order question, drawn from the video's own stream (its seed) rather than the caller's,
    so that `make_questions` asks, answers and draws exactly as before these families existed."""
    rng = np.random.default_rng([video.seed, TEMPORAL_STREAM])
    groups = occurrences(video)
    questions = []

    # Only an event shown once has one interval; its length is 2-6 s (stretched to 7-21 s in an hour).
    once = [pair for pair, events in groups.items() if len(events) == 1]
    if once:
        kind, colour = once[int(rng.integers(len(once)))]
        (event,) = groups[kind, colour]
        questions.append(Question("interval", f"From when to when is the {colour} {kind} visible?",
                                  f"From {round(event.start)} to {round(event.end)} seconds.",
                                  ((event.start, event.end),)))

    if len(groups) >= 2:
        pairs = list(groups)  # in order of first appearance
        asked = [pairs[int(i)] for i in rng.choice(len(pairs), size=2, replace=False)]  # either one named first
        (kind, colour), (other_kind, other_colour) = asked
        earlier = min(asked, key=pairs.index)
        firsts = sorted((groups[pair][0].start, groups[pair][0].end) for pair in asked)
        questions.append(Question("order", f"Which appears first, the {colour} {kind} or the {other_colour} "
                                           f"{other_kind}?", f"The {earlier[1]} {earlier[0]}.", tuple(firsts)))
    return questions


def all_questions(video: SyntheticVideo, rng: np.random.Generator) -> list[Question]:
    """`make_questions` (drawing from `rng` as always) followed by `temporal_questions`: one per ALL_FAMILIES."""
    return make_questions(video, rng) + temporal_questions(video)


def named_seconds(prediction: str) -> list[float]:
    """Every number an answer names, in order, read as the grader reads them ("1,234" is one number; "-3" is
    negative, "10-20" two numbers)."""
    return [float(number) for number in _SECONDS.findall(_without_thousands(prediction.lower()))]


def names_time_outside(prediction: str, duration: float) -> bool:
    """Whether an answer names a time before 0 s or after the video's end (for families in TIMED_FAMILIES)."""
    return any(not 0.0 <= seconds <= duration for seconds in named_seconds(prediction))


def temporal_iou(first: tuple[float, float], second: tuple[float, float]) -> float:
    """Intersection over union of two time spans (0 when either is empty or reversed)."""
    if first[1] <= first[0] or second[1] <= second[0]:
        return 0.0
    inter = max(0.0, min(first[1], second[1]) - max(first[0], second[0]))
    return inter / (max(first[1], second[1]) - min(first[0], second[0]))


def is_correct(question: Question, prediction: str, segment_seconds: float) -> bool:
    """Grade a free-text prediction; grounding allows half a segment (+1 s) around the event, an interval needs a
    temporal IoU of INTERVAL_IOU with it, an order answer names only the one that appears first."""
    if question.family == "interval":
        named = named_seconds(prediction)
        return len(named) >= 2 and temporal_iou((named[0], named[1]), question.evidence[0]) >= INTERVAL_IOU
    tokens = _TOKEN.findall(_without_thousands(prediction.lower()))
    if question.family == "order":
        return _names_first(question, tokens)
    if question.family == "needle":
        return _names_only(tokens, {question.answer}, set(COLOURS))
    if question.family == "global":
        expected = {question.answer, PLURALS[question.answer]}
        return _names_only(tokens, expected, set(KINDS) | set(PLURALS.values()))
    if question.family == "counting":
        value = _first_number(tokens, words=True)
        return value is not None and value == int(question.answer)
    if question.family == "grounding":
        value = _first_number(tokens, words=False)
        if value is None:
            return False
        start, end = question.evidence[0]
        return max(start - value, 0.0, value - end) <= segment_seconds / 2 + 1.0
    raise ValueError(f"unknown question family {question.family!r}")


def segment_relevance(question: Question, segment_start: float, segment_end: float) -> bool:
    """Training label: does the segment [start, end) overlap any evidence span? Always True for global questions."""
    if question.family == "global":
        return True
    return any(segment_start < end and start < segment_end for start, end in question.evidence)


def _without_thousands(text: str) -> str:
    return re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # "1,234" is one number


def _names_first(question: Question, tokens: list[str]) -> bool:
    """An order answer names something that sets the earlier one apart (its colour or its kind) and nothing of
    any other colour or kind."""
    match = _ORDER.search(question.text)
    if match is None:
        raise ValueError(f"not an order question: {question.text!r}")
    colour, kind = question.answer.lower().removeprefix("the ").removesuffix(".").split()
    first = {colour, kind, PLURALS[kind]}
    pairs = {(match[1], match[2]), (match[3], match[4])}
    (other_colour, other_kind), = pairs - {(colour, kind)}
    apart = first - {other_colour, other_kind, PLURALS[other_kind]}
    named = {token for token in tokens if token in COLOURS or token in KINDS or token in PLURALS.values()}
    return bool(named & apart) and named <= first


def _names_only(tokens: list[str], expected: set[str], vocabulary: set[str]) -> bool:
    # Naming the answer among other candidates ("red or blue") is a hedge, not an answer.
    named = {token for token in tokens if token in vocabulary}
    return bool(named) and named <= expected


def _first_number(tokens: list[str], words: bool) -> float | None:
    for token in tokens:
        if token[0].isdigit():
            return float(token)
        if words and token in NUMBER_WORDS:
            return float(NUMBER_WORDS[token])
    return None
