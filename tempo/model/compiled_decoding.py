"""The decoder's one-token layer step compiled ahead of time (torch.export, then AOTInductor), for `StaticDecoding`.

A Tempo-6B decoding step is 36 identical Qwen3 layers, and eagerly each launches some 60 small kernels. One layer's
step (`static_decoding.layer_step`) is exported once, with the cache's length free, and compiled into one package
file whose fused kernels every layer runs: building takes one layer's compile whatever the depth, and the package
holds no weights. Each call loads it once per layer and points that copy at the layer's own weights (AOTInductor's
user-managed constants: nothing is copied), so the package serves any checkpoint of the same shapes. On a GPU the
loaded layers are captured in the step's CUDA graph like the eager ones. No compiling happens at run time: on a
ZeroGPU Space (where torch.compile is not allowed) the package is built once, at start or beforehand, and
`spaces`' AoT helpers (`aoti_compile`, `aoti_load`) wrap these same two torch calls.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, overload

import torch
from torch import nn
from transformers import Qwen3ForCausalLM

from .static_decoding import ATTENTIONS, SPLIT, layer_step

if TYPE_CHECKING:
    from torch.export.pt2_archive._package import AOTICompiledModel
    from transformers.models.qwen3.modeling_qwen3 import Qwen3DecoderLayer

log = logging.getLogger(__name__)

MAX_PIECES = 512  # the longest cache a package takes: 512 x 256 = 131,072 slots
# The weights stay outside the package: each loaded copy is given its layer's tensors (`load_constants`).
INDUCTOR_CONFIGS = {"aot_inductor.package_constants_in_so": False}
SIGNATURE = "tempo_layer_step"  # the package's metadata key for what it was built for


def signature(lm: Qwen3ForCausalLM, attention: str) -> dict:
    """What a package depends on: the layer's shapes and constants, the way it attends, dtype, device and torch.
    Its weights are handed over as raw pointers, so a package is loaded only onto a layer that matches."""
    config, weight = lm.config, lm.model.embed_tokens.weight
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "rms_norm_eps", "hidden_act", "attention_bias")
    return {**{key: getattr(config, key, None) for key in keys}, "attention": attention, "dtype": str(weight.dtype),
            "device": weight.device.type, "torch": torch.__version__}


class _Layer(nn.Module):
    """`layer_step` over one decoder layer, as a module that can be exported; its weights are named `block.*`."""

    def __init__(self, block: Qwen3DecoderLayer, attention: str):
        super().__init__()
        self.block, self.attention = block, attention

    def forward(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, slot: torch.Tensor,
                visible: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        return layer_step(self.block, hidden, cos, sin, slot, visible, keys, values, self.attention)


def example_inputs(lm: Qwen3ForCausalLM, pieces: int = 2) -> tuple[torch.Tensor, ...]:
    """A layer step's inputs at a cache of `pieces` x SPLIT slots, on the model's device and in its dtype."""
    config, weight = lm.config, lm.model.embed_tokens.weight
    device, dtype = weight.device, weight.dtype
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    capacity = pieces * SPLIT
    assert config.num_key_value_heads is not None  # Qwen3Config sets it (to num_attention_heads) where left out
    cache = (1, config.num_key_value_heads, capacity, head_dim)
    slot = torch.tensor([capacity // 2], device=device)
    return (torch.zeros(1, 1, config.hidden_size, device=device, dtype=dtype),
            torch.ones(1, 1, 1, head_dim, device=device, dtype=dtype),
            torch.zeros(1, 1, 1, head_dim, device=device, dtype=dtype), slot,
            torch.arange(capacity, device=device) <= slot, torch.zeros(cache, device=device, dtype=dtype),
            torch.zeros(cache, device=device, dtype=dtype))


def export_layer(lm: Qwen3ForCausalLM, attention: str = "split") -> torch.export.ExportedProgram:
    """The first decoder layer's step, exported with the cache's length free (a whole number of SPLIT pieces)."""
    if attention not in ATTENTIONS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTIONS)}, not {attention!r}")
    slots = SPLIT * torch.export.Dim("pieces", min=1, max=MAX_PIECES)
    cache = {2: slots}
    shapes = (None, None, None, None, {0: slots}, cache, cache)
    with torch.no_grad():
        return torch.export.export(_Layer(lm.model.layers[0], attention).eval(), example_inputs(lm),
                                   dynamic_shapes=shapes)


def build(lm: Qwen3ForCausalLM, path: str | os.PathLike, attention: str = "split") -> float:
    """Export and compile the layer step into the package file `path` (its parent must exist); returns seconds."""
    started = time.perf_counter()
    program = export_layer(lm, attention)
    metadata = {"aot_inductor.metadata": {SIGNATURE: json.dumps(signature(lm, attention), sort_keys=True)}}
    torch._inductor.aoti_compile_and_package(program, package_path=os.fspath(path),
                                             inductor_configs=INDUCTOR_CONFIGS | metadata)
    seconds = time.perf_counter() - started
    log.info("compiled the decoder's layer step (%s attention) in %.1f s: %s", attention, seconds, path)
    return seconds


class CompiledLayers(Sequence["AOTICompiledModel"]):
    """A package loaded once per decoder layer of `lm`, each copy running on that layer's own weights; indexable as
    `StaticDecoding`'s `layers`. A package built for other shapes, another dtype, device or torch is refused before
    any weight is handed over."""

    def __init__(self, path: str | os.PathLike, lm: Qwen3ForCausalLM):
        self.path = os.fspath(path)
        first = torch._inductor.aoti_load_package(self.path)
        built_for = json.loads(first.get_metadata().get(SIGNATURE, "{}"))
        self.attention = built_for.get("attention")
        expected = signature(lm, self.attention)
        if built_for != expected:
            differ = sorted(key for key in expected if built_for.get(key) != expected[key])
            raise ValueError(f"{self.path} was built for another decoder layer ({', '.join(differ)} differ)")
        blocks = lm.model.layers
        self.runners = [self._weighted(first if i == 0 else torch._inductor.aoti_load_package(self.path), block)
                        for i, block in enumerate(blocks)]

    def _weighted(self, runner: AOTICompiledModel, block: nn.Module) -> AOTICompiledModel:
        """`runner` pointed at `block`'s own tensors (nothing copied)."""
        weights = {f"block.{name}": tensor for name, tensor in
                   [*block.named_parameters(remove_duplicate=False), *block.named_buffers(remove_duplicate=False)]}
        names = runner.get_constant_fqns()
        runner.load_constants({name: weights[name] for name in names}, check_full_update=True, user_managed=True)
        return runner

    def __len__(self) -> int:
        return len(self.runners)

    @overload
    def __getitem__(self, index: int) -> AOTICompiledModel: ...
    @overload
    def __getitem__(self, index: slice) -> list[AOTICompiledModel]: ...
    def __getitem__(self, index: int | slice) -> AOTICompiledModel | list[AOTICompiledModel]:
        return self.runners[index]

    def __iter__(self) -> Iterator[AOTICompiledModel]:
        return iter(self.runners)
