"""Long videos open without reading the whole file first: frame times read only as far as asked (FrameTimes), the
sparse reader opened straight away, and intra frames sought between samples, with the exact reader's frames."""

from dataclasses import dataclass

import numpy as np
import pytest

from tempo.config import SamplingConfig
from tempo.video import PyAVReader, SparseReader, open_video, uniform_plan
from tempo.video.frame_times import FrameTimes, WrongReader


@dataclass
class Packet:
    pts: int | None
    dts: int | None
    size: int = 100
    is_keyframe: bool = False


def b_frame_packets(frames: int, gop: int = 8) -> list[Packet]:
    """Packets of a stream with B-frames: each P-frame decoded before the two frames shown ahead of it."""
    order = []
    for start in range(0, frames, 3):
        group = list(range(start, min(start + 3, frames)))
        order += [group[-1]] + group[:-1]
    return [Packet(pts, dts - 2, is_keyframe=pts % gop == 0) for dts, pts in enumerate(order)]


def test_frame_times_are_the_sorted_times_read_only_as_far_as_asked():
    packets = b_frame_packets(60)
    read = []
    times = FrameTimes((read.append(p) or p for p in packets), 60)
    assert times.upto(9)[:10] == list(range(10))
    assert len(read) < 20  # not the whole stream
    assert times.intra_frame_at_or_before(9) == 8 and times.intra_frame_at_or_before(7) == 0
    assert times.upto(59) == list(range(60)) and len(read) == 60


@pytest.mark.parametrize("fault, packets", [
    ("two frames one time", [Packet(0, 0), Packet(1, 1), Packet(1, 1), Packet(3, 3)]),
    ("decoding times going backwards", [Packet(0, 0), Packet(2, 2), Packet(1, 1), Packet(3, 3)]),
    ("a frame shown before it is decoded", [Packet(0, 0), Packet(1, 2), Packet(3, 3), Packet(4, 4)]),
    ("fewer frames than the header says", [Packet(0, 0), Packet(1, 1), Packet(2, 2)]),
])
def test_frame_times_refuse_a_stream_whose_times_do_not_identify_its_frames(fault, packets):
    with pytest.raises(WrongReader):
        FrameTimes(iter(packets), 4).upto(3)


@pytest.fixture(scope="module")
def long_video(fixtures):
    return str(fixtures / "videos" / "long_6min_160x120.mp4")


def test_a_long_video_opens_with_the_sparse_reader_as_decord_counts_it(long_video):
    from tempo.video import DecordReader

    reader, decord = open_video(long_video), DecordReader(long_video)
    assert isinstance(reader, SparseReader)
    info, theirs = reader.info, decord.info
    assert (info.total_frames, info.native_fps, info.width, info.height) == \
           (theirs.total_frames, theirs.native_fps, theirs.width, theirs.height)
    plan = uniform_plan(info, SamplingConfig())
    first = [plan.frame_indices[i] for i in plan.segments[0]]
    list(reader.read(first))
    assert len(reader.times.pts) < info.total_frames // 4  # the first segment read the times of its own frames


def test_short_videos_still_open_with_decord(fixtures):
    assert not isinstance(open_video(fixtures / "videos" / "bikes.mp4"), SparseReader)


def test_sparse_reader_seeks_between_far_samples_and_returns_the_exact_frames(long_video):
    sparse, exact = SparseReader(long_video), PyAVReader(long_video)
    total = exact.info.total_frames
    seeks = []
    original = sparse._seek_ahead

    def counted(*args):
        sought = original(*args)
        seeks.append(sought)
        return sought

    sparse._seek_ahead = counted
    indices = sorted([*range(0, total, 37), 5, 5, 6, total - 1])  # far apart, adjacent, repeated, the last
    ours, theirs = list(sparse.read(indices)), list(exact.read(indices))
    assert any(seeks) and not all(seeks)  # it seeks ahead across intra frames, and decodes on within one
    assert len(ours) == len(theirs) == len(indices)
    assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))
