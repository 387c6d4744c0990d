"""What every resumable stage shares: the state file (every weight in half precision, the tokenizer and the stage
number in its header), resuming from it with the stage's own random streams, and the composed-input pools."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer
from torch import nn

from ..model import TempoModel, build_model, save_pretrained
from ..synthetic import SyntheticVideo, generate_video
from .compose import FAMILIES, Composer, PoolItem, build_pool
from .curriculum import set_relevance_direction
from .grow import decoder_size, grown, widened
from .loop import ProgressFile
from .recipe import TRAINING_SEEDS, BlendStage, DecoderSize, Recipe, RelevanceStage, shared_settings
from .tiny import write_skeleton

log = logging.getLogger(__name__)
STATE_FILE = "stage.safetensors"
HEAD_KEY = "base_lm_head.weight"  # the base Qwen3-VL's LM head: it is not part of the Tempo checkpoint


def save_state(model: TempoModel, head: nn.Linear, tokenizer: Tokenizer, stage: int, path: str) -> None:
    """Every weight in float16, with the tokenizer and the stage number in the header."""
    tensors = {name: p.detach().cpu().half().contiguous() for name, p in model.state_dict().items()}
    tensors[HEAD_KEY] = head.weight.detach().cpu().half().contiguous()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    save_file(tensors, path + ".partial", metadata={"stage": str(stage), "tokenizer": tokenizer.to_str()})
    os.replace(path + ".partial", path)


def load_state(path: str, out_dir: str, device: torch.device, layers: int | None = None,
               decoder: DecoderSize | None = None) -> tuple[TempoModel, nn.Linear, Tokenizer, int]:
    """The model, base head and tokenizer a stage left in `path`, with a loadable checkpoint in `out_dir`; with
    `layers`, its decoder grown to that many layers, with `decoder`, grown to that size (`grow`: the same
    answers)."""
    with safe_open(path, "pt") as f:
        metadata = f.metadata()
    tokenizer = Tokenizer.from_str(metadata["tokenizer"])
    tensors = load_file(path)
    tensors = grown(tensors, layers) if layers else tensors
    tensors = widened(tensors, decoder) if decoder else tensors
    checkpoint_dir, base_dir = write_skeleton(out_dir, tokenizer, decoder_size(tensors))
    model = build_model(checkpoint_dir, base_dir, "Tempo-Tiny", device, torch.float32, initialize=True)
    head_weight = tensors.pop(HEAD_KEY)
    model.load_state_dict({name: t.float() for name, t in tensors.items()})
    head = nn.Linear(head_weight.shape[1], head_weight.shape[0], bias=False).to(device)
    with torch.no_grad():
        head.weight.copy_(head_weight.float())
    set_relevance_direction(model, head, checkpoint_dir, base_dir)
    save_pretrained(model, checkpoint_dir)
    return model.to(device), head, tokenizer, int(metadata["stage"])


def resume(stage: int, recipe: Recipe, state_path: str, out_dir: str, device: torch.device, layers: int | None = None,
           decoder: DecoderSize | None = None,
           follows: int | None = None) -> tuple[TempoModel, nn.Linear, Tokenizer, dict, np.random.Generator]:
    """The previous stage's model (with `layers` or `decoder`, its decoder grown as `load_state` grows it), head
    and tokenizer, this stage's report and its own random stream; the previous stage is `follows` when given."""
    model, head, tokenizer, done = load_state(state_path, out_dir, device, layers, decoder)
    previous = stage - 1 if follows is None else follows
    if done != previous:
        raise ValueError(f"stage {stage} continues stage {previous}, but {state_path} holds stage {done}")
    torch.manual_seed(recipe.seed + stage)
    report: dict = {"stage": stage, "recipe": asdict(recipe), "device": str(device), "parts": {}}
    return model, head, tokenizer, report, stage_rng(recipe, stage)


def stage_rng(recipe: Recipe, stage: int) -> np.random.Generator:
    """The random stream stage `stage` begins with."""
    return np.random.default_rng([recipe.seed, stage])


def finish(model: TempoModel, head: nn.Linear, tokenizer: Tokenizer, stage: int, state_path: str,
           out_dir: str) -> None:
    """Replace the state file and write the loadable checkpoint."""
    model.eval()
    save_state(model, head, tokenizer, stage, state_path)
    save_pretrained(model, out_dir)


def short_training_videos(recipe: Recipe, skip: int, count: int) -> list[SyntheticVideo]:
    """`count` short training videos after the first 200 + `skip` of the recipe's seed block."""
    first = TRAINING_SEEDS + recipe.seed * 10_000 + 200 + skip
    return [generate_video(first + i, min_duration=30, max_duration=150) for i in range(count)]


