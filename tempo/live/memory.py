"""What a watch keeps, each with a fixed cap, the oldest leaving first: the recent memories an "Ask now" answers
from, and the replay buffer of the last minutes' frames, small JPEGs, that a viewer can watch again."""

from __future__ import annotations

import os
import threading
from collections import deque
from dataclasses import dataclass

import cv2
import numpy as np
import torch

from ..events import Compression
from ..video.sampling import SamplingPlan, VideoProbed, segment_ranges
from .errors import StreamError

REPLAY_EDGE = 320  # the replay's frames: long edge in pixels (the key frames' size)
REPLAY_QUALITY = 80


@dataclass(frozen=True)
class Remembered:
    """One segment among the recent memories: its memory [k_max, d_s], relevance and sampled frames' stream times."""

    memory: torch.Tensor
    relevance: float
    times: tuple[float, ...]


def segment_plan(times: list[float] | tuple[float, ...], fps: float, segment_frames: int) -> SamplingPlan:
    """The sampling plan of frames taken at `times` (stream seconds), in segments of `segment_frames`: the
    released clock (start + position / fps) where they are evenly spaced, their own times where a gap broke them."""
    step = 1 / fps
    even = all(abs(later - earlier - step) < step / 4 for earlier, later in zip(times, times[1:]))
    end = times[-1] + step
    return SamplingPlan(list(range(len(times))), list(times), fps, segment_ranges(len(times), segment_frames),
                        segment_frames, end, fast_seek=not even, offset=times[0])  # uneven: told as they are


class RecentMemories:
    """The last `segments` segments' memories (a watch's `recent_s`, within the frame cap's worth)."""

    def __init__(self, segments: int) -> None:
        self.kept: deque[Remembered] = deque(maxlen=segments)
        self.lock = threading.Lock()

    def add(self, segment: Remembered) -> None:
        with self.lock:
            self.kept.append(segment)

    def __len__(self) -> int:
        return len(self.kept)

    def compression(self, query: str, source: str, fps: float, segment_frames: int,
                    size: tuple[int, int] = (0, 0)) -> Compression:
        """The recent memories as one compression the decoder can answer from: their segments in time order, on the
        stream's own clock. Only whole segments are kept, so a short last one of an ended stream is left out."""
        with self.lock:
            kept = [s for s in self.kept if len(s.times) == segment_frames]
        if not kept:
            raise StreamError("Nothing has been watched yet: ask again once the first segment is on the timeline.")
        times = [t for segment in kept for t in segment.times]
        plan = segment_plan(times, fps, segment_frames)
        start, end = times[0], plan.duration
        probed = VideoProbed(source, end, fps, len(times), size[0], size[1], len(times), fps, len(kept), "live",
                             (start, end))
        return Compression(query, probed, plan, [s.memory for s in kept], [s.relevance for s in kept])

    def clear(self) -> None:
        with self.lock:
            self.kept.clear()


class Replay:
    """The last `seconds` of sampled frames as JPEGs (long edge REPLAY_EDGE), with their stream times."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.frames: deque[tuple[float, bytes]] = deque()
        self.lock = threading.Lock()

    def add(self, t: float, frame: np.ndarray) -> None:
        height, width = frame.shape[:2]
        scale = min(1.0, REPLAY_EDGE / max(height, width))
        # even sizes: what H.264 in yuv420p needs when the replay is written as a clip
        size = (max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2))
        small = cv2.resize(frame, size, interpolation=cv2.INTER_AREA) if size != (width, height) else frame
        ok, jpeg = cv2.imencode(".jpg", cv2.cvtColor(small, cv2.COLOR_RGB2BGR),
                                [cv2.IMWRITE_JPEG_QUALITY, REPLAY_QUALITY])
        if not ok:
            return
        with self.lock:
            self.frames.append((t, jpeg.tobytes()))
            while self.frames and self.frames[0][0] < t - self.seconds:
                self.frames.popleft()

    @property
    def nbytes(self) -> int:
        with self.lock:
            return sum(len(jpeg) for _, jpeg in self.frames)

    def span(self) -> tuple[float, float] | None:
        """The stream times the buffer holds, or None while it is empty."""
        with self.lock:
            return (self.frames[0][0], self.frames[-1][0]) if self.frames else None

    def frames_between(self, start: float, end: float) -> list[tuple[float, np.ndarray]]:
        """The buffer's frames from `start` to `end` (stream seconds), decoded to RGB."""
        with self.lock:
            chosen = [(t, jpeg) for t, jpeg in self.frames if start <= t <= end]
        decoded = [(t, cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)) for t, jpeg in chosen]
        return [(t, cv2.cvtColor(image, cv2.COLOR_BGR2RGB)) for t, image in decoded if image is not None]

    def clip(self, path: str | os.PathLike, start: float, end: float, fps: float) -> tuple[float, float]:
        """The buffer from `start` to `end` written as an H.264 mp4 at `fps` (what browsers play); returns the
        stream times it covers. Refused when that part has left the buffer."""
        import imageio_ffmpeg  # only writing clips needs ffmpeg

        frames = self.frames_between(start, end)
        if not frames:
            held = self.span()
            held_text = "nothing yet" if held is None else f"{held[0]:.0f} s to {held[1]:.0f} s"
            raise StreamError(f"That moment has left the replay buffer (it holds the last {self.seconds / 60:g} "
                              f"minutes: {held_text} into the stream).")
        height, width = frames[0][1].shape[:2]
        writer = imageio_ffmpeg.write_frames(str(path), (width, height), fps=fps, codec="libx264", quality=None,
                                             pix_fmt_out="yuv420p", macro_block_size=2,
                                             output_params=["-preset", "veryfast", "-crf", "26",
                                                            "-movflags", "+faststart"])
        writer.send(None)
        for _, frame in frames:
            if frame.shape[:2] != (height, width):  # a stream whose size changed: one size per clip
                frame = cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA)
            writer.send(np.ascontiguousarray(frame))
        writer.close()
        return frames[0][0], frames[-1][0]

    def clear(self) -> None:
        with self.lock:
            self.frames.clear()
