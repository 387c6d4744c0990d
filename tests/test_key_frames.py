"""Thumbnails and key frames are each segment's sharpest sampled frame (variance of the Laplacian), and the time
they show is that frame's own."""

from __future__ import annotations

import cv2
import numpy as np

from tempo.config import SamplingConfig
from tempo.engine.accelerator import frame_time
from tempo.timing import Timer
from tempo.video import VideoInfo, uniform_plan
from tempo.video.patches import PatchGeometry
from tempo.video.segments import prepare_segment, sharpest


def clip(sharp_at: int, frames: int = 8) -> list[np.ndarray]:
    """Frames of a checkerboard, every one blurred but frame `sharp_at` (the middle one is blurred too)."""
    board = (np.indices((240, 320)).sum(axis=0) // 8 % 2 * 255).astype(np.uint8)
    image = np.stack([board, board // 2, 255 - board], axis=-1)
    blurred = cv2.GaussianBlur(image, (0, 0), 4)
    return [image.copy() if i == sharp_at else blurred.copy() for i in range(frames)]


def edges(image: np.ndarray) -> float:
    return cv2.Laplacian(cv2.cvtColor(image, cv2.COLOR_RGB2GRAY), cv2.CV_32F).var()


def test_the_sharpest_frame_is_chosen_over_a_blurred_middle():
    assert sharpest(np.stack(clip(2))) == 2
    assert sharpest(np.stack(clip(7))) == 7


def test_a_segment_shows_its_sharp_frame_and_says_when_it_was_taken():
    geometry = PatchGeometry.from_processor_config({})
    sampling = SamplingConfig()
    segment = prepare_segment(3, clip(2), sampling, geometry, Timer())
    assert segment.shown == 2
    everything_blurred = prepare_segment(3, clip(99), sampling, geometry, Timer())
    assert edges(segment.thumbnail) > 4 * edges(everything_blurred.thumbnail)  # the sharp frame is what it shows
    plan = uniform_plan(VideoInfo("v.mp4", 3000, 30.0, 320, 240, "test"), sampling)
    assert frame_time(plan, segment) == plan.segment_frame_times(3)[2] != plan.span(3)[0]
