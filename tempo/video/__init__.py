"""Video file -> the frames Tempo samples: the sampling plan, the readers that decode it, streaming on worker
threads, and the released resize chain into the compressor's patch rows."""

from .reader_choice import decode_workers, is_long, open_sparse, open_video, plan_sampling
from .readers import DecordReader, FrameReader, PyAVReader
from .sampling import (
                      SamplingPlan,
                      VideoInfo,
                      fast_seek_plan,
                      long_edge_size,
                      sample_frame_indices,
                      sampled_fps,
                      segment_ranges,
                      uniform_plan,
)
from .skipping_readers import IntraFrameReader, SparseReader

__all__ = [
    "DecordReader", "FrameReader", "IntraFrameReader", "PyAVReader", "SparseReader", "decode_workers", "is_long",
    "open_sparse", "open_video", "plan_sampling",
    "SamplingPlan", "VideoInfo", "fast_seek_plan", "long_edge_size", "sample_frame_indices", "sampled_fps",
    "segment_ranges", "uniform_plan",
]
