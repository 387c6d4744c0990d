"""TempoModel: the local compressor and the global decoder of one checkpoint, with what reads and writes them.

`from_pretrained` builds the modules from a released checkpoint's configs and loads its weights (the checkpoint
format lives in `loading.py`, its files and the hub in `checkpoint_files.py`, the relevance direction in
`relevance_direction.py`); `save_pretrained` writes the same format back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator, Sequence

import torch
from safetensors.torch import save_file
from transformers import PreTrainedConfig, Qwen3Config, Qwen3VLConfig
from transformers.initialization import no_init_weights

from ..allocation import reduce_memory
from ..errors import InputError
from ..video.patches import PatchGeometry
from . import checkpoint_files, loading
from . import int8 as int8_weights
from .compressor import LocalCompressor
from .decoder import GlobalDecoder
from .fused_norms import fuse_norms
from .loading import CheckpointSpec
from .prompts import Exchange, decoder_prompt_ids, time_tag
from .relevance_direction import cached_relevance_direction
from .tokenizer import TextTokenizer

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}
SLOW_SEGMENT_S = 5.0  # on a CPU, a model slower than this per segment is announced as slow when it loads
FASTEST_CPU_GFLOPS = 2000.0  # no CPU beats this: below it, a model cannot be slow and the CPU is not measured
SEGMENT_PATCHES = 2048  # vision-tower tokens of an 8-frame 16:9 segment (4 frame pairs x 32 x 16 patches)
SEGMENT_TOKENS = 700  # compressor tokens of that segment: 512 merged patches, the prompt, 128 memory tokens


class TempoModel(torch.nn.Module):
    """A loaded Tempo: compressor, decoder, both tokenizers and the patch geometry."""

    def __init__(self, compressor: LocalCompressor, decoder: GlobalDecoder, tokenizer: TextTokenizer,
                 compressor_tokenizer: TextTokenizer, geometry: PatchGeometry, spec: CheckpointSpec, config: dict):
        super().__init__()
        self.config = config  # the checkpoint's config.json, written back by save_pretrained
        self.compressor = compressor
        self.decoder = decoder
        self.tokenizer = tokenizer
        self.compressor_tokenizer = compressor_tokenizer
        self.geometry = geometry
        self.spec = spec
        self.int8 = False  # linear weights held in int8 (`from_pretrained(int8=True)`)

    @property
    def device(self) -> torch.device:
        return self.compressor.compression_tokens.device

    @property
    def dtype(self) -> torch.dtype:
        return self.compressor.compression_tokens.dtype

    def decoder_inputs(self, memories: Iterable[torch.Tensor], tokens: Sequence[int], truncation: str,
                       question: str, tag_times: Sequence[float], context_length: int | None = None,
                       answer_ids: Sequence[int] = (), history: Sequence[Exchange] = ()) -> tuple[torch.Tensor, int]:
        """The decoder's input embeddings [S, d]: ChatML (with the earlier turns of `history`) around `<t seconds>` +
        the kept memory tokens of every segment, then the question (and `answer_ids` when training); also how many
        visual positions were cut.

        As released, the visual sequence is cut to context - reserve - text length (possibly inside a segment).
        Unlike the release, a question that leaves no room at all is refused instead of being cut off.
        """
        kept = [reduce_memory(memory, k, truncation) for memory, k in zip(memories, tokens)]  # [k_i, d_s] each
        tags = [self.tokenizer.markup(time_tag(t)) for t in tag_times]
        visual = self.decoder.visual_sequence(kept, tags)  # [V, d]
        before, after = decoder_prompt_ids(self.tokenizer, question, history)
        cut = 0
        if context_length is not None:
            room = context_length - self.spec.inference_reserve - len(before) - len(after)
            if room <= 0:
                raise InputError(f"The question takes {len(before) + len(after)} tokens and leaves no room for the "
                                 f"video in the decoder's {context_length}-token context; please shorten it.")
            cut = max(0, visual.shape[0] - room)
            visual = visual[:room]
        return self.decoder.prompt_embeddings(before, visual, after + list(answer_ids)), cut


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def build_model(checkpoint_dir: str, base_dir: str, name: str, device: torch.device, dtype: torch.dtype,
                initialize: bool = False) -> TempoModel:
    """Modules, tokenizers and geometry for the configs in `checkpoint_dir` and `base_dir`; weights are left
    uninitialised for loading, or freshly initialised (`initialize`) for training."""
    config = loading.checkpoint_config(checkpoint_dir)
    attention = loading.attention_implementation(device)
    base_config = Qwen3VLConfig.from_pretrained(base_dir)
    base_config._attn_implementation = attention
    assert isinstance(base_config.text_config, PreTrainedConfig)  # built: a config (transformers' type: or a dict)
    decoder_keys = {k: v for k, v in config.items() if k not in ("architectures", "model_type", "rope_scaling")}
    decoder_config = Qwen3Config(**decoder_keys)
    decoder_config._attn_implementation = attention

    tokenizer = TextTokenizer(checkpoint_dir)
    init = contextlib.nullcontext() if initialize else no_init_weights()
    with init, torch.device(device), _default_dtype(dtype):
        compressor = LocalCompressor(base_config, int(config["num_compression_tokens"]))
        decoder = GlobalDecoder(decoder_config, base_config.text_config.hidden_size,
                                config.get("mm_projector_type", "linear"))
    decoder.lm.tie_weights()
    return TempoModel(compressor, decoder, tokenizer, TextTokenizer(base_dir), loading.patch_geometry(base_dir),
                      loading.checkpoint_spec(checkpoint_dir, config, tokenizer, name), config)


def from_pretrained(name_or_path: str | os.PathLike | None = None, *, base: str | os.PathLike | None = None,
                    device: str | torch.device | None = None, dtype: str | torch.dtype | None = None,
                    int8: bool = False) -> TempoModel:
    """Load a Tempo checkpoint (directory or hub id; the embedded Tempo-Tiny when None).

    `base` overrides the base Qwen3-VL location; `device` defaults to CUDA when available; `dtype` to bf16
    on CUDA and fp32 on CPU; `int8`: the decoder's and compressor's linear weights held in int8 (`model.int8`).
    """
    checkpoint_dir = checkpoint_files.resolve_checkpoint(name_or_path)
    config = loading.checkpoint_config(checkpoint_dir)
    base_dir = checkpoint_files.resolve_base(config, checkpoint_dir, base)
    named_base = os.fspath(base) if base is not None else (config.get("mm_vision_tower_aux_list") or [""])[0]
    base_repo = named_base if checkpoint_files.is_hub_id(named_base) else None

    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype or (torch.bfloat16 if device.type == "cuda"
                                                                     else torch.float32)
    name = os.fspath(name_or_path) if name_or_path else "Tempo-Tiny (embedded)"
    model = build_model(checkpoint_dir, base_dir, name, device, dtype)
    loading.load_weights(model, checkpoint_files.weight_files(checkpoint_dir))

    tokenizer = model.compressor_tokenizer
    from_hub = not os.path.isdir(os.path.expanduser(os.fspath(name_or_path or checkpoint_files.DEFAULT_MODEL)))
    direction = cached_relevance_direction(checkpoint_dir, from_hub, base_dir, base_repo,
                                           Qwen3VLConfig.from_pretrained(base_dir),
                                           tokenizer.token_id("Yes"), tokenizer.token_id("No"))
    model.compressor.relevance_direction.copy_(direction)
    if device.type == "cuda":  # one kernel a norm there; a CPU keeps the model's own norms and its numbers
        fuse_norms(model)
    if int8:
        saved = int8_weights.quantize_model(model)
        model.int8 = True
        log.info("int8 weights: %.2f GB saved", saved / 1e9)
    log.info("loaded %s on %s (%s%s)", name, device, dtype, ", int8 weights" if int8 else "")
    if device.type == "cpu" and (warning := cpu_slowness(model)):
        log.warning(warning)
    return model.eval()


def cpu_gflops(seconds: float = 0.2) -> float:
    """This CPU's float32 matrix-multiply speed, measured for about `seconds`."""
    a = torch.randn(512, 512)
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        a @ a
        done += 1
    return done * 2 * 512**3 / (time.perf_counter() - started) / 1e9


