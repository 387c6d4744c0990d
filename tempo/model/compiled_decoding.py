"""The decoder's one-token layer step compiled ahead of time (torch.export, then AOTInductor), for `StaticDecoding`.

A Tempo-6B decoding step is 36 identical Qwen3 layers, and eagerly each launches some 60 small kernels. One layer's
step (`static_decoding.layer_step`) is exported once, with the cache's length free, and compiled into one package
file whose fused kernels every layer runs: building takes one layer's compile whatever the depth, and the package
holds no weights. A loaded package is pointed at a layer's own weights (AOTInductor's user-managed constants:
nothing is copied), so it serves any checkpoint of the same shapes: either one copy per layer, or one copy whose
weights are re-pointed before each layer runs (`LOADERS`; `spaces`' `LazyAOTIModel` does the latter). On a GPU the
loaded layers are captured in the step's CUDA graph like the eager ones. No compiling happens at run time: on a
ZeroGPU Space (where torch.compile is not allowed) the package is built once, at start or beforehand.
`benchmarks/gpu/aoti_probe.py` tries each way of building and loading in a process of its own.
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
# How a package is built. "weightless": the weights stay outside the package and each loaded copy is given its
# layer's tensors (`load_constants`). "spaces": the same with the settings `spaces`' AoT helpers (0.51.3) build with,
# which keep every weight a named constant (none folded into another) and, from torch 2.10, pick the on-disk format
# of the weights. "in_so": the first layer's weights compiled into the shared library (re-pointed all the same).
BUILDS: dict[str, dict[str, object]] = {
    "weightless": {"aot_inductor.package_constants_in_so": False},
    "spaces": {"aot_inductor.package_constants_in_so": False, "always_keep_tensor_constants": True,
               "joint_graph_constant_folding": False,
               "aot_inductor.package_constants_on_disk_format": "pickle_weights"},
    "in_so": {"aot_inductor.package_constants_in_so": True},
}
# How a package is loaded: "per_layer", one copy per decoder layer, each pointed at its layer's weights once;
# "once", one copy for all layers, re-pointed at each layer's weights before that layer runs.
LOADERS = ("per_layer", "once")
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


def build(lm: Qwen3ForCausalLM, path: str | os.PathLike, attention: str = "split", settings: str = "weightless"
          ) -> float:
    """Export and compile the layer step into the package file `path` (its parent must exist) with the inductor
    settings `BUILDS[settings]`; returns seconds."""
    if settings not in BUILDS:
        raise ValueError(f"settings must be one of {', '.join(BUILDS)}, not {settings!r}")
    started = time.perf_counter()
    program = export_layer(lm, attention)
    metadata = {"aot_inductor.metadata": {SIGNATURE: json.dumps(signature(lm, attention), sort_keys=True)}}
    configs = {key: value for key, value in BUILDS[settings].items() if _known_setting(key)}
    torch._inductor.aoti_compile_and_package(program, package_path=os.fspath(path),
                                             inductor_configs=configs | metadata)
    seconds = time.perf_counter() - started
    log.info("compiled the decoder's layer step (%s attention) in %.1f s: %s", attention, seconds, path)
    return seconds


def _known_setting(key: str) -> bool:
    """Whether this torch's inductor has the setting `key` (the on-disk weight format came in torch 2.10)."""
    return key in torch._inductor.config.get_config_copy()


def layer_weights(block: nn.Module) -> dict[str, torch.Tensor]:
    """A decoder layer's tensors under the names its package's constants have (`block.*`)."""
    return {f"block.{name}": tensor for name, tensor in
            [*block.named_parameters(remove_duplicate=False), *block.named_buffers(remove_duplicate=False)]}


def check_cache(keys: torch.Tensor, visible: torch.Tensor) -> None:
    """AOTInductor checks no input shape (pytorch#141115): a cache that is not whole SPLIT-slot pieces, or longer
    than a package takes, would be read out of bounds, so it is refused here."""
    slots = keys.shape[2]
    if slots % SPLIT or not SPLIT <= slots <= MAX_PIECES * SPLIT or visible.shape[0] != slots:
        raise ValueError(f"a compiled layer step takes a cache of 1 to {MAX_PIECES} pieces of {SPLIT} slots, with "
                         f"one visibility flag per slot; got {slots} slots and {visible.shape[0]} flags")


class _Repointed:
    """One loaded package run as one layer: its constants are pointed at this layer's weights first, unless they
    already are (the copy is shared by every layer when loaded "once")."""

    def __init__(self, runner: AOTICompiledModel, weights: dict[str, torch.Tensor], pointed: list):
        self.runner, self.weights, self.pointed = runner, weights, pointed  # pointed[0]: whose weights it holds

    def point(self, check_full_update: bool = False) -> None:
        if self.pointed[0] is not self.weights:
            names = self.runner.get_constant_fqns()
            self.runner.load_constants({name: self.weights[name] for name in names},
                                       check_full_update=check_full_update, user_managed=True)
            self.pointed[0] = self.weights

    def __call__(self, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, slot: torch.Tensor,
                 visible: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        check_cache(keys, visible)
        self.point()
        return self.runner(hidden, cos, sin, slot, visible, keys, values)


class CompiledLayers(Sequence[_Repointed]):
    """A package run as every decoder layer of `lm`, each on that layer's own weights; indexable as
    `StaticDecoding`'s `layers`. `loader`: one of `LOADERS`; `single_threaded`: the loader's run_single_threaded
    (a runner meant for CUDA graphs, pytorch#148601). A package built for other shapes, another dtype, device or
    torch is refused before any weight is handed over."""

    def __init__(self, path: str | os.PathLike, lm: Qwen3ForCausalLM, loader: str = "per_layer",
                 single_threaded: bool = False):
        if loader not in LOADERS:
            raise ValueError(f"loader must be one of {', '.join(LOADERS)}, not {loader!r}")
        self.path, self.loader = os.fspath(path), loader

        def load() -> AOTICompiledModel:
            return torch._inductor.aoti_load_package(self.path, run_single_threaded=single_threaded)

        first = load()
        built_for = json.loads(first.get_metadata().get(SIGNATURE, "{}"))
        self.attention = built_for.get("attention")
        expected = signature(lm, self.attention)
        if built_for != expected:
            differ = sorted(key for key in expected if built_for.get(key) != expected[key])
            raise ValueError(f"{self.path} was built for another decoder layer ({', '.join(differ)} differ)")
        shared: list = [None]
        self.runners: list[_Repointed] = []
        for i, block in enumerate(lm.model.layers):
            runner = first if i == 0 or loader == "once" else load()
            step = _Repointed(runner, layer_weights(block), shared if loader == "once" else [None])
            step.point(check_full_update=True)  # every constant named, once, before any run
            self.runners.append(step)

    def __len__(self) -> int:
        return len(self.runners)

    @overload
    def __getitem__(self, index: int) -> _Repointed: ...
    @overload
    def __getitem__(self, index: slice) -> list[_Repointed]: ...
    def __getitem__(self, index: int | slice) -> _Repointed | list[_Repointed]:
        return self.runners[index]

    def __iter__(self) -> Iterator[_Repointed]:
        return iter(self.runners)
