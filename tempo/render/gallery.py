"""A run's highlights as one picture to take away: each moment a person is shown, with its key frame (the sharpest
frame of its most relevant segment) and its facts as `moments.shown` words them, under the question. Made from the
frames the run kept; only a moment the run kept no frame of has one decoded."""

from __future__ import annotations

import functools
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..events import Segment
from ..moments import Moment, Shown, shown
from ..times import clock
from ..video.clip import frame_at
from .style import INDIGO, INK, MUTED_TEXT, ORANGE

CARD_WIDTH = 400  # each moment's frame is shown this wide (px)
GAP, MARGIN, RADIUS = 20, 32, 12
PAPER, CARD, TRACK = "#f8fafc", "#ffffff", "#e2e8f0"
# DejaVu ships with Debian and most Linux systems; elsewhere Pillow's own font stands in.
FONT_FILES = {False: "DejaVuSans.ttf", True: "DejaVuSans-Bold.ttf"}


@dataclass(frozen=True)
class Highlight:
    """One moment as the gallery shows it: the moment worded, and its key frame (RGB) with the frame's time."""

    shown: Shown
    frame: np.ndarray | None
    frame_time: float | None


def highlights(moments: Sequence[Moment], segments: Sequence[Segment],
               source: str | os.PathLike | None = None) -> list[Highlight]:
    """Each moment shown, with the key frame of its most relevant segment that kept one; where none did (a
    moment outside a zoomed window's segments), the frame in the middle of its most relevant segment, read from
    `source` if given."""
    found = []
    for worded in shown(moments):
        moment = worded.moment
        inside = [s for s in segments if moment.start - 1e-6 <= s.start and s.end <= moment.end + 1e-6]
        framed = [s for s in inside if s.frame is not None]
        best = max(framed or inside, key=lambda s: (s.relevance or 0.0, -s.index), default=None)
        if best is not None and best.frame is not None:
            found.append(Highlight(worded, best.frame,
                                   best.frame_time if best.frame_time is not None else best.start))
            continue
        seconds = (best.start + best.end) / 2 if best else (moment.start + moment.end) / 2
        found.append(Highlight(worded, frame_at(source, seconds) if source is not None else None, seconds))
    return found


@functools.cache
def font(size: int, bold: bool = False) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.truetype(FONT_FILES[bold], size)
    except OSError:
        return ImageFont.load_default(size)


