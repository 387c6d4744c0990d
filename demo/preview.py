"""A video a browser can play for every upload: the file itself when browsers play it, else a small H.264 proxy.

Browsers play H.264 (8-bit 4:2:0) or AV1 in MP4, and VP8, VP9 or AV1 in WebM. MPEG-4 Part 2, HEVC, AVI, MKV and
the like are transcoded with the ffmpeg that imageio-ffmpeg ships: a few hundred pixels wide, full motion for
short clips and intra frames only for long ones, so that the proxy stays quick whatever the length. Only the
preview uses the proxy; the analysis always reads the original file. The proxy is written into a folder its caller
deletes once Gradio has copied it into the upload folder, whose cap (`Limits.uploads_mb`) counts it with the
uploads: nothing here keeps proxies.
"""

from __future__ import annotations

import logging
import os
import resource
import subprocess
from pathlib import Path
from typing import Protocol

from tempo.errors import VideoError

log = logging.getLogger(__name__)

PLAYABLE = {  # (container suffix, codec) pairs that Chromium, Firefox and Safari all play
    (".mp4", "h264"), (".m4v", "h264"), (".mp4", "av1"),
    (".webm", "vp8"), (".webm", "vp9"), (".webm", "av1"),
}
PLAYABLE_PIXELS = {"yuv420p", "yuvj420p"}  # 10-bit and 4:4:4 H.264 do not play in browsers
PROXY_EDGE = 480  # long edge of the proxy, in pixels
FULL_MOTION_MAX_S = 300.0  # longer videos get a key-frame proxy: decoding every frame of an hour takes minutes
PROXY_TIMEOUT_S = 900
PROXY_MEMORY_BYTES = 2 * 1024**3  # ffmpeg's data memory for a proxy


class Headers(Protocol):
    """What a file's headers say that decides whether browsers play it (`tempo.engine.check_file` reads them)."""

    @property
    def container(self) -> str: ...
    @property
    def codec(self) -> str: ...
    @property
    def pixel_format(self) -> str | None: ...


def browser_playable(path: str | os.PathLike, headers: Headers) -> bool:
    """Whether browsers play this file as it is, from its headers (container by content and suffix, codec, pixel
    format) as the analysis read them."""
    suffix = Path(path).suffix.lower()
    container_matches = "mp4" in headers.container if suffix in (".mp4", ".m4v") else "webm" in headers.container
    return ((suffix, headers.codec) in PLAYABLE and container_matches
            and (headers.codec != "h264" or headers.pixel_format in PLAYABLE_PIXELS))


def proxy_size(width: int, height: int, edge: int = PROXY_EDGE) -> tuple[int, int]:
    """(width, height) with the long edge at most `edge`, both even (H.264 4:2:0 needs that) and at least 2."""
    scale = min(1.0, edge / max(width, height))
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def make_proxy(path: str | os.PathLike, directory: str | os.PathLike) -> Path:
    """Transcode `path` into `directory`/preview.mp4 (H.264, AAC) at low priority, so a running analysis keeps the
    CPU, and with bounded memory; raises VideoError when ffmpeg cannot read it."""
    import av
    import imageio_ffmpeg

    unreadable = VideoError(f"{Path(path).name} cannot be previewed in the browser.")
    try:
        with av.open(os.fspath(path)) as container:
            stream = container.streams.video[0]
            width, height = stream.codec_context.width, stream.codec_context.height
            duration = float(container.duration or 0) / 1e6
    except Exception:  # not a video at all; the analysis gives the precise message
        raise unreadable from None
    target = Path(directory) / "preview.mp4"
    proxy_width, proxy_height = proxy_size(width, height)
    full_motion = 0 < duration <= FULL_MOTION_MAX_S
    command = [imageio_ffmpeg.get_ffmpeg_exe(), "-nostdin", "-v", "error", "-y"]
    if not full_motion:
        command += ["-skip_frame", "nokey"]  # decode intra frames only: a slideshow, but in seconds
    command += ["-i", os.fspath(path), "-map", "0:v:0", "-vf", f"scale={proxy_width}:{proxy_height}",
                "-c:v", "libx264", "-preset", "ultrafast", "-crf", "28", "-pix_fmt", "yuv420p",
                "-movflags", "+faststart"]
    command += ["-map", "0:a:0?", "-c:a", "aac", "-b:a", "96k"] if full_motion else ["-an", "-fps_mode", "vfr"]
    command.append(os.fspath(target))
    ffmpeg = subprocess.run(command, capture_output=True, text=True, timeout=PROXY_TIMEOUT_S,
                            preexec_fn=_bounded if os.name == "posix" else None)
    if ffmpeg.returncode != 0 or not target.is_file():
        log.info("preview of %s failed: %s", path, ffmpeg.stderr[-500:])
        raise unreadable
    return target


def _bounded() -> None:
    """The proxy's ffmpeg at low priority, so that a running analysis keeps the CPU, and with bounded memory."""
    os.nice(10)
    resource.setrlimit(resource.RLIMIT_DATA, (PROXY_MEMORY_BYTES, PROXY_MEMORY_BYTES))
