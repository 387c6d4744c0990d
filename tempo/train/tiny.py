"""Tempo-Tiny: the sizes, the tokenizer and the on-disk layout of the embedded model.

Same classes and checkpoint format as Tempo-6B (Qwen3-VL compressor + memory tokens + linear projector +
Qwen3 decoder, `model_type: tempo_qwen`), scaled down until the whole recipe trains on a 2-core CPU.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from ..model.prompts import VIDEO_PAD, VISION_END, VISION_START
from .recipe import DecoderSize

BASE_DIRNAME = "base-qwen3-vl"  # the official builder requires "qwen3-vl" in the base's directory name
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", VISION_START, VISION_END, "<|image_pad|>", VIDEO_PAD]
# Qwen2's pre-tokenizer split: digits are single tokens, so time tags tokenize digit by digit.
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB_SIZE = 1024  # model vocabulary (the tokenizer has a few ids less, as in Qwen's padded vocabularies)
MEMORY_TOKENS = 32
CONTEXT_LENGTH = 8192
DECODER = DecoderSize(layers=3, width=128, heads=4, kv_heads=2, mlp_width=384)  # as first trained; `grow` grows it
DEFAULT_BUDGET = 1024  # a quarter of the 4096 memory tokens that 1024 frames (128 segments) produce

CHAT_TEMPLATE = (
    "{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}{%- else -%}"
    "{%- for content in message['content'] -%}"
    "{%- if content['type'] == 'image' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif content['type'] == 'video' -%}{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in content -%}{{- content['text'] -}}{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)


def train_tokenizer(texts: Iterable[str]) -> Tokenizer:
    """Byte-level BPE with Qwen's split regex, NFC and the Qwen special tokens at the end of the vocabulary."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE - 16, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    for word in ("Yes", "No"):  # the relevance head reads these two rows
        if len(tokenizer.encode(word, add_special_tokens=False).ids) != 1:
            raise RuntimeError(f"the trained vocabulary has no single token for {word!r}")
    return tokenizer


def base_config(tokenizer: Tokenizer) -> dict:
    """The tiny Qwen3-VL: 2-layer ViT (64 wide) and 2-layer language model (96 wide)."""
    token = tokenizer.token_to_id
    return {
        "architectures": ["Qwen3VLForConditionalGeneration"],
        "model_type": "qwen3_vl",
        "image_token_id": token("<|image_pad|>"),
        "video_token_id": token(VIDEO_PAD),
        "vision_start_token_id": token(VISION_START),
        "vision_end_token_id": token(VISION_END),
        "tie_word_embeddings": False,
        "text_config": {
            "model_type": "qwen3_vl_text", "vocab_size": VOCAB_SIZE, "hidden_size": 96, "intermediate_size": 256,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24,
            "hidden_act": "silu", "rms_norm_eps": 1e-6, "max_position_embeddings": 8192,
            "rope_scaling": {"rope_type": "default", "mrope_section": [4, 4, 4], "mrope_interleaved": True},
            "rope_theta": 100000.0, "attention_bias": False, "attention_dropout": 0.0,
            "bos_token_id": token("<|endoftext|>"), "eos_token_id": token("<|im_end|>"),
        },
        "vision_config": {
            "model_type": "qwen3_vl", "depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 4,
            "out_hidden_size": 96, "patch_size": 16, "temporal_patch_size": 2, "spatial_merge_size": 2,
            "in_channels": 3, "hidden_act": "gelu_pytorch_tanh", "num_position_embeddings": 256,
            "deepstack_visual_indexes": [0, 1],
        },
    }


