"""The Space's README front matter preloads what the app loads, so that a cold start downloads nothing.

On a Space with a GPU the app serves demo.launch.SPACE_MODEL (Vision-CAIR/Tempo-6B). Its checkpoint is fetched
with glob patterns (checkpoint_files.CHECKPOINT_FILES: its shard names are not known here, and `preload_from_hub`
takes no globs), so it must be preloaded whole. Its base, named by the checkpoint's mm_vision_tower_aux_list, gives its
config, tokenizer and processor config, and the two LM-head rows of the relevance direction. Those rows live in
the base's one 4.26 GB model.safetensors (Qwen3-VL-2B-Instruct ties its head to the embedding table), so the
choice is: preload that file, and the start reads them locally with no network at all; or leave them to an
~8 KB HTTP range request at every start, which needs the hub up and fails under HF_HUB_OFFLINE. We preload it,
and so the whole base repo: that names no file the repo might lack (a missing named file can fail the build).
"""

from __future__ import annotations

import pytest

from benchmarks import cold_start
from tempo.model import checkpoint_files, loading
from tests.conftest import FIXTURES, ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
# What the loader reads from the base directory: its config, tokenizer and (video) processor config.
BASE_READ = ["config.json", "tokenizer.json", "preprocessor_config.json", "video_preprocessor_config.json"]
BASE_WEIGHTS = "model.safetensors"  # the relevance direction's rows, read locally (see the docstring)


def base_repo() -> str:
    """The base the released checkpoint names (the conformance fixture keeps the released config)."""
    return loading.checkpoint_config(str(FIXTURES / "tempo"))["mm_vision_tower_aux_list"][0]


def needed() -> dict[str, list[str]]:
    """Per repo, the file patterns a Space's start loads: the checkpoint's globs and the base's files."""
    return {cold_start.space_model(): checkpoint_files.CHECKPOINT_FILES, base_repo(): [*BASE_READ, BASE_WEIGHTS]}


def covered(preload: cold_start.Preload, pattern: str) -> bool:
    """A whole-repo preload covers any pattern; named files cover their own names, never a glob."""
    return preload.files is None or pattern in preload.files


def problems(readme: str) -> list[str]:
    """What the front matter of `readme` fails to name or preload of what the app loads."""
    config = cold_start.front_matter(readme)
    preloaded = cold_start.preloads(config)
    found = []
    for repo, patterns in needed().items():
        if repo not in (config.get("models") or []):
            found.append(f"{repo} is not in models")
        if repo not in preloaded:
            found.append(f"{repo} is not in preload_from_hub")
            continue
        found += [f"{repo}: {pattern} is not preloaded" for pattern in patterns
                  if not covered(preloaded[repo], pattern)]
    return found


def test_the_front_matter_preloads_and_names_what_the_space_loads():
    assert problems(README) == []


def test_the_files_held_to_are_the_loaders_own():
    assert set(BASE_READ) <= set(checkpoint_files.BASE_FILES)
    assert cold_start.space_model() == "Vision-CAIR/Tempo-6B" and base_repo() == "Qwen/Qwen3-VL-2B-Instruct"


PRELOAD = "preload_from_hub:\n"
BROKEN = {  # name: (text replaced in the front matter, its replacement, the problem expected)
    "checkpoint-not-preloaded": (PRELOAD + "  - Vision-CAIR/Tempo-6B\n", PRELOAD,
                                 "Vision-CAIR/Tempo-6B is not in preload_from_hub"),
    "checkpoint-by-named-files": (PRELOAD + "  - Vision-CAIR/Tempo-6B\n",
                                  PRELOAD + "  - Vision-CAIR/Tempo-6B config.json,model.safetensors\n",
                                  "Vision-CAIR/Tempo-6B: *.safetensors is not preloaded"),
    "base-without-weights": ("  - Qwen/Qwen3-VL-2B-Instruct\n---", f"  - Qwen/Qwen3-VL-2B-Instruct "
                             f"{cold_start.BASE_WITHOUT_WEIGHTS}\n---",
                             "Qwen/Qwen3-VL-2B-Instruct: model.safetensors is not preloaded"),
    "base-not-in-models": ("  - Qwen/Qwen3-VL-2B-Instruct\n" + PRELOAD, PRELOAD,
                           "Qwen/Qwen3-VL-2B-Instruct is not in models"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_front_matter_missing_an_entry_fails_the_check(name):
    old, new, expected = BROKEN[name]
    broken = README.replace(old, new, 1)
    assert broken != README, f"the front matter no longer has {old!r}: update BROKEN"
    assert expected in problems(broken)


def test_the_space_starts_from_the_preloaded_cache_with_no_network(tmp_path):
    """The benchmark's cold start: a fresh process, HF_HUB_OFFLINE=1, every connection refused."""
    cold_start.build_cache(tmp_path, README, FIXTURES)
    run = cold_start.cold_start(tmp_path, offline=True)
    assert run["loaded"], run.get("error")
    assert run["network_attempts"] == [] and run["memory_tokens"] == 32
    if run["files_read"] is not None:  # the base's rows came from its preloaded weights
        assert BASE_WEIGHTS in run["files_read"][base_repo()]


def test_the_cold_start_sees_every_connection_its_process_tries(monkeypatch):
    """So that 'no network attempt' above means none was made, not that none was seen."""
    import socket

    for owner, name in ((socket.socket, "connect"), (socket.socket, "connect_ex"), (socket, "getaddrinfo")):
        monkeypatch.setattr(owner, name, getattr(owner, name))  # restored after the test
    attempts: list[str] = []
    cold_start.refuse_network(attempts)
    with pytest.raises(OSError, match="network blocked"):
        socket.create_connection(("huggingface.co", 443), timeout=1)
    with socket.socket() as sock, pytest.raises(OSError, match="network blocked"):
        sock.connect(("127.0.0.1", 9))
    assert [attempt.rpartition(" (")[0] for attempt in attempts] == ["resolve huggingface.co:443",
                                                                "connect ('127.0.0.1', 9)"]
