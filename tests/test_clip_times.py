"""A clip's time handling (`tempo.video.clip`) on made-up packets, without a video: which frames a span keeps, where
the clip ends, whether its packets can be copied, and how times move to start at zero; each worked out by hand."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import pytest

from tempo.errors import InputError
from tempo.video.clip import Clip, Cut, copy_audio, plan_cut, shift, stream_origin


def packet(pts, dts=None, key=False, size=100):
    return SimpleNamespace(pts=pts, dts=dts, is_keyframe=key, size=size)


def source_of(packets):
    return SimpleNamespace(demux=lambda stream: iter(packets))


# 3 s at 10 fps from pts 1000 (time base 1/10 s): a key frame every second, decoded in presentation order
STREAM = SimpleNamespace(start_time=1000, time_base=Fraction(1, 10), average_rate=Fraction(10))
PACKETS = [packet(1000 + i, key=i % 10 == 0) for i in range(30)]


def test_a_span_from_a_key_frame_is_copied():
    # 1-2 s: pts 1010 (a key frame) to 1019; the clip ends where the next frame starts, 1020
    assert plan_cut(source_of(PACKETS), STREAM, 1.0, 2.0, "v") == Cut(1010, 1019, 1020, 10, True, 1010)


def test_a_span_between_key_frames_is_encoded_from_the_key_frame_before():
    # 1.5-2.5 s: pts 1015 to 1024, decoding starts at the key frame 1010
    assert plan_cut(source_of(PACKETS), STREAM, 1.5, 2.5, "v") == Cut(1015, 1024, 1025, 10, False, 1010)


def test_a_frame_a_millisecond_early_counts_as_at_the_time():
    # 0.9995 s is within the slack (1 ms) of pts 1010 (1.0 s): 1010 is the first; 1.9995 s ends before 1020
    assert plan_cut(source_of(PACKETS), STREAM, 1.0005, 2.0005, "v") == Cut(1010, 1019, 1020, 10, True, 1010)
    assert plan_cut(source_of(PACKETS), STREAM, 1.002, 2.002, "v").first_pts == 1011


def test_the_last_frame_ends_a_frame_after_it():
    # 2.5 s to past the end: pts 1025 to 1029; no frame after, so the end is 1029 + one frame (1 at 10 fps)
    assert plan_cut(source_of(PACKETS), STREAM, 2.5, 9.0, "v") == Cut(1025, 1029, 1030, 5, False, 1020)
    # without a stated rate, 25 fps: one frame is 1 / 25 s = 40 in a 1/1000 time base
    stream = SimpleNamespace(start_time=None, time_base=Fraction(1, 1000), average_rate=None)
    packets = [packet(0, key=True), packet(40), packet(80)]
    assert plan_cut(source_of(packets), stream, 0.05, 1.0, "v") == Cut(80, 80, 120, 1, False, 0)


def test_frames_decoded_out_of_order_are_not_copied():
    # B-frames: 1013 is decoded before 1011 and 1012, so copying 1010-1012 from 1010 would take 1013 too
    packets = [packet(1010, key=True), packet(1013), packet(1011), packet(1012), packet(1014)]
    assert plan_cut(source_of(packets), STREAM, 1.0, 1.3, "v") == Cut(1010, 1012, 1013, 3, False, 1010)
    # the same frames in order are copied
    ordered = sorted(packets, key=lambda p: p.pts)
    assert plan_cut(source_of(ordered), STREAM, 1.0, 1.3, "v").copied


def test_empty_packets_and_a_span_without_frames():
    # packets without a time or without data are no frames: the first kept is 1012, decoded from the first packet
    packets = [packet(None, key=True), packet(1010, size=0, key=True), packet(1011, key=True), packet(1012),
               packet(1013)]
    assert plan_cut(source_of(packets), STREAM, 1.15, 1.3, "v") == Cut(1012, 1012, 1013, 1, False, 1011)
    # no key frame at or before the first kept: decoding starts at the earliest packet
    late = [packet(1012), packet(1011), packet(1015, key=True)]
    assert plan_cut(source_of(late), STREAM, 1.1, 1.3, "v").seek_pts == 1011
    with pytest.raises(InputError, match=r"^v has no frame between 00:10 and 00:11\.$"):
        plan_cut(source_of(PACKETS), STREAM, 10.0, 11.0, "v")


def test_times_move_to_start_at_zero():
    assert stream_origin(SimpleNamespace(start_time=None)) == 0 and stream_origin(STREAM) == 1000
    assert Clip(Path("c.mp4"), 1.5, 4.0, 25, True).duration == 2.5
    moved = SimpleNamespace(pts=1015, dts=1013, stream=None)
    shift(moved, 1010, "out")
    assert (moved.pts, moved.dts, moved.stream) == (5, 3, "out")
    undated = SimpleNamespace(pts=1015, dts=None, stream=None)
    shift(undated, 1010, "out")
    assert (undated.pts, undated.dts) == (5, None)


def audio_packet(pts, start_time=500):
    # audio at 1/1000 s from pts 500: pts 1500 is 1 s into the video
    return SimpleNamespace(pts=pts, dts=pts, time_base=Fraction(1, 1000), stream=SimpleNamespace(start_time=start_time))


def test_audio_comes_along_inside_the_clip_s_span():
    """The clip 1.0-2.0 s (pts 1010 to 1020): audio from 0.999 s (the slack) to before 2.0 s is muxed, moved so
    that 1.0 s is its zero; whether a packet came before the end says when to stop."""
    cut = Cut(1010, 1019, 1020, 10, True, 1010)
    muxed = []
    output = SimpleNamespace(mux=muxed.append)
    for pts, inside, before_end in ((1499, True, True), (1498, False, True), (1500, True, True), (2499, True, True),
                                    (2500, False, False)):
        sound = audio_packet(pts)
        assert copy_audio(sound, STREAM, cut, "audio", output) is before_end, pts
        assert (muxed[-1] is sound) is inside, pts
        if inside:
            assert (sound.pts, sound.stream) == (pts - 1500, "audio")  # 500 + round(1.0 / 0.001)
    # no start time: counted from 0, so pts 999 is 0.999 s, inside by the slack, and muxed 1 before the zero
    silent_start = audio_packet(999, start_time=None)
    copy_audio(silent_start, STREAM, cut, "audio", output)
    assert muxed[-1] is silent_start and silent_start.pts == -1
