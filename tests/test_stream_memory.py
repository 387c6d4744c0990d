"""What a decoding worker holds and when it starts: each frame reduced as it is decoded (never a segment's worth of
full-size frames), the first segment decoded before the other workers start, and thumbnails that own their pixels."""

import threading
import time
import weakref

import numpy as np

from tempo.config import SamplingConfig
from tempo.timing import Timer
from tempo.video import VideoInfo, uniform_plan
from tempo.video.patches import PatchGeometry
from tempo.video.segments import prepare_segment
from tempo.video.stream import segment_stream

PLAN = uniform_plan(VideoInfo("fake.mp4", 3000, 10.0, 64, 48, "fake"), SamplingConfig(max_frames=64))


class Frames:
    """A reader of full-size frames that remembers them (weakly), and what happened when."""

    shareable = True

    def __init__(self, log: list, name: str = "reader"):
        self.log, self.name, self.decoded = log, name, []

    def read(self, indices):
        for i in indices:
            frame = np.full((480, 640, 3), i % 256, np.uint8)
            self.decoded.append(weakref.ref(frame))
            self.log.append(f"{self.name} decoded {i}")
            yield frame

    def close(self):
        pass


def test_each_frame_is_reduced_as_it_is_decoded():
    reader, held = Frames([]), []

    def prepare(index, frames):
        held.append(sum(ref() is not None for ref in reader.decoded))  # full-size frames still alive
        return index, [f.shape for f in frames]

    out = list(segment_stream(PLAN, [lambda: reader], prepare, reduce=lambda frame: frame[::8, ::8].copy()))
    assert [i for i, _ in out] == list(range(len(PLAN.segments)))
    assert all(shapes == [(60, 80, 3)] * len(PLAN.segments[i]) for i, shapes in out)
    assert max(held) <= 1


def test_the_first_segment_is_out_before_another_worker_starts():
    log = []

    def opener(name):
        def open_reader():
            log.append(f"{name} opened")
            return Frames(log, name)
        return open_reader

    def prepare(index, frames):
        if index == 0:
            time.sleep(0.2)  # a slow first segment: another worker started at once would be decoding by now
        log.append(f"segment {index} out")
        return index

    stream = segment_stream(PLAN, [opener("first"), opener("second")], prepare, chunk=2)
    assert next(stream) == 0
    stream.close()
    assert "second opened" not in log[:log.index("segment 0 out")]
    assert not [t for t in threading.enumerate() if t.name.startswith("tempo-decode")]


def test_a_thumbnail_holds_its_own_pixels_not_its_segments():
    frames = [np.random.default_rng(i).integers(0, 256, (120, 160, 3), np.uint8) for i in range(8)]
    segment = prepare_segment(0, frames, SamplingConfig(), PatchGeometry(), Timer())
    owner = segment.thumbnail if segment.thumbnail.base is None else segment.thumbnail.base
    assert owner.nbytes == segment.thumbnail.nbytes == 120 * 160 * 3
    assert np.array_equal(segment.thumbnail, frames[segment.shown])
