"""The benchmark's test videos: ffmpeg's 720p test pattern, generated once for each length."""

from __future__ import annotations

import logging
import os
import subprocess

log = logging.getLogger(__name__)

VIDEOS = {"1-hour": 3600, "10-minute": 600}


def make_video(path: str, seconds: int) -> str:
    """1280x720 30-fps H.264 of ffmpeg's test pattern, with x264's usual B-frames and intra frames every 250."""
    if os.path.isfile(path):
        return path
    import imageio_ffmpeg

    os.makedirs(os.path.dirname(path), exist_ok=True)
    log.info("generating %s (%d s of 720p30, once; this takes a while)", path, seconds)
    partial = path + ".partial.mp4"
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error", "-f", "lavfi", "-i",
                    f"testsrc2=size=1280x720:rate=30:duration={seconds}", "-c:v", "libx264", "-preset", "veryfast",
                    "-crf", "32", "-pix_fmt", "yuv420p", partial], check=True)
    os.replace(partial, path)
    return path
