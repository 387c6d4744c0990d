"""Streams read over the network: HLS (a playlist of short segments, read as it grows), an HTTP video that never ends
(MPEG-TS, fragmented MP4, Matroska, MJPEG), and RTSP. Every connection goes where the `StreamFetcher`'s `check`
says: this library fetches HLS playlists, segments and HTTP bodies itself, each redirect checked again, and hands
PyAV bytes; RTSP, which PyAV must speak itself, goes through a loopback relay to the checked address that ends the
stream on an RTSP redirect. A server passes a check that refuses local addresses (demo/live_sources.py)."""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import av

from ..fetch import Check, Fetcher
from .errors import StreamError
from .sources import decoded, stream_frames

log = logging.getLogger(__name__)

TIMEOUT_S = 10.0
MAX_SEGMENT_BYTES = 64 * 2**20  # one HLS segment (a few seconds of video)
MAX_PLAYLIST_BYTES = 2**20
PLAYLIST_SILENCE_S = 30.0  # a live playlist that has not grown for this long has stopped
STREAM_SCHEMES = ("http", "https", "rtsp")  # rtsps would hide the replies the relay must read


class StreamFetcher(Fetcher):
    """The pinned fetcher (`tempo.fetch`) as streams use it: its refusals are `StreamError`s that end a watch, and
    it reads bodies of a bounded size (playlists, HLS segments)."""

    def __init__(self, check: Check = lambda host: None, timeout: float = TIMEOUT_S) -> None:
        super().__init__(check, timeout, "stream", StreamError, ", so the watch ended; what was seen is kept")

    def get(self, url: str, max_bytes: int) -> tuple[str, bytes]:
        """The body of `url` (at most `max_bytes`) and the URL it finally came from."""
        with self.response(url) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > max_bytes:
                    raise StreamError(f"A piece of the stream is over {max_bytes / 2**20:.0f} MB; this server "
                                      "reads smaller ones.")
            return response.extensions["final_url"], bytes(body)


class Chunks(io.RawIOBase):
    """An iterator of byte chunks as a file that PyAV reads and never seeks."""

    def __init__(self, chunks: Iterator[bytes]):
        self.chunks, self.left = chunks, b""

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while not self.left:
            self.left = next(self.chunks, b"")
            if not self.left:
                return b""
        size = len(self.left) if size < 0 else size
        piece, self.left = self.left[:size], self.left[size:]
        return piece


def open_stream(url: str, fetcher: StreamFetcher | None = None) -> Iterator[tuple[float, av.VideoFrame]]:
    """The frames of the stream at `url`: HLS for a .m3u8 playlist, RTSP for rtsp://, else an HTTP video read as it
    comes."""
    fetcher = fetcher or StreamFetcher()
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in STREAM_SCHEMES:
        raise StreamError("A stream's URL starts with http://, https:// (an HLS .m3u8 playlist, or a video that "
                          f"never ends) or rtsp:// (got {scheme or 'none'}:).")
    if scheme == "rtsp":
        return rtsp_frames(url, fetcher)
    if parts.path.lower().endswith((".m3u8", ".m3u")):
        return hls_frames(url, fetcher)
    return http_frames(url, fetcher)


def http_frames(url: str, fetcher: StreamFetcher) -> Iterator[tuple[float, av.VideoFrame]]:
    """An HTTP body that is a video, read as it arrives; a playlist served under another name is read as HLS."""
    with fetcher.response(url) as response:
        chunks = response.iter_bytes()
        first = next(chunks, b"")
        if first.lstrip().startswith(b"#EXTM3U"):
            yield from hls_frames(response.extensions["final_url"], fetcher)
            return
        yield from stream_frames(Chunks(itertools.chain([first], chunks)),
                                 name=f"The stream at {urlsplit(url).hostname}")


# ------------------------------------------------------------------------------------------------ HLS