def tempo_config(tokenizer: Tokenizer, decoder: DecoderSize = DECODER) -> dict:
    """The tiny Tempo: a Qwen3 decoder of `decoder`'s size (32-wide heads) and 32 memory tokens per segment."""
    token = tokenizer.token_to_id
    return {
        "architectures": ["TempoQwenForCausalLM"], "model_type": "tempo_qwen",
        "vocab_size": VOCAB_SIZE, "hidden_size": decoder.width, "intermediate_size": decoder.mlp_width,
        "num_hidden_layers": decoder.layers, "num_attention_heads": decoder.heads,
        "num_key_value_heads": decoder.kv_heads, "head_dim": 32, "hidden_act": "silu",
        "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_scaling": None, "max_position_embeddings": 16384,
        "attention_bias": False, "attention_dropout": 0.0, "tie_word_embeddings": True, "use_cache": True,
        "use_sliding_window": False, "sliding_window": None, "layer_types": ["full_attention"] * decoder.layers,
        "bos_token_id": token("<|endoftext|>"), "eos_token_id": token("<|im_end|>"),
        "pad_token_id": token("<|endoftext|>"),
        "mm_vision_tower_aux_list": [BASE_DIRNAME], "mm_projector_type": "linear", "mm_hidden_size": 96,
        "num_compression_tokens": MEMORY_TOKENS, "dynamic_compress": True, "visual_token_budget": DEFAULT_BUDGET,
        "tokenizer_model_max_length": CONTEXT_LENGTH, "tokenizer_padding_side": "right",
        "mm_use_im_start_end": False, "mm_use_im_patch_token": False,
        "tempo_trained_world": "synthetic",  # read by the app: it only knows tempo.synthetic's videos
        "tempo_repetition_guard": True,  # a clip outside its world must get a short answer, never a loop
        "tempo_takes_history": False,  # trained one question at a time: earlier turns would only confuse it
    }


def _write_json(path: str, data: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.write("\n")


def _write_tokenizer(directory: str, tokenizer: Tokenizer) -> None:
    tokenizer.save(os.path.join(directory, "tokenizer.json"))
    added = {str(tokenizer.token_to_id(t)): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                             "single_word": False, "special": True} for t in SPECIAL_TOKENS}
    _write_json(os.path.join(directory, "tokenizer_config.json"), {
        "tokenizer_class": "Qwen2Tokenizer", "added_tokens_decoder": added, "bos_token": None,
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "model_max_length": CONTEXT_LENGTH,
        "clean_up_tokenization_spaces": False, "split_special_tokens": False, "errors": "replace",
    })
    _write_json(os.path.join(directory, "special_tokens_map.json"), {
        "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
        "additional_special_tokens": SPECIAL_TOKENS[1:],
    })


def write_skeleton(directory: str, tokenizer: Tokenizer, decoder: DecoderSize = DECODER) -> tuple[str, str]:
    """Configs and tokenizers of the checkpoint and of its base (a decoder of `decoder`'s size), ready for
    `modeling.build_model`."""
    base_dir = os.path.join(directory, BASE_DIRNAME)
    os.makedirs(base_dir, exist_ok=True)
    _write_tokenizer(directory, tokenizer)
    _write_tokenizer(base_dir, tokenizer)
    _write_json(os.path.join(directory, "config.json"), tempo_config(tokenizer, decoder))
    _write_json(os.path.join(directory, "generation_config.json"), {
        "bos_token_id": tokenizer.token_to_id("<|endoftext|>"), "eos_token_id": tokenizer.token_to_id("<|im_end|>"),
        "pad_token_id": tokenizer.token_to_id("<|endoftext|>")})
    _write_json(os.path.join(base_dir, "config.json"), base_config(tokenizer))
    processor = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
                 "image_std": [0.5, 0.5, 0.5], "rescale_factor": 1 / 255, "do_rescale": True, "do_normalize": True,
                 "do_convert_rgb": True, "processor_class": "Qwen3VLProcessor"}
    _write_json(os.path.join(base_dir, "preprocessor_config.json"),
                {**processor, "image_processor_type": "Qwen2VLImageProcessorFast"})
    _write_json(os.path.join(base_dir, "video_preprocessor_config.json"),
                {**processor, "video_processor_type": "Qwen3VLVideoProcessor"})
    with open(os.path.join(base_dir, "chat_template.jinja"), "w", encoding="utf-8") as f:
        f.write(CHAT_TEMPLATE)
    return directory, base_dir
