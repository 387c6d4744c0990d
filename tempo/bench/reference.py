"""The benchmark's reference: the released pipeline's steps, every sampled frame decoded before one batch."""

from __future__ import annotations

import os
import time

import numpy as np
import torch
from PIL import Image

from ..config import RunConfig, SamplingConfig
from ..engine.steps import compress_batch, respond
from ..events import Compression, Finished
from ..model import TempoModel
from ..timing import Timer
from ..video import SamplingPlan, VideoInfo, long_edge_size, open_video, uniform_plan
from ..video.patches import PatchGeometry, clip_size, frame_size, normalize, patchify, resize_frames
from ..video.segments import PreparedSegment, video_plan

NO_THUMBNAIL = np.zeros((1, 1, 3), np.uint8)


def reference_tensors(path: str, sampling: SamplingConfig, geometry: PatchGeometry
                      ) -> tuple[torch.Tensor, list[tuple[int, int, int]], SamplingPlan, VideoInfo]:
    """The released preprocessing: decord get_batch of every sampled frame at full size (with the decoding
    threads infer.py picks), PIL resizing frame by frame, then every segment on its own through qwen-vl-utils'
    resizes and the processor into float pixel values, concatenated for one compressor batch."""
    import decord

    cores = len(os.sched_getaffinity(0))
    reader = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=min(max(1, cores - 1), 16))
    info = VideoInfo(path, len(reader), reader.get_avg_fps(), 0, 0, "decord")
    plan = uniform_plan(info, sampling)
    frames = reader.get_batch(plan.frame_indices).asnumpy()
    long_edge = long_edge_size(frames.shape[2], frames.shape[1], sampling.long_edge)
    images = [Image.fromarray(frame).resize(long_edge, resample=Image.Resampling.BICUBIC) for frame in frames]
    snapped = frame_size(long_edge[1], long_edge[0], geometry)[::-1]
    pixel_values, grids = [], []
    for window in plan.segments:
        clip = [images[i] for i in window]
        clip = [image.resize(snapped, resample=Image.Resampling.BICUBIC) for image in
                (clip * 2 if len(clip) == 1 else clip)]
        clip += clip[-1:] * (len(clip) % 2)
        video = torch.stack([torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1) for image in clip])
        size = clip_size(video.shape[2], video.shape[3], len(clip), geometry)
        rows, grid = patchify(resize_frames(video, size).float(), geometry)  # the release keeps floats from here
        pixel_values.append(normalize(rows, geometry))
        grids.append(grid)
    return torch.cat(pixel_values), grids, plan, info  # pixel values float32 [rows, 3*tp*p*p]


def reference_answer(model: TempoModel, path: str, question: str, config: RunConfig) -> dict:
    """The released flow end to end: nothing can be shown before every segment went through one batch."""
    started = time.perf_counter()
    pixel_values, grids, plan, info = reference_tensors(path, config.sampling, model.geometry)
    with torch.inference_mode():
        vision = model.compressor.encode_vision(pixel_values, grids)
    del pixel_values
    segments = [PreparedSegment(i, None, features.grid, NO_THUMBNAIL, vision=features)
                for i, features in enumerate(vision)]
    memories, relevance = compress_batch(model, segments, question, plan, Timer())
    first_result = time.perf_counter() - started
    probed, _ = video_plan(open_video(path), config.sampling)
    compression = Compression(question, probed, plan, list(memories), relevance)
    finished = list(respond(model, compression, config, Timer()))[-1]
    assert isinstance(finished, Finished)  # a response ends with its Finished event
    return {"first_segment_s": first_result, "total_s": time.perf_counter() - started, "answer": finished.answer,
            "tokens": [s.tokens for s in finished.segments]}