@dataclass(frozen=True)
class Playlist:
    """A media playlist as read once: its segments (sequence number, URI) and what it says about growing."""

    segments: list[tuple[int, str]]
    target: float
    ended: bool
    init: str | None  # an fMP4 stream's initialisation section (EXT-X-MAP)
    encrypted: bool


def parse_playlist(text: str) -> Playlist | list[tuple[int, str]]:
    """A media playlist, or a master playlist's variants as (bandwidth, URI)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or lines[0] != "#EXTM3U":
        raise StreamError("The stream's playlist is not an HLS playlist (no #EXTM3U).")
    variants, bandwidth = [], None
    sequence, target, ended, init, encrypted, segments = 0, 4.0, False, None, False, []
    for line in lines[1:]:
        if line.startswith("#EXT-X-STREAM-INF"):
            found = re.search(r"BANDWIDTH=(\d+)", line)
            bandwidth = int(found.group(1)) if found else 0
        elif line.startswith("#EXT-X-MEDIA-SEQUENCE:"):
            sequence = int(line.split(":", 1)[1])
        elif line.startswith("#EXT-X-TARGETDURATION:"):
            target = float(line.split(":", 1)[1])
        elif line.startswith("#EXT-X-ENDLIST"):
            ended = True
        elif line.startswith("#EXT-X-MAP:"):
            found = re.search(r'URI="([^"]+)"', line)
            init = found.group(1) if found else None
        elif line.startswith("#EXT-X-KEY:") and "METHOD=NONE" not in line:
            encrypted = True
        elif not line.startswith("#"):
            if bandwidth is not None:
                variants.append((bandwidth, line))
                bandwidth = None
            else:
                segments.append((sequence, line))
                sequence += 1
    if variants:
        return variants
    return Playlist(segments, target, ended, init, encrypted)


def hls_frames(url: str, fetcher: StreamFetcher) -> Iterator[tuple[float, av.VideoFrame]]:
    """An HLS stream's frames: the playlist read again as it grows, each new segment fetched and decoded. The times
    are the segments' own, made to run on across a discontinuity."""
    url, body = fetcher.get(url, MAX_PLAYLIST_BYTES)
    parsed = parse_playlist(body.decode("utf-8", "replace"))
    if isinstance(parsed, list):  # a master playlist: the variant with the least bandwidth is plenty at 512 px
        url, body = fetcher.get(urljoin(url, min(parsed)[1]), MAX_PLAYLIST_BYTES)
        parsed = parse_playlist(body.decode("utf-8", "replace"))
        if isinstance(parsed, list):
            raise StreamError("The stream's playlist lists playlists of playlists; give a variant's URL.")
    done, last, offset, grew = -1, None, 0.0, time.monotonic()
    while True:
        if parsed.encrypted:
            raise StreamError("The stream is encrypted (HLS with a key); this server reads open streams only.")
        init = fetcher.get(urljoin(url, parsed.init), MAX_SEGMENT_BYTES)[1] if parsed.init else b""
        for sequence, uri in parsed.segments:
            if sequence <= done:
                continue
            data = init + fetcher.get(urljoin(url, uri), MAX_SEGMENT_BYTES)[1]
            name = f"The stream's segment {sequence}"
            for t, frame in stream_frames(io.BytesIO(data), "mp4" if parsed.init else None, name=name):
                if last is not None and t + offset <= last - 1.0:  # a discontinuity: the clock starts over
                    offset = last + 1 / 30 - t
                last = t + offset
                yield last, frame
            done, grew = sequence, time.monotonic()
        if parsed.ended:
            return
        if time.monotonic() - grew > max(PLAYLIST_SILENCE_S, 3 * parsed.target):
            raise StreamError(f"The stream's playlist has not grown for {time.monotonic() - grew:.0f} s: the "
                              "stream has stopped, so the watch ended; what was seen is kept.")
        time.sleep(max(0.5, parsed.target / 2))
        url, body = fetcher.get(url, MAX_PLAYLIST_BYTES)
        again = parse_playlist(body.decode("utf-8", "replace"))
        if isinstance(again, list):
            raise StreamError("The stream's playlist changed into a list of playlists.")
        parsed = again