def gallery_image(moments: Sequence[Moment], segments: Sequence[Segment], question: str = "",
                  source: str | os.PathLike | None = None) -> Image.Image:
    """The moments' key frames as one RGB image: a grid of cards (rank, key frame, facts, score bar) under a title
    with the question and the video's name; `source`, the video, gives the frames the segments lack."""
    if not moments:
        raise ValueError("there are no moments to show: the run found none (or compression was off)")
    cards = highlights(moments, segments, source)
    video = Path(source).name if source is not None else ""
    frames = [h.frame for h in cards if h.frame is not None]
    aspect = frames[0].shape[0] / frames[0].shape[1] if frames else 9 / 16
    image_height = round(CARD_WIDTH * min(max(aspect, 0.4), 1.0))
    columns = {1: 1, 2: 2, 4: 2}.get(len(cards), 3)
    rows = -(-len(cards) // columns)
    card_height = image_height + 86
    title_lines = textwrap.wrap(question.strip(), 70)[:3] if question.strip() else []
    header = MARGIN + 50 + 30 * len(title_lines) + (14 if title_lines else 0)
    width = 2 * MARGIN + columns * CARD_WIDTH + (columns - 1) * GAP
    height = header + rows * card_height + (rows - 1) * GAP + MARGIN + 28
    canvas = Image.new("RGB", (width, height), PAPER)
    draw = ImageDraw.Draw(canvas)
    draw.text((MARGIN, MARGIN - 4), "Highlights", font=font(28, True), fill=INK)
    named = f"{len(cards)} moment{'s' * (len(cards) != 1)}" + (f" · {video}" if video else "")
    draw.text((MARGIN + draw.textlength("Highlights", font=font(28, True)) + 14, MARGIN + 6), named,
              font=font(16), fill=MUTED_TEXT)
    for i, line in enumerate(title_lines):
        draw.text((MARGIN, MARGIN + 40 + 30 * i), ("“" if i == 0 else " ") + line
                  + ("”" if i == len(title_lines) - 1 else ""), font=font(20), fill=INK)
    for index, highlight in enumerate(cards):
        x = MARGIN + (index % columns) * (CARD_WIDTH + GAP)
        y = header + (index // columns) * (card_height + GAP)
        card(canvas, draw, highlight, x, y, image_height)
    draw.text((MARGIN, height - MARGIN + 2), "Tempo · ranked by the compressor's relevance to the question",
              font=font(13), fill=MUTED_TEXT)
    return canvas


def card(canvas: Image.Image, draw: ImageDraw.ImageDraw, highlight: Highlight, x: int, y: int,
         image_height: int) -> None:
    """One moment's card at (x, y): its key frame with the rank on it, then its span and details, score and bar."""
    height = image_height + 86
    draw.rounded_rectangle((x + 2, y + 3, x + CARD_WIDTH + 2, y + height + 3), RADIUS, fill=TRACK)  # a soft shadow
    draw.rounded_rectangle((x, y, x + CARD_WIDTH, y + height), RADIUS, fill=CARD)
    if highlight.frame is not None:
        picture = Image.fromarray(highlight.frame).convert("RGB")
        scale = min(CARD_WIDTH / picture.width, image_height / picture.height)  # up or down, to fill the card
        picture = picture.resize((max(1, round(picture.width * scale)), max(1, round(picture.height * scale))),
                                 Image.Resampling.LANCZOS)
        box = Image.new("RGB", (CARD_WIDTH, image_height), "#0f172a")
        box.paste(picture, ((CARD_WIDTH - picture.width) // 2, (image_height - picture.height) // 2))
        mask = Image.new("L", box.size, 0)
        ImageDraw.Draw(mask).rounded_rectangle((0, 0, CARD_WIDTH - 1, image_height + RADIUS), RADIUS, fill=255)
        canvas.paste(box, (x, y), mask)
    else:
        draw.rounded_rectangle((x, y, x + CARD_WIDTH, y + image_height), RADIUS, fill=TRACK)
        draw.text((x + CARD_WIDTH / 2, y + image_height / 2), "no key frame", font=font(16), fill=MUTED_TEXT,
                  anchor="mm")
    draw.ellipse((x + 12, y + 12, x + 52, y + 52), fill=INDIGO, outline="white", width=2)
    worded = highlight.shown
    draw.text((x + 32, y + 32), str(worded.rank), font=font(20, True), fill="white", anchor="mm")
    if highlight.frame_time is not None:
        stamp = clock(highlight.frame_time)
        tag = draw.textbbox((0, 0), stamp, font=font(14, True))
        right, top = x + CARD_WIDTH - 12, y + image_height - 12 - (tag[3] - tag[1]) - 8
        draw.rounded_rectangle((right - (tag[2] - tag[0]) - 16, top, right, y + image_height - 12), 6,
                               fill="#0f172acc")
        draw.text((right - 8, top + 4), stamp, font=font(14, True), fill="white", anchor="ra")
    text_y = y + image_height + 14
    draw.text((x + 16, text_y), worded.when, font=font(20, True), fill=INK)
    draw.text((x + CARD_WIDTH - 16, text_y + 4), " · ".join(worded.details), font=font(15), fill=MUTED_TEXT,
              anchor="ra")
    bar_y, bar_left, bar_right = text_y + 42, x + 16, x + CARD_WIDTH - 110
    draw.rounded_rectangle((bar_left, bar_y, bar_right, bar_y + 8), 4, fill=TRACK)
    share = max(0.0, min(1.0, worded.share))
    draw.rounded_rectangle((bar_left, bar_y, bar_left + max(8, round((bar_right - bar_left) * share)), bar_y + 8), 4,
                           fill=ORANGE)
    draw.text((x + CARD_WIDTH - 16, bar_y + 4), f"score {worded.value}", font=font(15), fill=MUTED_TEXT,
              anchor="rm")


def write_gallery(moments: Sequence[Moment], segments: Sequence[Segment], path: str | os.PathLike,
                  question: str = "", source: str | os.PathLike | None = None) -> Path:
    """`gallery_image` saved as a PNG at `path`; returns the path."""
    path = Path(path)
    gallery_image(moments, segments, question, source).save(path, format="PNG")
    return path
