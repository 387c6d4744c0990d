"""Which presentation time is a video's n-th frame, and where its key frames are: read from the container's packets
only as far as a reader asks, so that the first segment of an hour does not wait for all of its packets (reading an
hour's 108,000 packets takes 0.4 s)."""

from __future__ import annotations

import bisect
import heapq
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import av


class WrongReader(Exception):
    """This reader cannot read this file as it should (decord's narrow frames, timestamps that do not identify
    frames); another reader takes over."""


def listed_in_order(entries: av.index.IndexEntries, total: int) -> bool:
    """Whether a container's index (PyAV's `index_entries`) lists `total` frames, with data, in decoding order."""
    if len(entries) != total:
        return False
    listed = [entries[i] for i in range(len(entries))]
    stamps = [entry.timestamp for entry in listed if entry.size]
    return len(stamps) == total and all(a <= b for a, b in zip(stamps, stamps[1:]))


class FrameTimes:
    """The presentation times (pts) of a video stream's frames, in order, and of its key frames.

    Packets come in decoding order, and a frame is never shown before it is decoded (pts >= dts), so once a packet
    with decoding time d has been read, every time below d that will ever be seen has been seen: those frames' places
    are final. `upto(n)` reads on until frame n's place is final. A stream that breaks either rule, gives two frames
    one time, or ends with another count of frames than `total` raises WrongReader: on opening where the index
    cannot vouch for it (`open`), else when its packets are read."""

    def __init__(self, packets: Iterator[av.Packet[av.VideoStream]], total: int,
                 container: av.container.InputContainer | None = None) -> None:
        """`packets`: the stream's packets in decoding order (PyAV's, or anything with pts, dts, size and
        is_keyframe); `container`, closed at their end, is where they come from."""
        self.total = total
        self.pts: list[int] = []  # frames 0..len-1, final
        self.keyframes: list[int] = []  # key frames' times, sorted, as far as read
        self._pending: list[int] = []  # times read whose place is not final yet (a heap)
        self._lock = threading.Lock()
        self._container = container
        self._packets: Iterator[av.Packet[av.VideoStream]] | None = packets
        self._dts: int | None = None

    @classmethod
    def open(cls, path: str | os.PathLike[str], total: int) -> FrameTimes:
        """Times read lazily where the container's index lists every frame in decoding order (MP4, MOV); read in
        full and checked now where it does not (MKV lists key frames only), before any frame is decoded."""
        import av

        container = av.open(os.fspath(path))
        try:
            stream = container.streams.video[0]
            times = cls(container.demux(stream), total, container)
            if not listed_in_order(stream.index_entries, total):
                times.upto(total)
        except BaseException:
            container.close()
            raise
        return times

    def upto(self, index: int) -> list[int]:
        """The times of frames 0..`index` (and maybe more), final; fewer only where the stream ends first."""
        with self._lock:
            while len(self.pts) <= index and self._packets is not None:
                self._read_packet()
            return self.pts

    def keyframe_at_or_before(self, pts: int) -> int | None:
        """The latest key frame's time at or before `pts`, among those read (all of them up to a final time)."""
        with self._lock:
            at = bisect.bisect_right(self.keyframes, pts)
            return self.keyframes[at - 1] if at else None

    def _read_packet(self) -> None:
        if self._packets is None:
            return
        packet = next(self._packets, None)
        if packet is None:  # the end: every time read is final
            self._packets = None
            self.close_file()
            while self._pending:
                self._place(heapq.heappop(self._pending))
            if len(self.pts) != self.total:
                raise WrongReader(f"{len(self.pts)} frames where the header says {self.total}")
            return
        if packet.dts is not None:
            if self._dts is not None and packet.dts < self._dts:
                raise WrongReader("decoding times go backwards")
            self._dts = packet.dts
        if packet.pts is None or not packet.size:
            return
        if packet.dts is not None and packet.pts < packet.dts:
            raise WrongReader("a frame is shown before it is decoded")
        heapq.heappush(self._pending, packet.pts)
        if packet.is_keyframe:
            bisect.insort(self.keyframes, packet.pts)
        while self._pending and self._dts is not None and self._pending[0] < self._dts:
            self._place(heapq.heappop(self._pending))

    def _place(self, pts: int) -> None:
        if self.pts and pts <= self.pts[-1]:
            raise WrongReader("frame times do not identify frames one to one")
        self.pts.append(pts)

    def close_file(self) -> None:
        """Let go of the file (at the end of its packets; a reader dropped early leaves it to PyAV's collector)."""
        if self._container is not None:
            self._container.close()
            self._container = None
