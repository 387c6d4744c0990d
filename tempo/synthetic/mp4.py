"""A synthetic video encoded to an H.264 mp4 file, rendered a chunk of frames at a time."""

from __future__ import annotations

import logging

import numpy as np

from .world import SyntheticVideo

log = logging.getLogger(__name__)


def write_mp4(video: SyntheticVideo, path: str, fps: float = 4.0) -> str:
    """Encode round(duration * fps) frames at exactly `fps` to an H.264 mp4; returns the path."""
    import imageio_ffmpeg  # only writing files needs ffmpeg; rendering frames does not

    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")
    if video.width % 2 or video.height % 2:
        raise ValueError(f"yuv420p needs an even frame size, got {video.width}x{video.height}")
    path = str(path)
    n = round(video.duration * fps)
    writer = imageio_ffmpeg.write_frames(
        path, (video.width, video.height), fps=fps, codec="libx264", pix_fmt_out="yuv420p", quality=None,
        # Even sizes are enough for libx264; the default (16) would silently rescale other sizes.
        macro_block_size=2,
        # faststart puts the index first so a browser can start playing before the whole file arrives.
        output_params=["-crf", "28", "-preset", "fast", "-movflags", "+faststart"],
    )
    writer.send(None)
    chunk = 64  # frames rendered at once: bounded memory for hour-long videos
    for first in range(0, n, chunk):
        writer.send(video.frames(np.arange(first, min(first + chunk, n)) / fps))
    writer.close()
    log.debug("wrote %s: %d frames at %g fps", path, n, fps)
    return path
