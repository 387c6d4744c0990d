"""Bounded by design: every store a server keeps has a cap from the settings table (SERVER rows, $TEMPO_<NAME>), and
the oldest entry leaves first: the per-video cache (videos by bytes, compressions per video), the upload folder
(uploads, handed-over videos, preview proxies, files handed out) and the visitors' sessions."""

from __future__ import annotations

import contextlib
import os
import sys
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from appserver import free_port, load_app_model

from demo.launch import serve as launch
from demo.server import Server
from demo.settings import server_settings
from demo.stores import UploadStore
from tempo.config import Limits
from tempo.engine import VideoCache
from tempo.engine.steps import VideoKey
from tempo.errors import InputError
from tempo.settings import SERVER, limits_from_env, settings

MB = 2**20


class Entry:
    """A cached video of a given size, with its compressions (what VideoCache reads of an entry)."""

    def __init__(self, nbytes: int):
        self.segment_bytes = nbytes
        self.compressions: OrderedDict = OrderedDict()

    @property
    def nbytes(self) -> int:
        return self.segment_bytes + sum(c.nbytes for c in self.compressions.values())


def compression(query: str) -> SimpleNamespace:
    return SimpleNamespace(query=query, nbytes=1)


def test_each_cap_is_a_server_setting_read_from_its_variable(monkeypatch):
    assert {s.name for s in settings(SERVER)} >= {"cache_mb", "cache_questions", "uploads_mb", "sessions"}
    monkeypatch.setenv("TEMPO_CACHE_MB", "64")
    monkeypatch.setenv("TEMPO_SESSIONS", "20")
    monkeypatch.setenv("TEMPO_ALLOWED_HOSTS", "lab-box")
    limits = limits_from_env()
    assert (limits.cache_mb, limits.sessions, limits.allowed_hosts) == (64, 20, "lab-box")
    assert limits.uploads_mb == Limits.uploads_mb == 10240 and limits.cache_questions == 8
    monkeypatch.setenv("TEMPO_UPLOADS_MB", "0")
    with pytest.raises(InputError, match=r"^TEMPO_UPLOADS_MB: Upload folder 0 is less than minimum 1"):
        limits_from_env()


def test_a_renamed_setting_still_reads_its_old_variable_with_a_warning(monkeypatch, caplog):
    monkeypatch.delenv("TEMPO_LIVE_RECENT_MIN", raising=False)
    monkeypatch.setenv("TEMPO_LIVE_WINDOW_MIN", "3")
    with caplog.at_level("WARNING", logger="tempo.settings"):
        assert limits_from_env().live_recent_min == 3
    assert "TEMPO_LIVE_WINDOW_MIN is the old name of TEMPO_LIVE_RECENT_MIN" in caplog.text
    monkeypatch.setenv("TEMPO_LIVE_WINDOW_MIN", "0")
    with pytest.raises(InputError, match=r"^TEMPO_LIVE_WINDOW_MIN: "):  # the error names the variable that was set
        limits_from_env()
    monkeypatch.setenv("TEMPO_LIVE_RECENT_MIN", "7")  # the new name wins, without a warning
    caplog.clear()
    assert limits_from_env().live_recent_min == 7 and "old name" not in caplog.text


def test_the_cache_keeps_each_videos_latest_questions_only():
    cache = VideoCache(max_bytes=100, questions_per_video=2)
    key = VideoKey("a", 1, 1, None)
    cache.put(key, Entry(10))
    for question in ("first", "second", "third"):
        cache.remember(key, compression(question))
    assert cache.compression(key, "first") is None
    assert cache.compression(key, "second") is not None  # now the most recently asked
    cache.remember(key, compression("fourth"))
    assert cache.compression(key, "third") is None and cache.compression(key, "second") is not None


