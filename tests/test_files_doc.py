"""docs/files.md, the file-by-file map a newcomer reads first, names every module of the library and the demo."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT


def named_words(text: str) -> set[str]:
    """Every word inside the map's code spans (`tempo/video/clip.py` gives tempo, video, clip and py)."""
    return {word for span in re.findall(r"`([^`]+)`", text) for word in re.split(r"[^A-Za-z0-9_]+", span)}


def unnamed_modules(text: str, root: Path) -> list[str]:
    """The modules of tempo/ and demo/ whose names the map never gives."""
    words = named_words(text)
    modules = sorted(root.glob("tempo/**/*.py")) + sorted(root.glob("demo/*.py"))
    return [str(path.relative_to(root)) for path in modules
            if path.stem not in ("__init__", "__main__") and path.stem not in words]


def test_the_map_names_every_module():
    assert unnamed_modules((ROOT / "docs" / "files.md").read_text(encoding="utf-8"), ROOT) == []


def test_a_module_left_out_of_the_map_is_caught(tmp_path):
    (tmp_path / "tempo" / "video").mkdir(parents=True)
    (tmp_path / "tempo" / "video" / "clip.py").write_text("", encoding="utf-8")
    (tmp_path / "tempo" / "video" / "subtitles.py").write_text("", encoding="utf-8")
    assert unnamed_modules("`clip` (a span cut to an mp4)", tmp_path) == ["tempo/video/subtitles.py"]
