"""What live mode may read, for the page, the /watch endpoint and the wait_for tool: a stream URL (under
`handover`'s rules: public addresses only, each redirect checked again; a lab machine's owner may allow its own
private network, never on a Space), a file uploaded or shipped, played as if live, and on the embedded model a
synthetic world that never ends; and the watches this server keeps, no more than its cap at once."""

from __future__ import annotations

import ipaddress
import os
import random
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tempo.config import Limits
from tempo.errors import InputError
from tempo.live import UNSEEN_SEEDS, LiveConfig, LiveWatch, LiveWorld, StreamFetcher, file_frames, open_stream

from . import handover
from .device import COST, ZEROGPU

LAB_NETWORKS = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))
LAB_SETTING = "TEMPO_LIVE_LAB_STREAMS=1"
SYNTHETIC = "synthetic"
HALTED_KEPT = 10_000  # owners remembered as stopped (the oldest forgotten first)
# Why ZeroGPU gets no live mode, in the page's and the API's words (numbers: docs/live.md, `zerogpu_live_cost`).
NOT_ON_ZEROGPU = ("Live mode needs dedicated hardware: on ZeroGPU every segment would be a GPU call of its own, "
                  "whose start alone (about 5 s) outlasts the 4 s of stream it scores, so a visitor's daily "
                  "minutes would last about {minutes:.0f} minutes of stream; run this Space on a GPU or CPU of its "
                  "own.")


def on_a_space() -> bool:
    return bool(os.environ.get("SPACE_ID") or os.environ.get("SPACE_HOST"))


def lab_allowed(limits: Limits) -> bool:
    """Whether streams from this machine's private network may be read: the setting, and never on a Space (whose
    "own network" is its host's)."""
    return limits.live_lab_streams and not on_a_space()


def stream_address(host: str, lab: bool) -> str | None:
    """Where to connect for a stream's `host` (None: by name, a trusted host): a public address, as `handover`
    checks it; with `lab`, also an address on a private network (never loopback or link-local). Else refused."""
    try:
        return handover.public_address(host)
    except InputError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise InputError(f"The stream's host {host!r} could not be found.") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if lab and addresses and all(any(a in net for net in LAB_NETWORKS) for a in addresses):
        return str(addresses[0])
    allow = "" if on_a_space() else f" (its owner can allow cameras on this machine's own network: {LAB_SETTING})"
    raise InputError(f"The stream's host {host!r} is not a public internet address; this server reads streams "
                     f"from the public internet only{allow}.")


def stream_fetcher(limits: Limits) -> StreamFetcher:
    lab = lab_allowed(limits)
    return StreamFetcher(lambda host: stream_address(host, lab))


def zerogpu_live_cost(group: int = 1, visitor: str = "anonymous") -> tuple[float, float, float]:
    """On ZeroGPU, with one GPU call per `group` segments of 4 s: (GPU seconds charged per minute of stream, minutes
    of stream a `visitor`'s day lasts, the least lag: a group's stream time plus its call). Each call pays the
    start (`COST.start`, ZeroGPU's own) and is charged what it uses (`COST.used`)."""
    per_call = COST.used(group, 0, 0)
    per_minute = per_call * 60 / (4 * group) * ZEROGPU.counted(COST.size)
    return per_minute, ZEROGPU.daily_seconds(visitor) / per_minute, 4 * group + per_call


@dataclass
class Source:
    """What a watch reads: its name for the page, its frames (None: pushed, a camera's), and for the synthetic world
    the question it suggests."""

    name: str
    frames: Callable[[], Iterable] | None
    suggestion: str = ""


def camera() -> Source:
    return Source("the camera", None)


def url_source(url: str, limits: Limits) -> Source:
    """A stream URL, its host checked now (a clear refusal before anything starts) and at every connection."""
    url = url.strip()
    host = urlsplit(url).hostname
    if not host:
        raise InputError("Please give the stream's URL: an HLS playlist (.m3u8), an rtsp:// camera, or an http(s) "
                         "video that never ends.")
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https", "rtsp"):
        raise InputError(f"This server does not read {scheme}: streams; give an http(s) or rtsp:// URL.")
    fetcher = stream_fetcher(limits)
    fetcher.address(host)
    return Source(url, lambda: open_stream(url, fetcher))


