"""Global decoder: project kept memory tokens into the LLM, tag each segment with its time, and answer."""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, cast

import torch
from torch import nn
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.cache_utils import DynamicCache

from ..config import GenerationConfig
from ..errors import ModelError
from .fused_step import FusedLayers, fusable
from .static_decoding import StaticDecoding

log = logging.getLogger(__name__)


def build_projector(projector_type: str, memory_width: int, hidden_size: int) -> nn.Module:
    """`linear` (the released Tempo) or LLaVA-style `mlp{N}x_gelu`."""
    if projector_type == "linear":
        return nn.Linear(memory_width, hidden_size)
    match = re.fullmatch(r"mlp(\d+)x_gelu", projector_type)
    if match:
        layers: list[nn.Module] = [nn.Linear(memory_width, hidden_size)]
        for _ in range(1, int(match.group(1))):
            layers += [nn.GELU(), nn.Linear(hidden_size, hidden_size)]
        return nn.Sequential(*layers)
    raise ModelError(f"Unsupported mm_projector_type {projector_type!r} (expected 'linear' or 'mlpNx_gelu').")


class FilledLayer(Protocol):
    """A prefilled attention layer of the decoder's cache (transformers types a cache's layers as any kind, and
    their tensors as None until filled: a Qwen3 prefill's layers are all this)."""

    keys: torch.Tensor
    values: torch.Tensor


LOOP_SPAN = 8  # the longest run of tokens the repetition guard watches