def test_the_cache_gives_freed_memory_back_after_it_drops_something(monkeypatch):
    """Evicted videos are thousands of small tensors among live ones: their pages go back to the system then
    (malloc_trim; the soak measures what it saves), and only then."""
    import tempo.engine.cache as cache_module

    trims = []
    monkeypatch.setattr(cache_module, "give_back_freed_memory", lambda: trims.append(len(cache)))
    cache = VideoCache(max_bytes=100, questions_per_video=1)
    first, second = VideoKey("a", 1, 1, None), VideoKey("b", 1, 1, None)
    cache.put(first, Entry(60))
    cache.remember(first, compression("one"))
    assert trims == []  # nothing dropped yet
    cache.remember(first, compression("two"))  # one question per video: "one" goes
    assert trims == [1]
    cache.put(second, Entry(60))  # over the cap: the first video goes
    assert trims == [1, 1] and cache.get(first) is None
    monkeypatch.undo()
    cache_module.give_back_freed_memory()  # the real one, wherever the suite runs: glibc or a no-op


def test_the_server_builds_its_cache_from_the_settings(fixtures):
    server = Server(load_app_model(fixtures), replace(Limits(), cache_mb=3, cache_questions=2))
    assert (server.cache.max_bytes, server.cache.questions_per_video) == (3 * MB, 2)
    first, second = VideoKey("first", 1, 1, None), VideoKey("second", 1, 1, None)
    server.cache.put(first, Entry(2 * MB))
    server.cache.put(second, Entry(2 * MB))  # together over 3 MB: the older leaves
    assert server.cache.get(first) is None and server.cache.get(second) is not None


def file_at(folder: Path, name: str, size: int, age_s: float) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    stamp = 1_700_000_000 - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_the_upload_folder_loses_its_oldest_files_first(tmp_path):
    oldest = file_at(tmp_path, "a" * 64 + "/old.mp4", 400, age_s=300)
    example = file_at(tmp_path, "b" * 64 + "/example.mp4", 400, age_s=400)  # older still, but kept
    middle = file_at(tmp_path, "c" * 64 + "/middle.mp4", 400, age_s=200)
    newest = file_at(tmp_path, "d" * 64 + "/new.mp4", 400, age_s=100)
    partial = file_at(tmp_path, ".handed-123", 5000, age_s=500)  # still being written
    listed = {str(oldest), str(middle), "elsewhere"}
    store = UploadStore(tmp_path, 1000, keep=lambda: {str(example)}, forget=[listed])
    assert store.trim() == [str(oldest), str(middle)]
    assert example.exists() and newest.exists() and partial.exists()
    assert not oldest.parent.exists()  # each upload's folder goes with its file
    assert listed == {"elsewhere"}  # Gradio's lists of its files forget what was deleted
    assert store.trim() == [] and store.size() == 800


def test_the_app_trims_its_uploads_and_keeps_few_sessions(fixtures, tmp_path, monkeypatch):
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    limits = replace(limits_from_env(), uploads_mb=1, sessions=3)
    with contextlib.redirect_stdout(sys.stderr):
        demo = launch(load_app_model(fixtures), limits, server_name="127.0.0.1", server_port=free_port(),
                      prevent_thread_lock=True, quiet=True)
    try:
        url = demo.local_url.rstrip("/")
        paths = []
        for n in range(3):
            response = httpx.post(url + "/gradio_api/upload",
                                  files={"files": (f"clip{n}.mp4", bytes([n]) * 450_000, "video/mp4")})
            paths.append(Path(response.json()[0]))
        assert not paths[0].exists() and paths[1].exists() and paths[2].exists()  # 0.43 MB each, 1 MB in all
        page = httpx.get(url + "/config").json()
        for n in range(5):  # five visitors; the state of the two seen least recently goes
            demo.state_holder[f"visitor-{n}"]
        assert list(demo.state_holder.session_data) == ["visitor-2", "visitor-3", "visitor-4"]
    finally:
        demo.close()
    shown = [c["props"].get("value") for c in page["components"]
             if c["props"].get("elem_id") == "tempo-server-settings"]
    assert shown == [server_settings(limits)] and "upload folder 1 MB" in shown[0] and "sessions kept 3" in shown[0]


def test_the_page_says_what_the_server_keeps():
    text = server_settings(Limits())
    for part in ("per-video cache 2,048 MB", "compressions per video 8", "upload folder 10,240 MB",
                 "sessions kept 1,000", "TEMPO_UPLOADS_MB"):
        assert part in text
