"""The released Tempo checkpoint format (`model_type: tempo_qwen`): its configs read into what inference needs, and
its weights' keys mapped onto our modules and back. Its files are found by `checkpoint_files`; the base Qwen3-VL named
by `mm_vision_tower_aux_list` supplies its config, tokenizer, processor settings and the relevance direction
(`relevance_direction`)."""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field

import torch
from safetensors import safe_open

from ..errors import ModelError
from ..video.patches import PatchGeometry
from .checkpoint_files import read_json
from .tokenizer import TextTokenizer

log = logging.getLogger(__name__)


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
    config = read_json(os.path.join(checkpoint_dir, "config.json"))
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
    return PatchGeometry.from_processor_config(read_json(processor_file) if processor_file else {})


def checkpoint_spec(checkpoint_dir: str, config: dict, tokenizer: TextTokenizer, name: str) -> CheckpointSpec:
    """What inference reads from config.json and generation_config.json."""
    generation = {}
    if os.path.isfile(os.path.join(checkpoint_dir, "generation_config.json")):
        generation = read_json(os.path.join(checkpoint_dir, "generation_config.json"))
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