def looping_tokens(history: Sequence[int], spells_word: Callable[[int], bool],
                   longest: int = LOOP_SPAN) -> set[int]:
    """Tokens that would start a third copy in a row of the last n tokens (n <= `longest`) when those spell a
    word: "red red" may not go on with "red". Runs of digits ("111") stay allowed."""
    banned = set()
    for n in range(1, min(longest, len(history) // 2) + 1):
        last = list(history[-n:])
        if last == list(history[-2 * n:-n]) and any(spells_word(t) for t in last):
            banned.add(last[0])
    return banned


def next_token(logits: torch.Tensor, generation: GenerationConfig, top_k: int,
               generator: torch.Generator | None) -> int:
    """Greedy when the temperature is 0; otherwise temperature, then top-k / top-p filtering, then a draw."""
    if generation.temperature <= 0:
        return int(logits.argmax())
    logits = logits.float() / generation.temperature  # [V]
    if top_k > 0:
        kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)  # [V]
    if generation.top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs > generation.top_p
        probs = probs.scatter(0, order, sorted_probs.masked_fill(outside, 0.0))
    return int(torch.multinomial(probs.cpu(), 1, generator=generator))


class GlobalDecoder(nn.Module):
    """The Qwen3 LLM and the projector from compressor width (d_s) to its hidden size."""

    def __init__(self, config: Qwen3Config, memory_width: int, projector_type: str = "linear"):
        super().__init__()
        self.lm = Qwen3ForCausalLM(config)
        self.mm_projector = build_projector(projector_type, memory_width, config.hidden_size)
        # transformers 5.24 renamed the KV-cache argument to `cache` (`past_key_values` goes in 5.40); 5.20.2, the
        # newest on Python 3.10, only knows the old name.
        self.cache_argument = "cache" if "cache" in inspect.signature(self.lm.forward).parameters else \
            "past_key_values"
        # On a GPU, each generated token replays one CUDA graph (`static_decoding`); off, the eager forward.
        self.cuda_graphs = "sliding_attention" not in (getattr(config, "layer_types", None) or ())
        # Layer steps compiled ahead of time (`compiled_decoding.CompiledLayers`) for those steps; None: the fused
        # steps (`fused_step`) where the layers allow them and `fused_steps` is on, else the eager layers.
        self.compiled: Sequence[Callable[..., torch.Tensor]] | None = None
        self.fused_steps = True

    def embed(self, ids: list[int]) -> torch.Tensor:
        weight = self.lm.get_input_embeddings().weight
        assert isinstance(weight, torch.Tensor)  # the embedding's (a module's attribute, to the type checker)
        return self.lm.get_input_embeddings()(torch.tensor(ids, dtype=torch.long, device=weight.device))

    def visual_sequence(self, memories: list[torch.Tensor], time_tags: list[list[int]]) -> torch.Tensor:
        """Per segment `embed(<t seconds>)` then its projected memory tokens; empty segments are dropped."""
        parts = []
        for memory, tag in zip(memories, time_tags):
            if memory.shape[0] == 0:
                continue
            weight = next(self.mm_projector.parameters())  # memories may come back from a cache on the CPU
            projected = self.mm_projector(memory.to(weight.device, weight.dtype))  # [k_i, d]
            parts += [self.embed(tag).to(projected.dtype), projected]
        if not parts:
            return self.embed([])
        return torch.cat(parts)  # [V, d]

    def prompt_embeddings(self, before: list[int], visual: torch.Tensor, after: list[int]) -> torch.Tensor:
        """[S, d] input embeddings: the ChatML text around the visual sequence."""
        before_embeds, after_embeds = self.embed(before), self.embed(after)
        return torch.cat([before_embeds, visual.to(before_embeds.dtype), after_embeds])

    def prefill(self, embeds: torch.Tensor) -> tuple[torch.Tensor, DynamicCache]:
        """Run the whole prompt once; return the next-token logits and the KV cache."""
        cache = DynamicCache(config=self.lm.config)  # filled in place by every forward pass that is given it
        output = self.lm(inputs_embeds=embeds[None], use_cache=True, logits_to_keep=1, **{self.cache_argument: cache})
        return output.logits[0, -1], cache  # [V], cache

    def graphed_steps(self, cache: DynamicCache, room: int) -> StaticDecoding | None:
        """The prefill's cache moved into a static one whose steps replay as a CUDA graph; None (eager steps from
        here on) where that is switched off or capturing fails, which is logged once."""
        if not self.cuda_graphs or room < 2:
            return None
        layers = cast(list[FilledLayer], cache.layers)
        try:
            return StaticDecoding(self.lm, [layer.keys for layer in layers],
                                  [layer.values for layer in layers], room, graph=True, layers=self.step_layers())
        except RuntimeError as exc:  # a driver or torch that cannot capture: answers stay right, only slower
            log.warning("decoding without CUDA graphs (capturing the decoder's step failed: %s)", exc)
            self.cuda_graphs = False
            return None

    def step_layers(self) -> Sequence[Callable[..., torch.Tensor]] | None:
        """The layers a static step runs: the compiled ones, else the fused ones (their projections merged the first
        time), else None (the eager layers)."""
        if self.compiled is not None:
            return self.compiled
        if self.fused_steps and all(fusable(block) for block in self.lm.model.layers):
            return FusedLayers(self.lm)
        return None

    @torch.inference_mode()
    def generate(self, embeds: torch.Tensor, generation: GenerationConfig, stop_ids: set[int],
                 top_k: int = 0, spells_word: Callable[[int], bool] | None = None) -> Iterator[int]:
        """Yield new token ids one by one; the stop token, if reached, is yielded last. With `spells_word` (which
        tokens spell words), no word or run of words is generated three times in a row."""
        generator = torch.Generator().manual_seed(generation.seed) if generation.temperature > 0 else None
        logits, cache = self.prefill(embeds)  # [V]
        device = embeds.device
        steps = self.graphed_steps(cache, generation.max_new_tokens) if device.type == "cuda" else None
        if steps is not None:
            del cache
        history: list[int] = []
        for step in range(generation.max_new_tokens):
            banned = looping_tokens(history, spells_word) if spells_word is not None else set()
            if banned:
                logits = logits.index_fill(0, torch.tensor(sorted(banned), device=logits.device), float("-inf"))
            token = next_token(logits, generation, top_k, generator)
            history.append(token)
            yield token
            if token in stop_ids or step == generation.max_new_tokens - 1:
                return
            if steps is not None:
                logits = steps.step(token)
                continue
            output = self.lm(input_ids=torch.tensor([[token]], device=device), use_cache=True,
                             **{self.cache_argument: cache})
            logits = output.logits[0, -1]
