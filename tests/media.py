"""Hostile and odd media for the robustness and load tests, made with imageio-ffmpeg's ffmpeg.

Every file is small (under 0.5 MB) and quick to make (about 3 s for the whole set on 2 cores): long videos are
long by their timestamps, not by their frame count. `make_media(directory)` writes them all and returns
{name: path}; `MEDIA` says what each one is.
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import imageio_ffmpeg

FFMPEG = imageio_ffmpeg.get_ffmpeg_exe()
H264 = ["-c:v", "libx264", "-preset", "ultrafast"]
YUV420 = [*H264, "-pix_fmt", "yuv420p"]
YUV444 = [*H264, "-pix_fmt", "yuv444p"]  # 4:4:4 has no chroma subsampling, so any width and height are legal


def ffmpeg(*args: str) -> None:
    subprocess.run([FFMPEG, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", *args], check=True,
                   capture_output=True, timeout=120)


def testsrc(path: Path, size: str, rate: str, seconds: float, codec: list[str] = YUV420, *extra: str) -> None:
    """ffmpeg's moving test pattern (so consecutive frames differ)."""
    ffmpeg("-f", "lavfi", "-i", f"testsrc=s={size}:r={rate}:d={seconds}", *extra, *codec, str(path))


def _truncated(path: Path, keep: float, faststart: bool) -> None:
    """A valid 6 s clip cut to the first `keep` of its bytes. Without faststart the index (moov) is at the
    end and is lost; with it the index survives and promises frames whose data is gone."""
    full = path.with_name(path.stem + "-full.mp4")
    testsrc(full, "160x120", "10", 6, YUV420, *(["-movflags", "+faststart"] if faststart else []))
    data = full.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])
    full.unlink()


def _damaged_mjpeg(path: Path) -> None:
    """20 s of Motion JPEG at 4 fps whose frames from 14 s on are overwritten with noise: decoding fails part-way
    (a JPEG decoder stops on a broken frame; an H.264 one would conceal it)."""
    testsrc(path, "64x48", "4", 20, ["-c:v", "mjpeg", "-q:v", "5"])
    data, noise = bytearray(path.read_bytes()), random.Random(1)
    frames = [i for i in range(len(data) - 1) if data[i] == 0xFF and data[i + 1] == 0xD8]
    for start in frames[len(frames) * 7 // 10:]:
        data[start + 2:start + 200] = noise.randbytes(198)
    path.write_bytes(bytes(data))


def _rotated(path: Path) -> None:
    """Stored 128x96, with a display matrix saying "rotate 90 degrees" (as phones write portrait clips)."""
    plain = path.with_name(path.stem + "-plain.mp4")
    testsrc(plain, "128x96", "10", 2)
    ffmpeg("-display_rotation", "90", "-i", str(plain), "-c", "copy", str(path))
    plain.unlink()


MEDIA: dict[str, tuple[str, Callable[[Path], None]]] = {
    "empty.mp4": ("0 bytes", lambda p: p.write_bytes(b"")),
    "notes.mp4": ("a text file named .mp4", lambda p: p.write_text("Meeting notes\n" * 200, encoding="utf-8")),
    "noise.mp4": ("64 KB of random bytes", lambda p: p.write_bytes(random.Random(6).randbytes(65536))),
    "truncated.mp4": ("first 40% of an mp4 whose index is at the end", lambda p: _truncated(p, 0.4, False)),
    "truncated_faststart.mp4": ("first 50% of a faststart mp4: index intact, later frames missing",
                                lambda p: _truncated(p, 0.5, True)),
    "damaged_head.mp4": ("first 10% of a faststart mp4: the first frame is already cut",
                         lambda p: _truncated(p, 0.1, True)),
    "audio_only.mp4": ("2 s of AAC audio, no video stream",
                       lambda p: ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=2", "-c:a", "aac", str(p))),
    "image.png": ("a still image", lambda p: ffmpeg("-f", "lavfi", "-i", "testsrc=s=64x48:r=1:d=1", "-frames:v", "1",
                                                    str(p))),
    "animated.gif": ("a 2 s animated GIF", lambda p: testsrc(p, "64x48", "5", 2, [])),
    "one_frame.mp4": ("a single frame", lambda p: testsrc(p, "64x48", "10", 1, YUV420, "-frames:v", "1")),
    "two_seconds.mp4": ("2 s at 10 fps", lambda p: testsrc(p, "96x64", "10", 2)),
    "twenty_seconds.mp4": ("20 s at 4 fps, 64x48: the load test's clip", lambda p: testsrc(p, "64x48", "4", 20)),
    "rotated.mp4": ("rotation metadata (90 degrees)", _rotated),
    "vfr.mp4": ("variable frame rate: 1 s at 25 fps, then 10 s at 2.5 fps",
                lambda p: testsrc(p, "128x96", "25", 2, YUV420, "-vf",
                                  "setpts='if(lt(N,25),N/25,1+(N-25)/2.5)/TB'", "-fps_mode", "vfr")),
    "tall_1x2000.mp4": ("1 pixel wide, 2000 high", lambda p: testsrc(p, "1x2000", "4", 2, YUV444)),
    "wide_4000x16.mp4": ("4000 wide, 16 high", lambda p: testsrc(p, "4000x16", "4", 2, YUV444)),
    "odd_333x199.mp4": ("odd width and height", lambda p: testsrc(p, "333x199", "4", 2, YUV444)),
    "8k.mp4": ("7680x4320, 2 frames", lambda p: testsrc(p, "7680x4320", "1", 2)),
    "ten_hours.mp4": ("10 hours at one frame per 10 minutes (60 frames)",
                      lambda p: ffmpeg("-f", "lavfi", "-i", "color=c=navy:s=64x64:r=1/600:d=36000", *YUV420, str(p))),
    "five_minutes.mp4": ("5 min at 2 fps, 32x32: 600 sampled frames in 75 segments",
                         lambda p: testsrc(p, "32x32", "2", 300)),
    "mpeg4_part2.mp4": ("MPEG-4 Part 2 (older cameras and phones): analysed, but no browser plays it",
                        lambda p: testsrc(p, "160x120", "10", 2, ["-c:v", "mpeg4", "-q:v", "5"])),
    "damaged_mjpeg.avi": ("Motion JPEG whose frames from 14 s on are noise", _damaged_mjpeg),
    "vp9_named.mp4": ("a WebM/VP9 file named .mp4", lambda p: testsrc(p, "96x64", "10", 2,
                                                                        ["-c:v", "libvpx-vp9", "-deadline", "realtime",
                                                                         "-f", "webm"])),
}


def make_media(directory: Path, names: list[str] | None = None) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in names or list(MEDIA):
        path = directory / name
        MEDIA[name][1](path)
        paths[name] = path
    return paths


if __name__ == "__main__":  # python tests/media.py DIR: look at the files by hand
    import sys

    for name, path in make_media(Path(sys.argv[1] if len(sys.argv) > 1 else "hostile-media")).items():
        print(f"{path.stat().st_size:>9,}  {name:26s} {MEDIA[name][0]}")
