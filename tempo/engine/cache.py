"""Per-video cache: the work that does not depend on the question (each segment's pixels, or its vision features
where the model runs in this process), so follow-up questions skip it, and the compressor's output for the last
few questions, so that trying other allocations (compare, budget sweeps, batch jobs that differ only in their
settings) skips the compressor too."""

from __future__ import annotations

import ctypes
import functools
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ..config import Limits, SamplingConfig
from ..events import Compression, VideoProbed
from ..video import SamplingPlan
from ..video.segments import PreparedSegment


@dataclass
class VideoEntry:
    """A video's probe, plan and segments (pixels or vision features), and its recent compressions."""

    probed: VideoProbed
    plan: SamplingPlan
    segments: Sequence[PreparedSegment]
    compressions: OrderedDict[str, Compression] = field(default_factory=OrderedDict)  # by query, least recent first

    @property
    def nbytes(self) -> int:
        return sum(s.nbytes for s in self.segments) + sum(c.nbytes for c in self.compressions.values())


class VideoKey(NamedTuple):
    """A file is the same video while its path, size and modification time are unchanged."""

    path: str
    size: int
    mtime_ns: int
    sampling: SamplingConfig | None


class VideoCache:
    """Least-recently-used entries, keyed by file identity and sampling settings, bounded in bytes; each keeps the
    compressions of its `questions_per_video` most recent questions. Files under `content_named` are stored by
    their content (`<folder>/<sha256>/<name>`, as Gradio keeps uploads): one rewritten there with a new
    modification time, as every API call's upload is, is still the same video."""

    def __init__(self, max_bytes: int = Limits.cache_mb * 2**20, questions_per_video: int = Limits.cache_questions,
                 content_named: str | os.PathLike | None = None):
        self.max_bytes = max_bytes
        self.questions_per_video = questions_per_video
        self.content_named = None if content_named is None else os.path.realpath(content_named)
        self._entries: OrderedDict[VideoKey, VideoEntry] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, path: str | os.PathLike, sampling: SamplingConfig) -> VideoKey:
        """The file's identity: its path, size and modification time (not the time, where content names it)."""
        stat, real = os.stat(path), os.path.realpath(path)
        folder = os.path.dirname(real)
        by_content = os.path.dirname(folder) == self.content_named and len(os.path.basename(folder)) == 64
        return VideoKey(real, stat.st_size, 0 if by_content else stat.st_mtime_ns, sampling)

    def get(self, key: VideoKey) -> VideoEntry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def put(self, key: VideoKey, entry: VideoEntry) -> None:
        if entry.nbytes > self.max_bytes:
            return
        with self._lock:
            # A rewritten file (same path and sampling, new size or time) replaces its stale entry.
            stale = [k for k in self._entries if (k.path, k.sampling) == (key.path, key.sampling)]
            for old in stale:
                del self._entries[old]
            self._entries[key] = entry
            self._entries.move_to_end(key)
            dropped = self._evict() + len(stale)
        if dropped:
            give_back_freed_memory()

    def compression(self, key: VideoKey, query: str) -> Compression | None:
        """The compression for `query` of a cached video, if kept."""
        with self._lock:
            entry = self._entries.get(key)
            found = entry.compressions.get(query) if entry is not None else None
            if found is not None:
                assert entry is not None  # found in it
                entry.compressions.move_to_end(query)
            return found

    def remember(self, key: VideoKey, compression: Compression) -> None:
        """Keep `compression` with its cached video (nothing happens if the video is not cached)."""
        query = compression.query
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry.compressions[query] = compression
            entry.compressions.move_to_end(query)
            dropped = 0
            while len(entry.compressions) > self.questions_per_video or \
                    (entry.nbytes > self.max_bytes and len(entry.compressions) > 1):
                entry.compressions.popitem(last=False)
                dropped += 1
            dropped += self._evict()
        if dropped:
            give_back_freed_memory()

    def _evict(self) -> int:
        """Drop the least recently used entries until the rest fit; how many went."""
        dropped = 0
        while sum(e.nbytes for e in self._entries.values()) > self.max_bytes and self._entries:
            self._entries.popitem(last=False)
            dropped += 1
        return dropped

    def __len__(self) -> int:
        return len(self._entries)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None


def give_back_freed_memory() -> None:
    """Return freed heap pages to the system (glibc's malloc_trim). A cached video is thousands of sub-MiB tensors
    among other entries' live ones; once evicted, glibc keeps their pages otherwise, and a server's RSS ends
    well above what its cache holds."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


# Entries hold one model's vision features, so a cache serves one model. Library calls that pass no cache share
# one per model, kept only as long as the model lives; servers own theirs.
_model_caches: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_model_caches_lock = threading.Lock()


def default_cache(model: object) -> VideoCache:
    """The cache `tempo.engine.run` uses for `model` when the caller passes none."""
    with _model_caches_lock:
        cache = _model_caches.get(model)
        if cache is None:
            cache = _model_caches[model] = VideoCache()
        return cache
