"""The released Tempo checkpoint format (`model_type: tempo_qwen`): finding it (directory or Hugging Face hub),
reading its configs and weights, and the relevance direction of its base model.

The base Qwen3-VL named by `mm_vision_tower_aux_list` supplies only its config, tokenizer, processor settings
and two LM-head rows (the relevance direction). Those rows are read once -- tensor by tensor locally, or by
HTTP byte ranges from the hub -- and cached beside the checkpoint, so the 4 GB base weights are never needed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import Qwen3VLConfig

from ..errors import ModelError
from ..paths import cache_folder
from ..video.patches import PatchGeometry
from .tokenizer import TextTokenizer

log = logging.getLogger(__name__)


def _embedded_model() -> str:
    """Tempo-Tiny: assets/tempo-tiny in a clone; in an installed library, the copy its wheel put under share/."""
    clone = Path(__file__).resolve().parents[2] / "assets" / "tempo-tiny"
    installed = Path(sys.prefix) / "share" / "tempo" / "tempo-tiny"
    return str(installed if installed.is_dir() and not clone.is_dir() else clone)


DEFAULT_MODEL = _embedded_model()
RELEVANCE_FILE = "relevance_direction.safetensors"
CHECKPOINT_FILES = ["*.json", "*.safetensors", "*.jinja", "merges.txt", "vocab.json"]
BASE_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json", "preprocessor_config.json",
              "video_preprocessor_config.json", "chat_template.jinja", "chat_template.json",
              "model.safetensors.index.json"]
SAFETENSORS_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
RANGE_IGNORED_LIMIT = 256 * 2**20  # bytes streamed past, at most, from a server that ignores range requests


@dataclass(frozen=True)
class CheckpointSpec:
    """The released config keys inference reads, with the release's defaults."""

    name: str
    num_memory_tokens: int
    visual_token_budget: int = 8192
    context_length: int = 16384  # tokenizer_model_max_length
    inference_reserve: int = 16  # inference_max_length: room kept free when the visual sequence is cut
    stop_ids: frozenset[int] = field(default_factory=frozenset)
    top_k: int = 0  # generation_config.json's top_k, used when sampling
    trained_world: str | None = None  # our own key: "synthetic" for a model that only knows tempo.synthetic
    repetition_guard: bool = False  # our own key: never generate a word three times in a row
    takes_history: bool = True  # our own key (default: ChatML decoders do): earlier turns reach the decoder
    history_tokens: int = 1024  # the most tokens of earlier turns a question carries


# ---------------------------------------------------------------------------------------------- locating files

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


def _read_json(path: str) -> dict:
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
        shards = sorted(set(_read_json(index)["weight_map"].values()))
        return [os.path.join(directory, shard) for shard in shards]
    files = sorted(str(p) for p in Path(directory).glob("*.safetensors") if p.name != RELEVANCE_FILE)
    if not files:
        raise ModelError(f"No *.safetensors weights in {directory}.")
    return files


# ------------------------------------------------------------------------------------------- relevance direction

def read_rows(read: Callable[[int, int], bytes], tensor: str, rows: list[int]) -> list[torch.Tensor]:
    """Rows of a 2-D tensor in a safetensors file, given only `read(offset, length)` (a file or HTTP ranges)."""
    header_length = int.from_bytes(read(0, 8), "little")
    header = json.loads(read(8, header_length))
    if tensor not in header:
        raise KeyError(tensor)
    info = header[tensor]
    dtype = SAFETENSORS_DTYPES[info["dtype"]]
    row_bytes = info["shape"][1] * torch.finfo(dtype).bits // 8
    start = 8 + header_length + info["data_offsets"][0]
    return [torch.frombuffer(bytearray(read(start + row * row_bytes, row_bytes)), dtype=dtype).clone() for row in rows]