# ------------------------------------------------------------------------------------------------ RTSP

REDIRECTED = ("The RTSP server redirected the stream elsewhere; this server does not follow RTSP redirects (give the "
              "address it redirects to).")


class RtspReplies:
    """Reads the server's side of an RTSP-over-TCP session as it passes: text replies (status line, headers, a body)
    and interleaved binary packets ($, channel, length). A redirect reply is refused."""

    def __init__(self) -> None:
        self.buffer = b""
        self.redirected = False

    def feed(self, data: bytes) -> bool:
        """Whether the session may go on after `data`."""
        self.buffer += data
        while self.buffer:
            if self.buffer[:1] == b"$":
                if len(self.buffer) < 4:
                    return True
                size = 4 + int.from_bytes(self.buffer[2:4], "big")
                if len(self.buffer) < size:
                    return True
                self.buffer = self.buffer[size:]
                continue
            head, found, rest = self.buffer.partition(b"\r\n\r\n")
            if not found:
                return len(self.buffer) < 65536  # a header that never ends is not RTSP
            status = re.match(rb"RTSP/\d\.\d (\d{3})", head)
            if status and 300 <= int(status.group(1)) < 400:
                self.redirected = True
                return False
            length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            size = int(length.group(1)) if length else 0
            if len(rest) < size:
                return True
            self.buffer = rest[size:]
        return True


class RtspRelay:
    """A loopback port for PyAV's RTSP client, relayed to the checked address of the camera: PyAV connects nowhere
    else (RTSP over TCP carries the video on the same connection)."""

    def __init__(self, address: str, port: int) -> None:
        self.target = (address, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(TIMEOUT_S)
        self.port = self.listener.getsockname()[1]
        self.replies = RtspReplies()
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._serve, name="tempo-rtsp-relay", daemon=True).start()

    def _serve(self) -> None:
        try:
            client, _ = self.listener.accept()
            upstream = socket.create_connection(self.target, timeout=TIMEOUT_S)
        except OSError:
            return self.close()
        self.sockets += [client, upstream]
        threading.Thread(target=self._pump, args=(client, upstream, None), daemon=True).start()
        self._pump(upstream, client, self.replies)

    def _pump(self, source: socket.socket, target: socket.socket, replies: RtspReplies | None) -> None:
        try:
            while data := source.recv(65536):
                if replies is not None and not replies.feed(data):
                    break
                target.sendall(data)
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.close()


def rtsp_frames(url: str, fetcher: StreamFetcher) -> Iterator[tuple[float, av.VideoFrame]]:
    """An RTSP camera's frames, over TCP through a relay to the address `fetcher` checked."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise StreamError(f"The stream's URL has no host: {url[:200]}")
    relay = RtspRelay(fetcher.address(parts.hostname), parts.port or 554)
    credentials = parts.netloc.rpartition("@")[0]
    local = urlunsplit(("rtsp", (credentials + "@" if credentials else "") + f"127.0.0.1:{relay.port}", parts.path,
                        parts.query, ""))
    try:
        try:
            container = av.open(local, options={"rtsp_transport": "tcp", "timeout": str(int(TIMEOUT_S * 1e6))})
        except av.error.FFmpegError:
            if relay.replies.redirected:
                raise StreamError(REDIRECTED) from None
            raise StreamError(f"The RTSP camera at {parts.hostname} cannot be read.") from None
        with container:
            try:
                yield from decoded(container, name=f"The RTSP camera at {parts.hostname}")
            except StreamError:
                if relay.replies.redirected:
                    raise StreamError(REDIRECTED) from None
                raise
    finally:
        relay.close()
