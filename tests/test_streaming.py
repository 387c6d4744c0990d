import threading

import numpy as np
import pytest
import torch

import tempo
from tempo.config import SamplingConfig
from tempo.errors import VideoError
from tempo.timing import Timer
from tempo.video import IntraFrameReader, SparseReader, long_edge_size, open_video, plan_sampling, uniform_plan
from tempo.video.patches import fit_long_edge
from tempo.video.segments import prepare_segment
from tempo.video.stream import segment_stream


@pytest.fixture(scope="module")
def shapes(fixtures):
    return str(fixtures / "videos" / "shapes_40s_320x240.mp4")


def prepared(video, plan, workers, chunk=2):
    from tempo.video.patches import PatchGeometry

    prepare = lambda index, frames: prepare_segment(index, frames, SamplingConfig(), PatchGeometry(), Timer())
    return list(segment_stream(plan, [lambda: open_video(video)] * workers, prepare, chunk=chunk))


def test_parallel_decoding_gives_the_same_segments_in_order(shapes):
    plan = uniform_plan(open_video(shapes).info, SamplingConfig())
    one, three = prepared(shapes, plan, 1), prepared(shapes, plan, 3)
    assert [s.index for s in three] == list(range(len(plan.segments))) == [s.index for s in one]
    for a, b in zip(one, three):
        assert a.grid == b.grid and torch.equal(a.pixel_rows, b.pixel_rows)


def test_leaving_early_stops_the_workers(shapes):
    plan = uniform_plan(open_video(shapes).info, SamplingConfig())
    before = threading.active_count()
    stream = segment_stream(plan, [lambda: open_video(shapes)] * 2, lambda i, frames: i, chunk=1)
    assert next(stream) == 0
    stream.close()
    assert threading.active_count() == before


def test_a_decoder_failing_midway_is_a_clear_video_error(shapes):
    plan = uniform_plan(open_video(shapes).info, SamplingConfig())

    class Failing:
        def __init__(self):
            self.inner = open_video(shapes)
            self.info = self.inner.info
            self.decoded = 0

        def read(self, indices):
            for frame in self.inner.read(indices):
                self.decoded += 1
                if self.decoded == 12:
                    raise RuntimeError("corrupt packet")
                yield frame

        def close(self):
            self.inner.close()

    stream = segment_stream(plan, [Failing], lambda i, frames: i, chunk=1)
    assert next(stream) == 0
    with pytest.raises(VideoError, match=r"^The video is damaged: decoding failed .* \(segment 2 of ") as error:
        list(stream)
    assert "corrupt packet" not in str(error.value)  # the decoder's own words go to the log only


def test_a_reader_that_runs_out_of_frames_is_a_damaged_video(shapes):
    """A reader that stops short without an error (a container promising more than it holds)."""
    plan = plan_sampling(open_video(shapes), SamplingConfig())

    class Short:
        shareable = True

        def read(self, indices):
            yield from (np.zeros((4, 4, 3), np.uint8) for _ in indices[:5])

        def close(self):
            pass

    with pytest.raises(VideoError, match=r"^The video is damaged: decoding failed 0 s into it \(segment 1 of "):
        list(segment_stream(plan, [Short], lambda i, frames: i))


def test_frames_wanted_past_the_last_decodable_one_repeat_it(hostile_media):
    """PyAV's reader, asked for frames after the last one it can decode, repeats that frame."""
    from tempo.video import PyAVReader

    reader = PyAVReader(str(hostile_media["two_seconds.mp4"]))  # 20 frames
    last = list(reader.read(list(range(20))))[-1]
    assert all(np.array_equal(frame, last) for frame in reader.read([30, 31]))


def test_fast_seek_uses_true_intra_frame_times(shapes, fixture_model):
    reader = open_video(shapes, fast_seek=True)
    assert isinstance(reader, IntraFrameReader)
    plan = plan_sampling(reader, SamplingConfig())
    assert plan.fast_seek and plan.frame_indices == sorted(set(plan.frame_indices))
    assert all(t in reader.intra_frame_times for t in plan.frame_times)
    assert plan.span(0)[0] == plan.frame_times[0]
    config = tempo.RunConfig(sampling=SamplingConfig(fast_seek=True), allocation=tempo.AllocationConfig(budget=64),
                             generation=tempo.GenerationConfig(max_new_tokens=4))
    finished = tempo.answer(fixture_model, shapes, "When does the red circle appear?", config)
    assert len(finished.segments) == len(plan.segments)
    assert finished.video.sampled_frames == len(plan.frame_indices) < 80  # fewer frames than exact sampling


def test_intra_frames_decode_like_the_exact_reader(shapes):
    exact, keys = open_video(shapes), open_video(shapes, fast_seek=True)
    fps = exact.info.native_fps
    last = len(keys.intra_frame_times) - 1
    # consecutive, repeated and far-apart intra frames: the reader continues, reuses and seeks
    ordinals = sorted([0, min(1, last), min(1, last), last // 2, last])
    frame_numbers = [round(keys.intra_frame_times[k] * fps) for k in ordinals]
    for a, b in zip(keys.read(ordinals), exact.read(frame_numbers)):
        assert np.array_equal(a, b)


def test_fast_seek_shrinks_intra_frames_as_it_decodes_them(shapes):
    exact, keys = open_video(shapes), open_video(shapes, fast_seek=True, long_edge=200)
    assert keys.frame_size == long_edge_size(exact.info.width, exact.info.height, 200) == (192, 144)
    last = len(keys.intra_frame_times) - 1
    frame_numbers = [round(keys.intra_frame_times[k] * exact.info.native_fps) for k in (0, last)]
    for ours, theirs in zip(keys.read([0, last]), exact.read(frame_numbers)):
        released = fit_long_edge(theirs[None], 200)[0].astype(np.float32)
        assert ours.shape == released.shape
        assert np.abs(ours - released).mean() < 1.5  # FFmpeg's bicubic, not PIL's: close, not identical


@pytest.mark.parametrize("name", ["shapes_40s_320x240.mp4", "bikes.mp4"])
def test_sparse_reader_returns_the_exact_readers_frames(fixtures, name):
    video = str(fixtures / "videos" / name)
    exact, sparse = open_video(video), SparseReader(video)
    last = exact.info.total_frames - 1
    indices = sorted([0, 3, 3, last // 3, last // 2, last - 1, last])  # far apart, repeated, adjacent
    ours, theirs = list(sparse.read(indices)), list(exact.read(indices))
    assert len(ours) == len(theirs) == len(indices)
    assert all(np.array_equal(a, b) for a, b in zip(ours, theirs))