def _local_reader(path: str) -> Callable[[int, int], bytes]:
    def read(offset: int, length: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(offset)
            return f.read(length)
    return read


def _http_reader(url: str) -> Callable[[int, int], bytes]:
    """Byte ranges of a remote file, read as a stream (the hub serves HTTP range requests; a server that ignores
    them sends the whole file, which is read only as far as needed and never held whole)."""
    from huggingface_hub.utils import build_hf_headers, get_session

    # The hub's HTTP client is httpx under huggingface_hub 1.x and httpx2 under 2.x: its errors are its package's.
    http_error = sys.modules[type(get_session()).__module__.split(".")[0]].HTTPError

    def read(offset: int, length: int) -> bytes:
        try:
            return ranged(offset, length)
        except (http_error, OSError) as exc:  # OSError: no network, or the hub switched off (HF_HUB_OFFLINE)
            raise ModelError(f"Could not read the relevance direction from {url} ({type(exc).__name__}: {exc}). "
                             "The base model's weights are neither local nor reachable: download the base model "
                             "and pass base=DIR (or $TEMPO_BASE).") from None

    def ranged(offset: int, length: int) -> bytes:
        headers = {**build_hf_headers(), "Range": f"bytes={offset}-{offset + length - 1}"}
        with get_session().stream("GET", url, headers=headers, follow_redirects=True) as response:
            response.raise_for_status()
            if response.status_code == 206:
                return _take(response.iter_bytes(), 0, length, url)
            if offset + length > RANGE_IGNORED_LIMIT:
                raise ModelError(f"{url} ignores HTTP range requests, so reading the relevance direction would "
                                 f"download {(offset + length) / 2**20:,.0f} MB of it. Download the base model "
                                 "and pass base=DIR (or $TEMPO_BASE).")
            return _take(response.iter_bytes(), offset, length, url)
    return read


def _take(chunks: Iterator[bytes], skip: int, length: int, url: str) -> bytes:
    """Bytes [skip, skip + length) of a stream, holding one chunk at a time besides them; stops reading there."""
    wanted, position = bytearray(), 0
    for chunk in chunks:
        start = max(0, skip - position)
        if start < len(chunk):
            wanted += chunk[start:start + length - len(wanted)]
        position += len(chunk)
        if len(wanted) == length:
            return bytes(wanted)
    raise ModelError(f"{url} ended after {position:,} bytes, before byte {skip + length:,}.")


def _head_tensor_names(base_config: Qwen3VLConfig) -> list[str]:
    tied = getattr(base_config, "tie_word_embeddings", False)
    embeds = ["model.language_model.embed_tokens.weight", "model.embed_tokens.weight"]
    return embeds if tied else ["lm_head.weight"] + embeds


def _base_weight_locations(base_dir: str, base_repo: str | None) -> Iterator[Callable[[int, int], bytes]]:
    """Readers over each base weight file: local files if present, else the hub's files by byte range."""
    local = [str(p) for p in Path(base_dir).glob("*.safetensors")]
    if local:
        yield from (_local_reader(p) for p in sorted(local))
        return
    if base_repo is None:
        raise ModelError(f"{base_dir} has no weights to read the relevance direction from.")
    index = os.path.join(base_dir, "model.safetensors.index.json")
    shards = sorted(set(_read_json(index)["weight_map"].values())) if os.path.isfile(index) else ["model.safetensors"]
    from huggingface_hub import hf_hub_url

    yield from (_http_reader(hf_hub_url(base_repo, shard)) for shard in shards)


def relevance_direction(base_dir: str, base_repo: str | None, base_config: Qwen3VLConfig,
                        yes_id: int, no_id: int) -> torch.Tensor:
    """w_yes - w_no from the base LM head (the embedding table when tied), subtracted in the stored dtype."""
    for read in _base_weight_locations(base_dir, base_repo):
        for name in _head_tensor_names(base_config):
            try:
                yes, no = read_rows(read, name, [yes_id, no_id])
            except KeyError:
                continue
            return (yes - no).float()
    raise ModelError(f"No LM head or embedding table found in the base weights of {base_repo or base_dir}.")


def relevance_metadata(base_dir: str, yes_id: int, no_id: int) -> dict[str, str]:
    """Identifies the base a cached direction came from (its config) and the two token ids it used."""
    with open(os.path.join(base_dir, "config.json"), "rb") as f:
        fingerprint = hashlib.sha256(f.read()).hexdigest()[:16]
    return {"base": fingerprint, "yes_id": str(yes_id), "no_id": str(no_id)}


def save_relevance_direction(path: str, direction: torch.Tensor, metadata: dict[str, str]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    save_file({"direction": direction.float().contiguous()}, path, metadata=metadata)


def cached_relevance_direction(checkpoint_dir: str, from_hub: bool, base_dir: str, base_repo: str | None,
                               base_config: Qwen3VLConfig, yes_id: int, no_id: int) -> torch.Tensor:
    """The direction cached beside the checkpoint (or in $TEMPO_CACHE), extracted from the base on first use.

    A hub snapshot gets the file beside it; a local checkpoint directory is never written to (it may be
    shared or read-only), so its direction is cached under the cache folder (`paths.cache_folder`) instead.
    """
    metadata = relevance_metadata(base_dir, yes_id, no_id)
    key = hashlib.sha256(os.path.abspath(checkpoint_dir).encode()).hexdigest()[:16]
    beside = os.path.join(checkpoint_dir, RELEVANCE_FILE)
    cached = cache_folder(key, RELEVANCE_FILE)
    for path in (beside, cached):
        if os.path.isfile(path):
            with safe_open(path, "pt") as f:
                if f.metadata() == metadata:
                    return f.get_tensor("direction")
    direction = relevance_direction(base_dir, base_repo, base_config, yes_id, no_id)
    target = beside if from_hub else cached
    try:
        save_relevance_direction(target, direction, metadata)
        log.info("cached relevance direction at %s", target)
    except OSError as exc:
        log.warning("could not cache the relevance direction at %s (%s)", target, exc)
    return direction


# ------------------------------------------------------------------------------------------ configs and weights

def attention_implementation(device: torch.device) -> str:
    if device.type == "cuda":
        with contextlib.suppress(ImportError):
            import flash_attn  # noqa: F401
            return "flash_attention_2"
    return "sdpa"


def _parameter_name(key: str) -> str:
    """Released checkpoint key -> our module path."""
    tower = "model.vision_tower_aux_list.0."
    if key.startswith(tower + "vlm.model."):
        return "compressor.vlm." + key[len(tower + "vlm.model."):]
    if key == tower + "compression_tokens":
        return "compressor.compression_tokens"
    if key.startswith("model.mm_projector."):
        return "decoder.mm_projector." + key[len("model.mm_projector."):]
    return "decoder.lm." + key


def load_weights(model: torch.nn.Module, files: list[str]) -> None:
    """Copy the checkpoint tensors into `model` (a `TempoModel`), checking shapes and completeness."""
    parameters = dict(model.named_parameters())
    missing = set(parameters)
    unexpected = []
    for file in files:
        with safe_open(file, "pt") as f:
            for key in f.keys():
                name = _parameter_name(key)
                if name not in parameters:
                    unexpected.append(key)
                    continue
                tensor = f.get_tensor(key)
                if tensor.shape != parameters[name].shape:
                    raise ModelError(f"{key} has shape {tuple(tensor.shape)}, the config implies "
                                     f"{tuple(parameters[name].shape)}.")
                with torch.no_grad():
                    parameters[name].copy_(tensor)
                missing.discard(name)
    if unexpected:
        log.warning("ignored %d checkpoint tensors, e.g. %s", len(unexpected), unexpected[:3])
    if missing:
        raise ModelError(f"The checkpoint lacks {len(missing)} weights, e.g. {sorted(missing)[:3]}.")


def checkpoint_config(checkpoint_dir: str) -> dict:
    """The checkpoint's config.json, checked for the keys inference cannot do without."""
    config = _read_json(os.path.join(checkpoint_dir, "config.json"))
    if config.get("model_type") != "tempo_qwen":
        raise ModelError(f"{checkpoint_dir} is not a Tempo checkpoint (model_type {config.get('model_type')!r}).")
    if "num_compression_tokens" not in config:
        raise ModelError("The checkpoint config lacks num_compression_tokens.")
    return config


def patch_geometry(base_dir: str) -> PatchGeometry:
    """The compressor's patch layout, from the base's (video) processor config."""
    processor_file = next((os.path.join(base_dir, f) for f in ("video_preprocessor_config.json",
                                                               "preprocessor_config.json")
                           if os.path.isfile(os.path.join(base_dir, f))), None)
    return PatchGeometry.from_processor_config(_read_json(processor_file) if processor_file else {})


def checkpoint_spec(checkpoint_dir: str, config: dict, tokenizer: TextTokenizer, name: str) -> CheckpointSpec:
    """What inference reads from config.json and generation_config.json."""
    generation = {}
    if os.path.isfile(os.path.join(checkpoint_dir, "generation_config.json")):
        generation = _read_json(os.path.join(checkpoint_dir, "generation_config.json"))
    eos = generation.get("eos_token_id", config.get("eos_token_id"))
    stop_ids = {tokenizer.token_id("<|im_end|>")} | set(eos if isinstance(eos, list) else [eos] if eos is not None
                                                         else [])
    return CheckpointSpec(
        name=name,
        num_memory_tokens=int(config["num_compression_tokens"]),
        visual_token_budget=int(config.get("visual_token_budget", 8192)),
        context_length=int(config.get("tokenizer_model_max_length", 16384)),
        inference_reserve=int(config.get("inference_max_length", 16)),
        stop_ids=frozenset(stop_ids),
        top_k=int(generation.get("top_k", 0) or 0),
        trained_world=config.get("tempo_trained_world"),
        repetition_guard=bool(config.get("tempo_repetition_guard", False)),
        takes_history=bool(config.get("tempo_takes_history", True)),
    )


def checkpoint_key(name: str) -> str:
    """Our module path -> released checkpoint key (the inverse of `_parameter_name`)."""
    tower = "model.vision_tower_aux_list.0."
    if name.startswith("compressor.vlm."):
        return tower + "vlm.model." + name[len("compressor.vlm."):]
    if name == "compressor.compression_tokens":
        return tower + "compression_tokens"
    if name.startswith("decoder.mm_projector."):
        return "model.mm_projector." + name[len("decoder.mm_projector."):]
    return name[len("decoder.lm."):]

