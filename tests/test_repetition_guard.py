"""The repetition guard: Tempo-Tiny never says a word three times in a row, even about clips from outside its
world (noise, a single colour, text cards)."""

import re

import imageio_ffmpeg
import numpy as np
import pytest
from PIL import Image, ImageDraw

import tempo
from tempo.model.decoder import looping_tokens

pytestmark = pytest.mark.slow

LOOP = re.compile(r"\b(\w+)(?:\W+\1\b){2}|([a-z]{2,})\2\2", re.IGNORECASE)
QUESTIONS = ("What colour is the star?", "What is happening in the video?", "When does the red circle appear?",
             "How many times does the blue square appear?", "Which shape appears most?")


def spells_word(token: int) -> bool:
    return token >= 10  # in these tests ids below 10 stand for digits and punctuation


def test_the_guard_bans_only_a_third_copy_of_words():
    assert looping_tokens([20, 20], spells_word) == {20}  # "red red" may not go on with "red"
    assert looping_tokens([30, 20, 30, 20], spells_word) == {30}  # nor "red star red star" with "red"
    assert looping_tokens([1, 1], spells_word) == set()  # "11" may become "111"
    assert looping_tokens([20, 21, 20], spells_word) == set()
    assert looping_tokens([20], spells_word) == set()
    long_run = [11, 12, 13, 14, 15, 16, 17, 18]
    assert looping_tokens(long_run * 2, spells_word) == {11}
    assert looping_tokens([10, *long_run, 19] * 2, spells_word) == set()  # longer than the guard watches


def off_world_clips(directory) -> list[str]:
    """Twenty 1-minute clips at 2 fps: noise, single colours, moving gradients and text cards."""
    rng = np.random.default_rng(0)
    clips = []
    for i in range(20):
        kind = ("noise", "colour", "gradient", "text")[i % 4]
        frames = []
        for t in range(120):
            if kind == "noise":
                frame = rng.integers(0, 256, (128, 160, 3), dtype=np.uint8)
            elif kind == "colour":
                frame = np.full((128, 160, 3), rng.integers(0, 256, 3), dtype=np.uint8)
            elif kind == "gradient":
                frame = np.repeat(np.linspace(0, 255, 160, dtype=np.uint8)[None, :, None], 128, 0).repeat(3, 2)
                frame = np.roll(frame, 8 * t + i, axis=1)
            else:
                card = Image.new("RGB", (160, 128), tuple(int(c) for c in rng.integers(0, 256, 3)))
                ImageDraw.Draw(card).text((10, 50), f"CHAPTER {i} orange orange", fill=(255, 255, 255))
                frame = np.asarray(card)
            frames.append(frame)
        path = str(directory / f"{kind}-{i}.mp4")
        writer = imageio_ffmpeg.write_frames(path, (160, 128), fps=2, codec="libx264", macro_block_size=2,
                                             output_params=["-crf", "28"])
        writer.send(None)
        for frame in frames:
            writer.send(np.ascontiguousarray(frame))
        writer.close()
        clips.append(path)
    return clips


def test_no_answer_about_clips_outside_its_world_loops(tmp_path):
    model = tempo.from_pretrained(device="cpu")
    assert model.spec.repetition_guard  # the embedded model's config turns the guard on
    config = tempo.RunConfig(generation=tempo.GenerationConfig(max_new_tokens=48))
    answers = [tempo.answer(model, clip, QUESTIONS[i % len(QUESTIONS)], config).answer
               for i, clip in enumerate(off_world_clips(tmp_path))]
    loops = [a for a in answers if LOOP.search(a)]
    assert not loops, loops
