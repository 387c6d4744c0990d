"""PyAV readers that decode only some of a file's frames: intra frames alone (fast seek), or the wanted frames and
only what they depend on (sparse decoding of long videos)."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..errors import VideoError
from .frame_times import FrameTimes
from .readers import UNLIMITED, PyAVReader, rgb_frame
from .sampling import long_edge_size

if TYPE_CHECKING:
    import av


class IntraFrameReader(PyAVReader):
    """Fast seek: the decoder skips every frame that is not an intra frame. `read` takes intra-frame ordinals.

    With `long_edge`, frames come out already shrunk to `long_edge_size` by FFmpeg's bicubic scaler, in the same
    pass as the colour conversion: converting full-size frames and then resizing them with PIL took over half of
    a fast seek. Its pixels differ slightly from PIL's, which fast seek's approximate sampling can afford."""

    def __init__(self, path: str, long_edge: int | None = None, max_pixels: float = UNLIMITED):
        super().__init__(path, max_pixels)
        import av

        self.frame_size = long_edge_size(self.info.width, self.info.height, long_edge) if long_edge else None

        with av.open(path) as container:
            stream = container.streams.video[0]
            start = stream.start_time or 0
            self.pts = sorted(p.pts for p in container.demux(stream) if p.is_keyframe and p.pts is not None)
            self.intra_frame_times = [float((pts - start) * stream.time_base) for pts in self.pts]
        if not self.pts:
            raise VideoError(f"{os.path.basename(path)} has no intra frames to seek to.")

    def read(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        import av

        ordinal: dict[int | None, int] = {pts: i for i, pts in enumerate(self.pts)}  # looked up by a frame's pts
        with av.open(self._path) as container:
            stream = container.streams.video[0]
            stream.codec_context.skip_frame = "NONKEY"
            frames: Iterator[av.VideoFrame] = iter(())
            last = None
            for index in indices:
                if index != last:
                    # Seeking costs one intra frame; reading on through a whole GOP of skipped packets costs more,
                    # unless the wanted intra frame is the very next one.
                    if last is None or index != last + 1:
                        container.seek(self.pts[index], stream=stream)
                        frames = container.decode(stream)
                    rgb = self._next_intra_frame(frames, ordinal, index)
                    last = index
                yield rgb

    def _next_intra_frame(self, frames: Iterator[av.VideoFrame], ordinal: dict[int | None, int],
                           index: int) -> np.ndarray:
        for frame in frames:
            found = ordinal.get(frame.pts)
            if found == index:
                if self.frame_size is None:
                    return rgb_frame(frame, self.max_pixels)
                width, height = self.frame_size
                return rgb_frame(frame, self.max_pixels, width=width, height=height, interpolation="BICUBIC")
            if found is not None and found > index:
                break
        raise VideoError(f"{os.path.basename(self._path)}: intra frame {index} could not be decoded.")


class SparseReader(PyAVReader):
    """For long videos: decodes each wanted frame plus only the frames others depend on. Frames nothing refers
    to (most B-frames) are skipped between samples, and where an intra frame lies between two samples the decoder
    seeks to it rather than decoding on to it (nothing after an intra frame refers to what came before). The frames
    it returns are the ones the exact reader returns, matched by presentation time (`FrameTimes`)."""

    def __init__(self, path: str, max_pixels: float = UNLIMITED):
        super().__init__(path, max_pixels)
        self.times = FrameTimes.open(path, self.info.total_frames)
        self.threads = 0  # decoding threads per read: 0 lets FFmpeg choose; 1 where a read runs on every core

    def read(self, indices: Sequence[int]) -> Iterator[np.ndarray]:
        import av

        times = self.times.upto(indices[-1])
        wanted = [times[i] for i in indices]
        position = 0
        with av.open(self._path) as container:
            stream = container.streams.video[0]
            if self.threads == 1:
                stream.thread_type = "NONE"
            else:
                stream.thread_type, stream.thread_count = "AUTO", self.threads
            while position < len(wanted):
                container.seek(wanted[position], stream=stream)
                position, sought = yield from self._run(container, stream, wanted, position)
                if not sought and position < len(wanted):
                    raise VideoError(f"{os.path.basename(self._path)}: frame {indices[position]} could not be "
                                     f"decoded.")

    def _run(self, container: av.container.InputContainer, stream: av.VideoStream, wanted: list[int],
             position: int) -> Generator[np.ndarray, None, tuple[int, bool]]:
        """Wanted frames from `position` on, decoding from where the container was sought to, until the end of the
        file or until seeking to an intra frame reaches the next wanted frame sooner; returns how far it got and
        whether it stopped to seek."""
        codec = stream.codec_context
        pending = set(wanted[position:])
        decoded: dict[int, np.ndarray] = {}
        for packet in container.demux(stream):
            # Set per packet: the decoder threads take it with the packet they decode.
            codec.skip_frame = "DEFAULT" if packet.pts in pending else "NONREF"
            for frame in packet.decode():
                if frame.pts in pending:
                    pending.discard(frame.pts)
                    decoded[frame.pts] = rgb_frame(frame, self.max_pixels)
            delivered = False
            while position < len(wanted) and wanted[position] in decoded:
                pts = wanted[position]
                position += 1
                last_use = position == len(wanted) or wanted[position] != pts  # a frame can be asked twice
                yield decoded.pop(pts) if last_use else decoded[pts]
                delivered = True
            if position == len(wanted):
                return position, False
            if delivered and self._seek_ahead(wanted[position - 1], wanted[position], packet.dts):
                return position, True
        return position, False

    def _seek_ahead(self, done: int, following: int, decoding: int | None) -> bool:
        """Whether an intra frame lies after the frame just returned (`done`) and at or before the `following` one,
        not yet reached by the decoder (at `decoding`, a decoding time): seeking to it skips what lies between."""
        key = self.times.intra_frame_at_or_before(following)
        return key is not None and key > done and decoding is not None and decoding < key

    def close(self) -> None:
        pass  # the workers share this reader; its FrameTimes closes its file at the end of the packets
