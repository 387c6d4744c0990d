"""The relevance direction, w_yes - w_no of the base model's LM head: two rows read tensor by tensor from local
weights or by HTTP byte ranges from the hub, so the 4 GB base weights are never needed, and cached once read."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import Qwen3VLConfig

from ..errors import ModelError
from ..paths import cache_folder
from .checkpoint_files import RELEVANCE_FILE, read_json

log = logging.getLogger(__name__)

SAFETENSORS_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
RANGE_IGNORED_LIMIT = 256 * 2**20  # bytes streamed past, at most, from a server that ignores range requests


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
    shards = sorted(set(read_json(index)["weight_map"].values())) if os.path.isfile(index) else ["model.safetensors"]
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
