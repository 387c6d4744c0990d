import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempo.errors import VideoError
from tempo.video import VideoInfo, open_video, sample_frame_indices, sampled_fps, segment_ranges
from tempo.video.patches import fit_long_edge


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 500_000), st.floats(1.0, 240.0), st.integers(1, 4096))
def test_sampling_rule(total, native_fps, max_frames):
    indices = sample_frame_indices(total, native_fps, 2.0, 4, max_frames)
    if total <= 1:
        assert indices == [0]
        return
    expected = min(max(max(1, round(total / native_fps * 2.0)), 4), max_frames)
    assert len(indices) == expected
    assert indices == sorted(indices)
    assert all(0 <= i < total for i in indices)
    if expected > 1:
        assert indices[0] == 0 and indices[-1] == total - 1
    else:
        assert indices == [total - 1]


def test_sampling_examples():
    # very short videos are up-sampled to 4 frames with repeats (half-to-even rounding)
    assert sample_frame_indices(3, 10.0) == [0, 1, 1, 2]
    # a 40 s video at 30 fps -> 80 frames, evenly spaced
    indices = sample_frame_indices(1200, 30.0)
    assert len(indices) == 80 and indices[:3] == [0, 15, 30]
    # an hour is capped at max_frames
    assert len(sample_frame_indices(108_000, 30.0, max_frames=1024)) == 1024


def test_real_fps_and_segments():
    info = VideoInfo("x.mp4", 132, 25.0, 1280, 720, "decord")
    assert sampled_fps(11, info) == pytest.approx(11 / 5.28)
    windows = segment_ranges(17, 8)
    assert [len(w) for w in windows] == [8, 8, 1]
    assert [w.start for w in windows] == [0, 8, 16]


@pytest.mark.parametrize("size,expected", [((1280, 720), (512, 288)), ((640, 272), (512, 224)),
                                           ((320, 240), (320, 240)), ((4000, 16), (512, 16)), ((1, 2000), (16, 512))])
def test_fit_long_edge(size, expected):
    frames = np.zeros((2, size[1], size[0], 3), dtype=np.uint8)
    assert fit_long_edge(frames, 512).shape == (2, expected[1], expected[0], 3)


def test_open_video_errors(tmp_path):
    with pytest.raises(VideoError, match="not found"):
        open_video(tmp_path / "missing.mp4")
    with pytest.raises(VideoError, match="directory"):
        open_video(tmp_path)
    (tmp_path / "empty.mp4").write_bytes(b"")
    with pytest.raises(VideoError, match="empty"):
        open_video(tmp_path / "empty.mp4")
    (tmp_path / "notes.mp4").write_text("this is not a video\n" * 100)
    with pytest.raises(VideoError, match="not a readable video"):
        open_video(tmp_path / "notes.mp4")


def test_decord_and_pyav_agree_on_sampling(fixtures):
    from tempo.video import DecordReader, PyAVReader

    path = str(fixtures / "videos" / "bikes.mp4")
    decord_reader, pyav_reader = DecordReader(path), PyAVReader(path)
    assert decord_reader.info.total_frames == pyav_reader.info.total_frames == 250
    assert decord_reader.info.native_fps == pyav_reader.info.native_fps == 25.0
    indices = sample_frame_indices(250, 25.0)
    a = np.stack(list(decord_reader.read(indices)))
    b = np.stack(list(pyav_reader.read(indices)))
    assert a.shape == b.shape == (20, 272, 640, 3)
    # different YUV->RGB conversions: close, not identical
    assert np.abs(a.astype(int) - b.astype(int)).mean() < 3
