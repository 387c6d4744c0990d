"""Where the library keeps what it makes once (relevance directions, benchmark and synthetic videos)."""

from __future__ import annotations

import os

CACHE_FOLDER = "~/.cache/tempo"  # unless $TEMPO_CACHE says elsewhere


def cache_folder(*parts: str) -> str:
    """A path under the library's cache folder: $TEMPO_CACHE, or CACHE_FOLDER."""
    return os.path.join(os.environ.get("TEMPO_CACHE") or os.path.expanduser(CACHE_FOLDER), *parts)
