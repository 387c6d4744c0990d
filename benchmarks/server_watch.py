"""What the soak watches on the server while it runs: its memory with and without its children, and its open file
descriptors, sampled every second, with which descriptors were open at the start and at the end, described."""

from __future__ import annotations

import csv
import os
import threading
import time
from collections import Counter
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np
import psutil

SETTLE_S = 15.0  # at most this long for the server to close the connections the clients closed


@dataclass(frozen=True)
class Sample:
    seconds: float  # since the watch started
    rss_mb: float  # the server with its children, each child's shared pages counted again (as `ps` adds them)
    main_mb: float  # the server process alone
    pss_mb: float | None  # the server with its children, shared pages split between them (every 5th sample)
    children: int
    fds: int


OWN_CLIENT = "its own client's connection to itself"  # Gradio's MCP server calls the app through a gradio_client
FROM_OWN_CLIENT = "the connection from its own client"


def socket_names(connections: list) -> dict[int, str]:
    """A process's sockets by descriptor: its address, peer and state, or, for a server that is a client of itself,
    which end of that connection it is (the ports differ from run to run, the ends do not)."""
    listening = {c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN}
    own_clients = {c.laddr.port for c in connections if c.raddr and c.raddr.port in listening}
    names = {}
    for c in connections:
        if c.raddr and c.raddr.port in listening:
            names[c.fd] = OWN_CLIENT
        elif c.raddr and c.laddr.port in listening and c.raddr.port in own_clients:
            names[c.fd] = FROM_OWN_CLIENT
        else:
            names[c.fd] = f"{c.type.name} {c.laddr} -> {c.raddr or '-'} {c.status}"
    return names


def descriptor(member: psutil.Process, fd: int, sockets: dict[int, str]) -> str:
    """What one open file descriptor is: a socket (`socket_names`), a file's path, or the kind (pipe, ...)."""
    if fd in sockets:
        return sockets[fd]
    try:
        target = os.readlink(f"/proc/{member.pid}/fd/{fd}")
    except OSError:
        return "gone"
    return target.split(":[")[0] if ":[" in target else target  # pipe:[123] -> pipe


def descriptors(process: psutil.Process) -> Counter:
    """The server's and its children's open descriptors, described (`descriptor`), counted by description."""
    found: Counter = Counter()
    for member in [process, *process.children(recursive=True)]:
        role = "server" if member.pid == process.pid else "child"
        try:
            connections = getattr(member, "net_connections", member.connections)  # psutil 6 renamed it
            sockets = socket_names(connections("all"))
            fds = [int(fd) for fd in os.listdir(f"/proc/{member.pid}/fd")]
        except (psutil.Error, OSError):  # a decoding child that just ended
            continue
        found.update(f"{role}: {descriptor(member, fd, sockets)}" for fd in fds)
    return found


class Watch:
    """The server's memory (with and without its children) and its open file descriptors, sampled every second;
    which descriptors were open at the start and the end is read once each."""

    def __init__(self, pid: int):
        self.process = psutil.Process(pid)
        self.samples: list[Sample] = []
        self.started = time.monotonic()
        self.stop = threading.Event()
        self.opened_at_start = descriptors(self.process)
        self.sample()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def sample(self, proportional: bool = False) -> None:
        proportional = proportional or len(self.samples) % 5 == 0
        try:
            children = self.process.children(recursive=True)
            main = self.process.memory_info().rss
        except psutil.Error:
            return
        rss, pss, fds = 0, 0, 0
        for member in [self.process, *children]:
            try:
                rss += member.memory_info().rss
                pss += member.memory_full_info().pss if proportional else 0
                fds += member.num_fds()
            except psutil.Error:  # a decoding child that just ended
                pass
        self.samples.append(Sample(time.monotonic() - self.started, rss / 2**20, main / 2**20,
                                   pss / 2**20 if proportional else None, len(children), fds))

    def settle(self, seconds: float = SETTLE_S) -> None:
        """Wait until the server has closed what the finished clients closed: its descriptors stop falling."""
        deadline, last = time.monotonic() + seconds, None
        while time.monotonic() < deadline:
            now = sum(descriptors(self.process).values())
            if now == last:
                return
            last = now
            time.sleep(1.0)

    def loop(self) -> None:
        while not self.stop.wait(1.0):
            self.sample()

    def report(self) -> dict:
        self.stop.set()
        self.settle()
        self.sample(proportional=True)
        opened_at_end = descriptors(self.process)
        times = np.array([s.seconds for s in self.samples])

        def figures(name: str, values: np.ndarray, at: np.ndarray) -> dict:
            late = at >= times[-1] / 2
            slope = float(np.polyfit(at[late], values[late], 1)[0] * 60) if late.sum() >= 3 else None
            return {f"{name}_start_mb": round(values[0]), f"{name}_peak_mb": round(values.max()),
                    f"{name}_end_mb": round(values[-1]),
                    f"{name}_last_half_mb_per_min": None if slope is None else round(slope, 2)}

        shared = [s for s in self.samples if s.pss_mb is not None]
        fds = np.array([s.fds for s in self.samples])
        children = np.array([s.children for s in self.samples])
        return (figures("rss", np.array([s.rss_mb for s in self.samples]), times)
                | figures("main_rss", np.array([s.main_mb for s in self.samples]), times)
                | figures("pss", np.array([s.pss_mb for s in shared]), np.array([s.seconds for s in shared]))
                | {"children_peak": int(children.max()), "children_end": int(children[-1]),
                   "fds_start": int(fds[0]), "fds_peak": int(fds.max()), "fds_end": int(fds[-1]),
                   "fds_left_open": sorted((opened_at_end - self.opened_at_start).elements()),
                   "fds_closed": sorted((self.opened_at_start - opened_at_end).elements())})

    def write(self, path: Path) -> None:
        """The samples as CSV (PSS is empty where it was not read)."""
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow([column.name for column in fields(Sample)])
            writer.writerows([[round(v, 1) if isinstance(v, float) else v for v in astuple(s)] for s in self.samples])
