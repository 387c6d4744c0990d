"""A random-weight Tempo checkpoint in the released format (sharded safetensors, index, configs, tokenizer, a base
Qwen3-VL directory with its LM-head table), at Tempo-6B's shapes or tiny ones, so that the real loading path can be
timed without the hub.

Timing does not depend on the weights. The configs and tokenizer are the conformance fixtures' (the released
format), with every size replaced; the tokenizer keeps its small vocabulary, whose ids all fall inside the model's.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from tempo.model import build_model
from tempo.model.loading import checkpoint_key

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "tests" / "fixtures" / "conformance"
TOKENIZER_FILES = ("added_tokens.json", "chat_template.jinja", "merges.txt", "special_tokens_map.json",
                   "tokenizer.json", "tokenizer_config.json", "vocab.json")
BASE_FILES = TOKENIZER_FILES + ("preprocessor_config.json", "video_preprocessor_config.json")
SHARD_BYTES = 5 * 10**9  # transformers' default shard size


@dataclass(frozen=True)
class Shapes:
    """The sizes of a Tempo: its compressor (Qwen3-VL: vision tower, then language model) and decoder (Qwen3)."""

    vision_depth: int
    vision_hidden: int
    vision_intermediate: int
    vision_heads: int
    deepstack: tuple[int, ...]
    compressor_hidden: int
    compressor_intermediate: int
    compressor_layers: int
    compressor_heads: int
    compressor_kv_heads: int
    compressor_head_dim: int
    mrope_section: tuple[int, int, int]
    decoder_hidden: int
    decoder_intermediate: int
    decoder_layers: int
    decoder_heads: int
    decoder_kv_heads: int
    decoder_head_dim: int
    vocab: int
    memory_tokens: int = 128


# Qwen3-VL-2B-Instruct's and Qwen3-4B's config.json (both tie their word embeddings), Tempo-6B's 128 memory tokens.
TEMPO_6B = Shapes(vision_depth=24, vision_hidden=1024, vision_intermediate=4096, vision_heads=16, deepstack=(5, 11, 17),
                  compressor_hidden=2048, compressor_intermediate=6144, compressor_layers=28, compressor_heads=16,
                  compressor_kv_heads=8, compressor_head_dim=128, mrope_section=(24, 20, 20),
                  decoder_hidden=2560, decoder_intermediate=9728, decoder_layers=36, decoder_heads=32,
                  decoder_kv_heads=8, decoder_head_dim=128, vocab=151936)
# Small enough for a dry run on a CPU in seconds; every kind of layer is still there.
TINY = Shapes(vision_depth=2, vision_hidden=64, vision_intermediate=128, vision_heads=4, deepstack=(0, 1),
              compressor_hidden=64, compressor_intermediate=128, compressor_layers=2, compressor_heads=4,
              compressor_kv_heads=2, compressor_head_dim=16, mrope_section=(4, 2, 2),
              decoder_hidden=96, decoder_intermediate=256, decoder_layers=2, decoder_heads=4, decoder_kv_heads=2,
              decoder_head_dim=24, vocab=3008)


def base_config(shapes: Shapes) -> dict:
    config = json.loads((TEMPLATE / "base" / "tiny-qwen3-vl" / "config.json").read_text())
    config["tie_word_embeddings"] = True
    config["text_config"].update(
        hidden_size=shapes.compressor_hidden, intermediate_size=shapes.compressor_intermediate,
        num_hidden_layers=shapes.compressor_layers, num_attention_heads=shapes.compressor_heads,
        num_key_value_heads=shapes.compressor_kv_heads, head_dim=shapes.compressor_head_dim, vocab_size=shapes.vocab,
        dtype="bfloat16")
    config["text_config"]["rope_scaling"]["mrope_section"] = list(shapes.mrope_section)
    config["vision_config"].update(
        depth=shapes.vision_depth, hidden_size=shapes.vision_hidden, intermediate_size=shapes.vision_intermediate,
        num_heads=shapes.vision_heads, out_hidden_size=shapes.compressor_hidden,
        deepstack_visual_indexes=list(shapes.deepstack), num_position_embeddings=2304)
    config["dtype"] = "bfloat16"
    return config


def tempo_config(shapes: Shapes) -> dict:
    config = json.loads((TEMPLATE / "tempo" / "config.json").read_text())
    config.update(hidden_size=shapes.decoder_hidden, intermediate_size=shapes.decoder_intermediate,
                  num_hidden_layers=shapes.decoder_layers, num_attention_heads=shapes.decoder_heads,
                  num_key_value_heads=shapes.decoder_kv_heads, head_dim=shapes.decoder_head_dim,
                  vocab_size=shapes.vocab, layer_types=["full_attention"] * shapes.decoder_layers,
                  max_window_layers=shapes.decoder_layers, mm_hidden_size=shapes.compressor_hidden,
                  num_compression_tokens=shapes.memory_tokens, tie_word_embeddings=True, dtype="bfloat16")
    return config


def _write_json(path: Path, value: dict) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def _randomize(model: torch.nn.Module, seed: int) -> None:
    """Norm weights 1, biases 0, every other weight N(0, 0.02), drawn where the model lives."""
    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and p.ndim == 1:
                p.fill_(1.0)
            elif name.endswith("bias"):
                p.zero_()
            else:
                p.normal_(0.0, 0.02, generator=generator)


def write_shards(tensors: dict[str, torch.Tensor], directory: Path) -> list[str]:
    """`tensors` (moved to the CPU one shard at a time) as model-0000i-of-0000n.safetensors and its index."""
    groups: list[list[str]] = [[]]
    size = 0
    for key, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if groups[-1] and size + nbytes > SHARD_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(key)
        size += nbytes
    names = [f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors" for i in range(len(groups))]
    for name, keys in zip(names, groups):
        save_file({k: tensors[k].detach().to("cpu").contiguous() for k in keys}, str(directory / name),
                  metadata={"format": "pt"})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    weight_map = {key: name for name, keys in zip(names, groups) for key in keys}
    _write_json(directory / "model.safetensors.index.json",
                {"metadata": {"total_size": total}, "weight_map": weight_map})
    return names


def write_checkpoint(directory: str | os.PathLike, shapes: Shapes, device: str | torch.device = "cpu",
                     dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> tuple[Path, Path]:
    """Write a random Tempo at `shapes` under `directory`; returns (checkpoint directory, base directory). The
    weights are drawn on `device` (a GPU draws 6B of them in a moment) and written shard by shard."""
    directory = Path(directory)
    checkpoint, base = directory / "tempo", directory / "base-qwen3-vl"
    for target, source, files in ((checkpoint, TEMPLATE / "tempo", TOKENIZER_FILES + ("generation_config.json",)),
                                  (base, TEMPLATE / "base" / "tiny-qwen3-vl", BASE_FILES)):
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            shutil.copyfile(source / name, target / name)
    _write_json(base / "config.json", base_config(shapes))
    config = tempo_config(shapes)
    config["mm_vision_tower_aux_list"] = [os.path.relpath(base, checkpoint)]
    _write_json(checkpoint / "config.json", config)

    model = build_model(str(checkpoint), str(base), "random", torch.device(device), dtype)
    _randomize(model, seed)
    write_shards({checkpoint_key(name): p for name, p in model.named_parameters()}, checkpoint)
    # The base's LM head (tied: its embedding table) is read for two rows only: the relevance direction.
    table = torch.empty(shapes.vocab, shapes.compressor_hidden, dtype=dtype, device=device)
    table.normal_(0.0, 0.02, generator=torch.Generator(device=table.device).manual_seed(seed + 1))
    save_file({"model.language_model.embed_tokens.weight": table.cpu()}, str(base / "model.safetensors"))
    del model, table
    return checkpoint, base


def parameter_count(shapes: Shapes) -> dict[str, int]:
    """Parameters per part at `shapes`, counted on the meta device (nothing allocated)."""
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        base = Path(directory) / "base"
        base.mkdir()
        for name in BASE_FILES:
            shutil.copyfile(TEMPLATE / "base" / "tiny-qwen3-vl" / name, base / name)
        _write_json(base / "config.json", base_config(shapes))
        for name in TOKENIZER_FILES:
            shutil.copyfile(TEMPLATE / "tempo" / name, Path(directory) / name)
        _write_json(Path(directory) / "config.json", tempo_config(shapes))
        model = build_model(directory, str(base), "count", torch.device("meta"), torch.bfloat16)
    vlm = model.compressor.vlm
    return {"vision": sum(p.numel() for p in vlm.visual.parameters()),
            "compressor": sum(p.numel() for p in model.compressor.parameters()),
            "decoder": sum(p.numel() for p in model.decoder.parameters())}
