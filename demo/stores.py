"""The upload folder, bounded: Gradio keeps every upload, every video handed to the tools, every preview proxy and
every file the page hands out (reports, frames) in one folder, and deletes by age only (`delete_cache`), so an
hour of busy visitors could fill the disk. `UploadStore.trim` deletes the oldest files (by last use: Gradio
touches a file it hands out again) until the folder is within `Limits.uploads_mb`; `TrimAfterRequests` runs it
after each upload and, at most once a second, after other requests."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

TRIM_EVERY_S = 1.0  # a request's end starts a trim at most this often: a scan of the folder is cheap, not free


class UploadStore:
    """A folder whose files together stay within `max_bytes`, the oldest deleted first. `keep()` names files never
    deleted (the shipped examples' copies); `forget` sets (Gradio's lists of its temporary files) lose a deleted
    file's path."""

    def __init__(self, folder: Path, max_bytes: int, keep: Callable[[], set[str]] = set,
                 forget: Iterable[set[str]] = ()):
        self.folder = folder
        self.max_bytes = max_bytes
        self.keep = keep
        self.forget = forget  # read at each trim: Gradio adds sets as it goes
        self._lock = threading.Lock()

    def files(self) -> list[tuple[float, int, str]]:
        """(last modified, size, path) of every finished file, oldest first; files still being written (Gradio's
        and the handover's hidden partial files) are left out."""
        found = []
        for root, folders, names in os.walk(self.folder):
            folders[:] = [name for name in folders if not name.startswith(".")]
            for name in names:
                if name.startswith("."):
                    continue
                path = os.path.join(root, name)
                try:
                    stat = os.lstat(path)
                except OSError:  # deleted meanwhile
                    continue
                found.append((stat.st_mtime, stat.st_size, path))
        return sorted(found)

    def size(self) -> int:
        return sum(size for _, size, _ in self.files())

    def trim(self) -> list[str]:
        """Delete the oldest files until the folder is within its cap; returns what was deleted."""
        with self._lock:
            files = self.files()
            total = sum(size for _, size, _ in files)
            keep = self.keep() if total > self.max_bytes else set()
            deleted = []
            for _, size, path in files:
                if total <= self.max_bytes:
                    break
                if path in keep:
                    continue
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                except OSError as exc:
                    log.info("could not delete %s: %s", path, exc)
                    continue
                total -= size
                deleted.append(path)
                self._tidy(Path(path).parent)
            for paths in self.forget:
                paths.difference_update(deleted)
        if deleted:
            log.info("upload folder over %d MB: deleted the %d oldest files", self.max_bytes // 2**20, len(deleted))
        return deleted

    def _tidy(self, folder: Path) -> None:
        """Remove `folder` once empty (each upload has a folder of its own, named by its content)."""
        if folder != self.folder and folder.is_relative_to(self.folder):
            try:
                folder.rmdir()
            except OSError:  # not empty, or gone
                pass


class TrimAfterRequests:
    """ASGI middleware that trims the store in a worker thread: after every upload, before its answer's last byte
    goes out (so a client that has its path back finds the folder within its cap), and after any other request
    (an event's results handed out, a tool's download) at most every TRIM_EVERY_S."""

    def __init__(self, app: ASGIApp, store: UploadStore):
        self.app = app
        self.store = store
        self.last = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        upload = scope["path"].endswith("/upload")

        async def trimmed_first(message: Message) -> None:
            if upload and message["type"] == "http.response.body" and not message.get("more_body", False):
                await self.trim()
            await send(message)

        await self.app(scope, receive, trimmed_first)
        if not upload and time.monotonic() - self.last >= TRIM_EVERY_S:
            await self.trim()

    async def trim(self) -> None:
        self.last = time.monotonic()
        await anyio.to_thread.run_sync(self.store.trim)
