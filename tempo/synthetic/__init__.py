"""Seeded synthetic long videos with exact ground truth and graded questions, for training and demos."""

from .generation import generate_video
from .mp4 import write_mp4
from .questions import (
    ALL_FAMILIES,
    FAMILIES,
    INTERVAL_IOU,
    TEMPORAL_FAMILIES,
    TIMED_FAMILIES,
    Question,
    all_questions,
    is_correct,
    make_questions,
    named_seconds,
    names_time_outside,
    occurrences,
    segment_relevance,
    temporal_iou,
    temporal_questions,
)
from .world import BACKGROUNDS, COLOURS, KINDS, Event, Scene, Shape, SyntheticVideo, sprite

__all__ = [
    "ALL_FAMILIES", "FAMILIES", "INTERVAL_IOU", "TEMPORAL_FAMILIES", "TIMED_FAMILIES", "Question", "all_questions",
    "is_correct", "make_questions", "named_seconds", "names_time_outside", "occurrences", "segment_relevance",
    "temporal_iou", "temporal_questions", "BACKGROUNDS", "COLOURS", "KINDS", "Event", "Scene", "Shape",
    "SyntheticVideo", "generate_video", "sprite", "write_mp4",
]
