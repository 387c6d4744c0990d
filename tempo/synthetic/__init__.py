"""Seeded synthetic long videos with exact ground truth and graded questions, for training and demos."""

from .questions import FAMILIES, Question, is_correct, make_questions, occurrences, segment_relevance
from .world import (BACKGROUNDS, COLOURS, KINDS, Event, Scene, Shape, SyntheticVideo, generate_video, sprite,
                    write_mp4)

__all__ = [
    "FAMILIES", "Question", "is_correct", "make_questions", "occurrences", "segment_relevance",
    "BACKGROUNDS", "COLOURS", "KINDS", "Event", "Scene", "Shape", "SyntheticVideo", "generate_video", "sprite",
    "write_mp4",
]