def _parameters(module: torch.nn.Module) -> int:
    """Parameters that multiply every token (embedding tables only look rows up)."""
    return sum(p.numel() for name, p in module.named_parameters() if "embed_tokens" not in name)


def cpu_slowness(model: TempoModel) -> str | None:
    """What to expect from `model` on this CPU, when it is slow enough to be worth saying (2 FLOPs per parameter
    and token; the CPU's speed measured)."""
    vlm = model.compressor.vlm
    segment = 2 * (_parameters(vlm.visual) * SEGMENT_PATCHES + _parameters(vlm.language_model) * SEGMENT_TOKENS)
    if segment / (FASTEST_CPU_GFLOPS * 1e9) < SLOW_SEGMENT_S:
        return None
    speed = cpu_gflops() * 1e9
    per_segment = segment / speed
    if per_segment < SLOW_SEGMENT_S:
        return None
    decoder = 2 * _parameters(model.decoder.lm)
    prefill = decoder * (model.spec.visual_token_budget + 100) / speed
    return (f"{model.spec.name} runs on this machine's CPU (no CUDA GPU). At the {speed / 1e9:.0f} GFLOP/s measured "
            f"here, expect about {per_segment:.0f} s per 8-frame segment ({per_segment * 128 / 60:.0f} min to "
            f"compress an hour-long video, 128 segments), then {prefill:.0f} s before the answer starts and "
            f"{decoder / speed:.1f} s per answer token. It works, slowly; on a GPU it takes seconds.")


def save_pretrained(model: TempoModel, directory: str | os.PathLike) -> None:
    """Write the weights and config in the released checkpoint format (tokenizer files are the caller's)."""
    os.makedirs(directory, exist_ok=True)
    tensors = {loading.checkpoint_key(name): p.detach().to("cpu").contiguous() for name, p in model.named_parameters()}
    save_file(tensors, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(model.config, f, indent=2)
        f.write("\n")
