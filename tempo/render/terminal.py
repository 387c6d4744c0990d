"""Progress on a terminal (stderr): one line rewritten in place on a terminal, lines at intervals elsewhere (a log
file, CI), for the command line's segments and a batch's jobs alike."""

from __future__ import annotations

import time
from typing import TextIO

WIDTH = 160  # a rewritten line is padded to this, so a shorter line leaves nothing of the last behind


class ProgressLine:
    """`show(done, text)` after each of `total` steps: rewritten on a terminal; elsewhere a line each step, or
    each time another `every` of the total is done (0.1: every 10%), and at the end."""

    def __init__(self, stream: TextIO, total: int, every: float = 0.0):
        self.stream, self.total, self.every = stream, total, every
        self.tty = stream.isatty()
        self.started = time.perf_counter()
        self.done, self.shown_part = 0, -1

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def eta(self, done: int) -> float:
        """Seconds to go, at the pace so far."""
        return self.elapsed() / max(1, done) * (self.total - done)

    def show(self, done: int, text: str) -> None:
        self.done, last = done, done >= self.total
        if self.tty:
            self.stream.write("\r" + text[:WIDTH].ljust(WIDTH) + ("\n" if last else ""))
        else:
            part = int(done / max(1, self.total) / self.every) if self.every else done
            if part > self.shown_part or last:
                self.shown_part = part
                self.stream.write(text + "\n")
        self.stream.flush()
