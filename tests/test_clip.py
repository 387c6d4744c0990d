"""A moment's clip: copied where its key frames allow, encoded again where they do not, its first and last frames the
moment's either way, its length capped, and only the server's own files cut."""

from __future__ import annotations

import av
import numpy as np
import pytest

import tempo
from tempo.errors import InputError
from tempo.video.clip import cut_clip

FPS = 10
FRAMES = 60  # 6 s
GOP = 10  # a key frame every second
LEVEL, STEP = 20, 3  # frame i is grey at LEVEL + STEP * i: its index can be read off a decoded clip


def shade(index: int) -> int:
    return LEVEL + STEP * index


@pytest.fixture(scope="module")
def numbered(tmp_path_factory):
    """6 s of H.264 at 10 fps, key frames every second and B-frames between them, each frame's grey its index."""
    path = tmp_path_factory.mktemp("clips") / "numbered.mp4"
    with av.open(str(path), "w") as output:
        stream = output.add_stream("libx264", rate=FPS, options={
            "x264-params": f"keyint={GOP}:min-keyint={GOP}:scenecut=0:bframes=2", "crf": "10"})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(FRAMES):
            picture = np.full((48, 64, 3), shade(index), np.uint8)
            output.mux(stream.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")))
        output.mux(stream.encode(None))
    return path


def indices(path) -> list[int]:
    """The source frame each of a clip's frames is, read off its grey."""
    with av.open(str(path)) as clip:
        return [round((frame.to_ndarray(format="rgb24").mean() - LEVEL) / STEP) for frame in clip.decode(video=0)]


def clip_seconds(path) -> float:
    with av.open(str(path)) as clip:
        return clip.duration / av.time_base


def test_a_moment_that_starts_and_ends_on_key_frames_is_copied_as_it_is(numbered, tmp_path):
    clip = cut_clip(numbered, 1.0, 3.0, tmp_path / "copied.mp4")
    assert clip.copied
    assert indices(clip.path) == list(range(10, 30))
    assert (clip.start, clip.end, clip.frames) == (pytest.approx(1.0), pytest.approx(3.0), 20)
    assert clip_seconds(clip.path) == pytest.approx(2.0, abs=1 / FPS)


@pytest.mark.parametrize("start, end, first, last", [(1.35, 2.55, 14, 25), (0.0, 1.55, 0, 15), (4.3, 6.0, 43, 59)])
def test_a_moment_between_key_frames_is_encoded_again_to_the_frame(numbered, tmp_path, start, end, first, last):
    clip = cut_clip(numbered, start, end, tmp_path / "encoded.mp4")
    assert not clip.copied
    assert indices(clip.path) == list(range(first, last + 1))
    assert clip.frames == last - first + 1
    assert clip_seconds(clip.path) == pytest.approx((last + 1 - first) / FPS, abs=1 / FPS)


def test_a_clip_past_the_cap_is_refused_before_anything_is_read(tmp_path):
    limits = tempo.Limits(max_clip_s=2.0)
    with pytest.raises(InputError, match="up to 2 s"):
        cut_clip(tmp_path / "not-even-there.mp4", 1.0, 3.5, tmp_path / "long.mp4", limits)


def test_a_span_without_frames_is_refused(numbered, tmp_path):
    with pytest.raises(InputError, match="no frame between"):
        cut_clip(numbered, 7.0, 9.0, tmp_path / "after.mp4")
    with pytest.raises(InputError, match="start before its end"):
        cut_clip(numbered, 3.0, 2.0, tmp_path / "backwards.mp4")


def test_audio_comes_along(tmp_path):
    from media import ffmpeg

    source = tmp_path / "talk.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc=s=64x48:r=10:d=4", "-f", "lavfi", "-i", "sine=d=4", "-c:v", "libx264",
           "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-g", "10", "-c:a", "aac", "-shortest", str(source))
    clip = cut_clip(source, 1.25, 2.75, tmp_path / "talk-clip.mp4")
    with av.open(str(clip.path)) as output:
        audio = sum(frame.samples for frame in output.decode(audio=0)) / output.streams.audio[0].rate
    assert audio == pytest.approx(1.5, abs=0.05)


@pytest.fixture(scope="module")
def server():
    from demo.server import Server

    return Server(tempo.from_pretrained(device="cpu"), tempo.Limits(max_clip_s=20.0))


def test_the_server_cuts_only_its_own_files(server, numbered, tmp_path, monkeypatch):
    from demo.server import EXAMPLES_FILE, NOT_UPLOADED

    def never(*args, **kwargs):
        raise AssertionError("a file that was not uploaded was opened")

    monkeypatch.setattr("demo.server.cut_clip", never)
    monkeypatch.setattr("demo.server.check_file", never)
    for path in (str(numbered), "/etc/passwd", f"{server.uploads}/../../etc/passwd", {"path": str(numbered)}):
        with pytest.raises(InputError, match=NOT_UPLOADED.split(":")[0]):
            server.clip(path, 0.0, 1.0, tmp_path)
    monkeypatch.undo()
    example = EXAMPLES_FILE.parent / "synthetic-900001-2min.mp4"
    clip = server.clip(str(example), "1:00", "64", tmp_path)  # an example may be cut, times as m:ss or seconds
    assert (clip.start, clip.end) == (pytest.approx(60.0), pytest.approx(64.0))
    with pytest.raises(InputError, match="up to 20 s"):  # the server's cap
        server.clip(str(example), 0, 30, tmp_path)
    with pytest.raises(InputError, match="start and end"):
        server.clip(str(example), None, 30, tmp_path)


@pytest.mark.parametrize("start, end, says", [
    (0, "inf", "The clip's end must be at most 24:00:00"), (0, "1e309", "The clip's end must be at most 24:00:00"),
    ("1" * 1000, 5, "The clip's start must be at most 24:00:00"), (0, float("inf"), "The clip's end must be at most"),
    ("-5", 5, "The clip's start must be 0 or later"), ("nan", 5, "The clip's start must be a time such as"),
    (5, 5, "A clip needs a start before its end")])
def test_a_clip_s_times_are_refused_with_the_sentence_that_fits(server, tmp_path, monkeypatch, start, end, says):
    """What a new user tried on /clip: each refused with what was wrong, none as an unexpected error."""
    from demo.server import EXAMPLES_FILE

    monkeypatch.setattr("demo.server.check_file", lambda *args: None)  # refused before the file is read
    example = EXAMPLES_FILE.parent / "synthetic-900001-2min.mp4"
    with pytest.raises(InputError, match=f"^{says}"):
        server.clip(str(example), start, end, tmp_path)