def file_source(path: str) -> Source:
    """A file this server may open (the caller checked), played as if live, at real time."""
    return Source(Path(path).name, lambda: file_frames(path))


def synthetic_source(seed: int | None = None) -> Source:
    """The synthetic world from `seed` (default: one drawn from the seeds no training used), never ending."""
    seed = random.randrange(*UNSEEN_SEEDS) if seed is None else seed
    if not UNSEEN_SEEDS[0] <= seed < UNSEEN_SEEDS[1]:
        raise InputError(f"A synthetic stream's seed is a number from {UNSEEN_SEEDS[0]:,} to {UNSEEN_SEEDS[1] - 1:,} "
                         f"(got {seed}).")
    world = LiveWorld(seed)
    return Source(f"the synthetic world (seed {seed})", world.frames, world.question()[0])


def config_of(limits: Limits, threshold: float | None = None) -> LiveConfig:
    """A watch's config from the server's settings, and the alert rule's rise when one is given."""
    config = LiveConfig(recent_s=limits.live_recent_min * 60.0, replay_s=limits.live_replay_min * 60.0,
                        max_pixels=limits.max_frame_pixels)
    if threshold is None:
        return config
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.5 <= threshold <= 20:
        raise InputError(f"The alert threshold must be a number from 0.5 to 20 (got {threshold!r}).")
    return replace(config, rule=replace(config.rule, rise=float(threshold)))


@dataclass
class Watching:
    """One watch this server keeps: its LiveWatch, what it reads, and the signal that stops it."""

    live: LiveWatch
    source: Source
    stop: threading.Event = field(default_factory=threading.Event)
    view: Any = None  # what the page shows of it (`live_view.View`), for a page's watch
    origin: float = 0.0  # a camera's: the monotonic clock at stream time 0 ...
    last_frame: float = 0.0  # ... and when its latest frame came
    lock: threading.Lock = field(default_factory=threading.Lock)  # a camera's frames go in one at a time

    def close(self) -> None:
        self.stop.set()
        self.live.close()


class Watches:
    """The watches running or kept (until stopped), by owner (a page session, or an API call), at most `limit`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.by_owner: dict[str, Watching] = {}
        self.halted: dict[str, None] = {}  # owners who pressed Stop: their camera's frames start nothing
        self.lock = threading.Lock()

    def halt(self, owner: str) -> None:
        """`owner`'s watch stopped and freed, and a camera still sending ignored until `resume`."""
        with self.lock:
            self.halted[owner] = None
            while len(self.halted) > HALTED_KEPT:
                del self.halted[next(iter(self.halted))]
        self.close(owner)

    def resume(self, owner: str) -> None:
        with self.lock:
            self.halted.pop(owner, None)

    def is_halted(self, owner: str) -> bool:
        with self.lock:
            return owner in self.halted

    def open(self, owner: str, watching: Watching) -> Watching:
        """`watching` kept for `owner`, replacing (and freeing) the owner's last one; refused when full."""
        with self.lock:
            old = self.by_owner.pop(owner, None)
            if len(self.by_owner) >= self.limit:
                if old is not None:
                    self.by_owner[owner] = old
                raise InputError(f"This server watches at most {self.limit} stream{'s' * (self.limit != 1)} at "
                                 "once; try again when one stops.")
            self.by_owner[owner] = watching
        if old is not None:
            old.close()
        return watching

    def get(self, owner: str) -> Watching | None:
        with self.lock:
            return self.by_owner.get(owner)

    def close(self, owner: str, watching: Watching | None = None) -> None:
        """Stop and free `owner`'s watch (only `watching`, when given: a newer one stays)."""
        with self.lock:
            found = self.by_owner.get(owner)
            if found is None or watching is not None and found is not watching:
                return
            del self.by_owner[owner]
        found.close()

    def __len__(self) -> int:
        with self.lock:
            return len(self.by_owner)