def short_pools(model: TempoModel, recipe: Recipe, videos: int, rng: np.random.Generator, skip: int = 0,
                families: tuple[str, ...] = FAMILIES) -> tuple[list[PoolItem], list[PoolItem]]:
    """The questions of `families` about `videos` short training videos after the first `skip`, and about the
    held-out ones the growth curve is read on, each compressed once."""
    first = TRAINING_SEEDS + recipe.seed * 10_000
    pool = build_pool(model, short_training_videos(recipe, skip, videos), rng, families=families)
    held_out = build_pool(model, [generate_video(first + 9_100 + i, min_duration=30, max_duration=150)
                                  for i in range(recipe.pool_held_out)], rng, first=videos, families=families)
    return pool, held_out


def composed_pools(model: TempoModel, recipe: Recipe, videos: int, rng: np.random.Generator,
                   weights: tuple[float, ...] | None = None, skip: int = 0) -> tuple[Composer, Composer]:
    """Composers over `videos` short training videos after the first `skip` (families drawn by `weights`) and over
    the held-out ones the growth curve is read on (families drawn uniformly)."""
    pool, held_out = short_pools(model, recipe, videos, rng, skip)
    return Composer(pool, weights), Composer(held_out)


@dataclass(frozen=True)
class CachedPools:
    """A stage's pools, the seconds building them took, and whether they were read from the saved file."""

    pools: Any
    built_seconds: float | None  # None for a file saved before the time was kept
    read: bool


def cached_pools(path: str, key: dict, build: Callable[[], Any], rng: np.random.Generator) -> CachedPools:
    """`build()`'s pools, saved to `path` the first time and read back after, with the random streams as they stood
    after building them, so that a stage run again (or cut off and rerun) trains on the same inputs without
    compressing its videos again. A file saved under another `key` (recipe, stage, compressor), or under none, is
    built anew."""
    if os.path.isfile(path):
        saved = torch.load(path, weights_only=False)
        if saved.get("key") == key:
            rng.bit_generator.state = saved["rng"]
            torch.set_rng_state(saved["torch_rng"])
            log.info("pools read from %s", path)
            return CachedPools(saved["pools"], saved.get("seconds"), read=True)
        log.info("pools in %s were built for another recipe or stage; building them again", path)
    started = time.perf_counter()
    pools = build()
    seconds = round(time.perf_counter() - started, 1)
    torch.save({"key": key, "pools": pools, "rng": rng.bit_generator.state, "torch_rng": torch.get_rng_state(),
                "seconds": seconds}, path + ".partial")
    os.replace(path + ".partial", path)
    return CachedPools(pools, seconds, read=False)


def stage_file(state_path: str, number: int, kind: str) -> str:
    """Where stage `number` keeps its `kind` ("pools" or "progress") file: beside the state file."""
    return os.path.join(os.path.dirname(os.path.abspath(state_path)), f"stage-{number}-{kind}.pt")


def stage_progress_file(stage: RelevanceStage | BlendStage, recipe: Recipe, state_path: str, model: TempoModel,
                        head: nn.Linear) -> ProgressFile:
    """The file a stage's training loop saves its progress to, keyed by the recipe, the stage's record and the
    weights it starts from (so `model` and `head` as the stage found them)."""
    return ProgressFile(stage_file(state_path, stage.number, "progress"),
                        {"recipe": shared_settings(recipe), "stage": asdict(stage),
                         "weights": starting_digest(model, head)})


def pools_key(recipe: Recipe, stage: BlendStage | RelevanceStage, model: TempoModel) -> dict:
    """What a stage's pools depend on: the recipe's shared settings, the compressor, and the stage's number (its
    random stream) with, for a blend stage, its pooling settings. Its training settings can change without pooling
    again."""
    settings: int | dict = stage.number
    if isinstance(stage, BlendStage):
        settings = {name: getattr(stage, name) for name in ("number", "slot", "pool_share", "counting_pool_share",
                                                             "temporal")}
    return {"recipe": shared_settings(recipe), "stage": settings, "compressor": compressor_digest(model)}


def compressor_digest(model: TempoModel) -> str:
    """A digest of the compressor's weights: the pools a stage builds are its memories."""
    return weights_digest(model.compressor.state_dict())


def starting_digest(model: TempoModel, head: nn.Linear) -> str:
    """A digest of every weight a stage starts from, the base head's with them."""
    return weights_digest(model.state_dict() | {HEAD_KEY: head.weight})


def weights_digest(tensors: dict[str, torch.Tensor]) -> str:
    """A digest of these tensors' names and values."""
    digest = hashlib.sha256()
    for name, tensor in sorted(tensors.items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().float().numpy().tobytes())
    return digest.hexdigest()
