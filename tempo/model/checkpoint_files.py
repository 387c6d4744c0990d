"""Where a Tempo checkpoint's files are: a directory, or a Hugging Face hub snapshot fetched into its cache; the base
Qwen3-VL it names (its small files only); their JSON and weight shards."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

from ..errors import ModelError

log = logging.getLogger(__name__)


def _embedded_model() -> str:
    """Tempo-Tiny: assets/tempo-tiny in a clone; in an installed library, the copy its wheel put under share/."""
    clone = Path(__file__).resolve().parents[2] / "assets" / "tempo-tiny"
    installed = Path(sys.prefix) / "share" / "tempo" / "tempo-tiny"
    return str(installed if installed.is_dir() and not clone.is_dir() else clone)


DEFAULT_MODEL = _embedded_model()
RELEVANCE_FILE = "relevance_direction.safetensors"  # kept beside a hub snapshot: not one of its weight files
CHECKPOINT_FILES = ["*.json", "*.safetensors", "*.jinja", "merges.txt", "vocab.json"]
BASE_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json",
              "video_preprocessor_config.json", "chat_template.jinja", "chat_template.json",
              "model.safetensors.index.json"]


def is_hub_id(name: str) -> bool:
    return name.count("/") == 1 and not os.path.exists(name) and not name.startswith((".", "/", "~"))


def _download(repo_id: str, patterns: list[str]) -> str:
    """The repo's snapshot in the Hugging Face cache, fetching what is missing (huggingface_hub draws the progress
    bars); offline ($HF_HUB_OFFLINE), only what the cache already has."""
    from huggingface_hub import constants, snapshot_download

    log.info("looking for %s in the Hugging Face cache (%s)%s", repo_id, constants.HF_HUB_CACHE,
             "" if constants.HF_HUB_OFFLINE else ", downloading what is missing")
    try:
        return snapshot_download(repo_id, allow_patterns=patterns)
    except Exception as exc:
        if constants.HF_HUB_OFFLINE:
            raise ModelError(f"{repo_id} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and "
                             "HF_HUB_OFFLINE is set: load it once with network access, or pass a local "
                             "directory.") from exc
        raise ModelError(f"Could not fetch {repo_id} from the Hugging Face hub ({type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}). Pass a local directory instead.") from exc


def resolve_checkpoint(name_or_path: str | os.PathLike | None) -> str:
    """A local checkpoint directory: the given one, the hub snapshot of a repo id, or the embedded default."""
    name = os.fspath(name_or_path) if name_or_path else DEFAULT_MODEL
    name = os.path.expanduser(name)
    if os.path.isdir(name):
        return name
    if is_hub_id(name):
        return _download(name, CHECKPOINT_FILES)
    raise ModelError(f"No Tempo checkpoint at {name!r}: not a directory and not a hub id like 'Vision-CAIR/Tempo-6B'.")


def resolve_base(config: dict, checkpoint_dir: str, base: str | os.PathLike | None) -> str:
    """The base Qwen3-VL directory: `base` if given, else `mm_vision_tower_aux_list[0]` (a path relative to the
    checkpoint, or a hub id whose small config/tokenizer files are fetched without the weights)."""
    if base is not None:
        base = os.path.expanduser(os.fspath(base))
        if os.path.isdir(base):
            return base
        if is_hub_id(base):
            return _download(base, BASE_FILES)
        raise ModelError(f"Base model {base!r} is neither a directory nor a hub id.")
    towers = config.get("mm_vision_tower_aux_list") or []
    if not towers:
        raise ModelError("The checkpoint config has no mm_vision_tower_aux_list naming its base Qwen3-VL.")
    named = towers[0]
    for candidate in (os.path.join(checkpoint_dir, named), os.path.expanduser(named)):
        if os.path.isdir(candidate):
            return candidate
    if is_hub_id(named):
        return _download(named, BASE_FILES)
    raise ModelError(f"The base model {named!r} named by the checkpoint was not found; pass base=DIR.")


def read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ModelError(f"Missing {os.path.basename(path)} in {os.path.dirname(path)}.") from None
    except json.JSONDecodeError as exc:
        raise ModelError(f"{path} is not valid JSON ({exc}).") from None


def weight_files(directory: str) -> list[str]:
    index = os.path.join(directory, "model.safetensors.index.json")
    if os.path.isfile(index):
        shards = sorted(set(read_json(index)["weight_map"].values()))
        return [os.path.join(directory, shard) for shard in shards]
    files = sorted(str(p) for p in Path(directory).glob("*.safetensors") if p.name != RELEVANCE_FILE)
    if not files:
        raise ModelError(f"No *.safetensors weights in {directory}.")
    return files
