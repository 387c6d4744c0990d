"""Sources of frames for a watch, each an iterator of (seconds, frame) that closes what it opened: a file played as
if live (paced by the watch), any container PyAV reads from a path or a file-like stream, and the frames of a
never-ending synthetic world (`world`). Network streams are in `network`."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import IO

import av

from ..errors import VideoError
from ..times import clock
from .errors import StreamError

DAMAGED = "The stream's data is damaged {where} ({detail}), so the watch ended there; what was seen is kept."


def decoded(container: av.container.InputContainer, offset: float = 0.0,
            name: str = "The stream") -> Iterator[tuple[float, av.VideoFrame]]:
    """The first video stream's frames with their times in seconds (plus `offset`), decoded as they are demuxed.
    A packet that cannot be decoded ends the stream with a `StreamError` that says where."""
    streams = container.streams.video
    if not streams:
        raise StreamError(f"{name} has no video.")
    stream = streams[0]
    stream.thread_type = "AUTO"
    last = None
    try:
        for packet in container.demux(stream):
            for frame in packet.decode():
                if frame.pts is None or frame.time is None:
                    continue  # a frame the container gives no time cannot be placed on the stream's clock
                last = float(frame.time) + offset
                yield last, frame
    except av.error.FFmpegError as exc:
        where = "at its start" if last is None else f"after {clock(last)}"
        raise StreamError(DAMAGED.format(where=where, detail=exc.strerror or type(exc).__name__)) from None


def file_frames(path: str | os.PathLike) -> Iterator[tuple[float, av.VideoFrame]]:
    """A video file's frames in order (the watch plays them at real time: a rehearsal, or a test)."""
    if not os.path.isfile(path):
        raise VideoError(f"Video file not found: {os.fspath(path)}")
    try:
        container = av.open(os.fspath(path))
    except av.error.FFmpegError:
        raise VideoError(f"{os.path.basename(path)} is not a readable video.") from None
    with container:
        yield from decoded(container, name=os.path.basename(path))


def stream_frames(stream: IO[bytes] | io.RawIOBase, format: str | None = None, offset: float = 0.0,
                  name: str = "The stream") -> Iterator[tuple[float, av.VideoFrame]]:
    """The frames of a container read from a file-like `stream` that need not seek (MPEG-TS, fragmented MP4,
    Matroska, MJPEG); `stream` is not closed here."""
    try:
        container = av.open(stream, format=format)
    except av.error.FFmpegError as exc:
        raise StreamError(f"{name} is not a video this server can read ({exc.strerror or type(exc).__name__}).") \
            from None
    with container:
        assert isinstance(container, av.container.InputContainer)  # opened for reading
        yield from decoded(container, offset, name)
