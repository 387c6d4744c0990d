"""The highlight gallery: each moment's card, in rank order, shows the key frame of the moment's most relevant
segment, or a frame read from the video where the run kept none."""

from __future__ import annotations

import av
import numpy as np
import pytest
from PIL import Image

from tempo.events import Segment
from tempo.moments import Moment
from tempo.render.gallery import CARD_WIDTH, GAP, MARGIN, gallery_image, write_gallery

COLOURS = [(220, 40, 40), (40, 180, 60), (40, 80, 220), (230, 200, 30), (150, 40, 200), (20, 200, 200)]


def segments() -> list[Segment]:
    """Six 4-second segments, each key frame a flat colour of its own; segment 4 kept no frame."""
    relevance = [0.1, 0.9, 0.3, 0.2, 0.8, 0.7]
    return [Segment(i, 4.0 * i, 4.0 * (i + 1), relevance[i], 8,
                    None if i == 4 else np.full((90, 160, 3), COLOURS[i], np.uint8), 4.0 * i + 1)
            for i in range(6)]


def card_centre(image: Image.Image, index: int, top: int) -> tuple[int, ...]:
    x = MARGIN + index * (CARD_WIDTH + GAP) + CARD_WIDTH // 2
    return image.getpixel((x, top))


def image_top(image: Image.Image) -> int:
    """The first row, down the first card's middle, that is a frame (not paper, title or the card's white)."""
    x = MARGIN + CARD_WIDTH // 2
    return next(y for y in range(image.height) if max(image.getpixel((x, y))) - min(image.getpixel((x, y))) > 100)


def test_each_card_shows_its_moment_s_most_relevant_key_frame_in_rank_order():
    moments = [Moment(0.0, 12.0, 0.9), Moment(20.0, 24.0, 0.7)]  # segments 0-2 (best: 1), then segment 5
    image = gallery_image(moments, segments(), "When is the red square?")
    assert image.mode == "RGB" and image.width == 2 * MARGIN + 2 * CARD_WIDTH + GAP
    middle = image_top(image) + 100
    assert card_centre(image, 0, middle) == pytest.approx(COLOURS[1], abs=3)
    assert card_centre(image, 1, middle) == pytest.approx(COLOURS[5], abs=3)


def test_a_moment_without_a_kept_frame_gets_one_from_the_video(tmp_path):
    video = tmp_path / "six-colours.mp4"
    with av.open(str(video), "w") as output:
        stream = output.add_stream("libx264", rate=2, options={"crf": "10"})
        stream.width, stream.height, stream.pix_fmt = 160, 90, "yuv420p"
        for second in range(24):
            colour = COLOURS[second // 4]
            for _ in range(2):
                frame = av.VideoFrame.from_ndarray(np.full((90, 160, 3), colour, np.uint8), format="rgb24")
                output.mux(stream.encode(frame))
        output.mux(stream.encode(None))
    moment = [Moment(16.0, 20.0, 0.8)]  # segment 4: no key frame kept
    path = write_gallery(moment, segments(), tmp_path / "highlights.png", "q", video)
    image = Image.open(path).convert("RGB")
    assert card_centre(image, 0, image_top(image) + 100) == pytest.approx(COLOURS[4], abs=6)
    blank = gallery_image(moment, segments())  # without the video: a card that says so, nothing decoded
    assert image_top(blank) > image_top(image)


def test_only_the_moments_shown_get_a_card():
    moments = [Moment(0.0, 12.0, 0.9), Moment(20.0, 24.0, 0.7), Moment(12.0, 16.0, 0.05)]  # the last: under 0.09
    assert gallery_image(moments, segments()).width == 2 * MARGIN + 2 * CARD_WIDTH + GAP  # two cards, not three


def test_no_moments_is_refused():
    with pytest.raises(ValueError, match="no moments"):
        gallery_image([], segments())
