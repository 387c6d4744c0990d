"""Questions with exact answers about a synthetic video, the rule that grades a predicted answer, and relevance labels."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .world import COLOURS, KINDS, Event, SyntheticVideo

FAMILIES = ("needle", "grounding", "counting", "global")
NUMBER_WORDS = {"zero": 0, "one": 1, "once": 1, "two": 2, "twice": 2, "three": 3, "thrice": 3, "four": 4,
                "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
PLURALS = {kind: kind + ("es" if kind.endswith("s") else "s") for kind in KINDS}
_TOKEN = re.compile(r"\d+(?:\.\d+)?|[a-z]+")


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


def is_correct(question: Question, prediction: str, segment_seconds: float) -> bool:
    """Grade a free-text prediction; grounding allows half a segment (+1 s) around the event."""
    tokens = _TOKEN.findall(re.sub(r"(?<=\d),(?=\d{3}\b)", "", prediction.lower()))  # "1,234" is one number
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
