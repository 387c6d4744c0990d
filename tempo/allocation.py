"""Adaptive Token Allocation (Algorithm 1) and the paper's ablation strategies.

Every function here is pure: relevance and settings in, token counts (or reduced memories) out.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from enum import Enum
from typing import overload

import torch

from .errors import InputError

FLAT_RELEVANCE_RANGE = 1e-8

LOGIT_EPSILON = 1e-6  # relevance is clamped to [LOGIT_EPSILON, 1 - LOGIT_EPSILON] before its log-odds


class Strategy(str, Enum):
    """How the budget is shared between segments (a setting's value is the strategy's; it compares equal)."""

    ATA = "ata"
    UNIFORM = "uniform"
    TOPK = "topk"
    RANDOM = "random"
    ADVERSARIAL = "adversarial"
    OFF = "off"  # every memory token, whatever the budget (the baseline)


STRATEGIES = {  # value: what it does (the app's label); every strategy but "off" keeps to the budget
    Strategy.ATA.value: "ATA (adaptive, the paper's)",
    Strategy.UNIFORM.value: "uniform share",
    Strategy.TOPK.value: "top-k segments",
    Strategy.RANDOM.value: "random segments",
    Strategy.ADVERSARIAL.value: "least relevant (adversarial)",
    Strategy.OFF.value: "off (every memory token)",
}
TRUNCATIONS = {"head": "head (first k tokens)", "tail": "tail (last k tokens)", "merge": "merge (average)"}
ONE_PER_SEGMENT = (Strategy.ATA, Strategy.UNIFORM)  # strategies that give every segment at least one token


def check_budget(num_segments: int, budget: int, strategy: str = "ata", segment_frames: int | None = None) -> None:
    """Refuse a budget that cannot give every segment one token (ATA, uniform); `segment_frames` adds the max
    frames that would fit."""
    if strategy not in ONE_PER_SEGMENT or budget >= num_segments:
        return
    advice = f"Raise the budget to at least {num_segments}"
    advice += f", or lower max frames to {budget * segment_frames} or fewer." if segment_frames else "."
    raise InputError(f"A budget of {budget} visual tokens cannot keep even one token for each of the "
                     f"{num_segments} segments. {advice}")


def logit(relevance: float) -> float:
    """Relevance in log-odds, kept off 0 and 1 (what the moments and live alerts compare levels in)."""
    p = min(max(relevance, LOGIT_EPSILON), 1 - LOGIT_EPSILON)
    return math.log(p / (1 - p))


@overload
def scaled_relevance(relevance: Sequence[float]) -> list[float]: ...
@overload
def scaled_relevance(relevance: Sequence[float | None]) -> list[float | None]: ...
def scaled_relevance(relevance: Sequence[float | None]) -> list[float] | list[float | None]:
    """ATA's s_hat for display: min-max scaled to [0, 1] over the relevance given, 1 for all when they are flat
    (ATA then splits evenly); None stays None."""
    known = [r for r in relevance if r is not None]
    if not known:
        return list(relevance)
    low, high = min(known), max(known)
    if high - low < FLAT_RELEVANCE_RANGE:
        return [None if r is None else 1.0 for r in relevance]
    return [None if r is None else (r - low) / (high - low) for r in relevance]


def adaptive_token_allocation(relevance: Sequence[float], budget: int, k_min: int, k_max: int) -> list[int]:
    """Algorithm 1: k_i = k_min + floor((k_max - k_min) * s_hat_i); if sum(k) > budget, every segment keeps
    k_min and the residual budget is shared in proportion to s_hat, remainders to the most relevant.

    Arithmetic is float32 and the remainder order is `torch.argsort`, as in the released implementation.
    """
    n = len(relevance)
    check_budget(n, budget)
    if n * k_min > budget:  # anchors alone overflow: shrink them so every segment still keeps one
        k_min = max(1, budget // n)
    values = torch.tensor(relevance, dtype=torch.float32)  # [N]
    spread = values.max() - values.min()
    if spread < FLAT_RELEVANCE_RANGE:  # nothing to prefer: an equal split
        return [min(k_max, budget // n)] * n

    s_hat = (values - values.min()) / spread
    k = k_min + (s_hat * (k_max - k_min)).floor().long()
    if k.sum().item() > budget:
        residual = budget - n * k_min
        weights = s_hat / s_hat.sum().item()
        extra = (weights * residual).floor().long()
        remainder = residual - int(extra.sum().item())
        extra[torch.argsort(weights, descending=True)[:remainder]] += 1
        k = k_min + extra
    return k.clamp(min=k_min, max=k_max).tolist()


def allocate(relevance: Sequence[float], budget: int, k_min: int, k_max: int,
             strategy: str = "ata", seed: int = 0) -> list[int]:
    """Tokens per segment under `strategy`; 0 means the segment (and its time tag) is dropped.

    uniform: the same share for every segment. topk / random / adversarial (the paper's routing
    ablations): as many segments as the budget holds at k_max -- the most relevant, a seeded random
    choice, or the least relevant -- and nothing for the rest. off: every memory token, budget ignored.
    """
    n = len(relevance)
    if strategy == Strategy.ATA:
        return adaptive_token_allocation(relevance, budget, k_min, k_max)
    if strategy == Strategy.OFF:
        return [k_max] * n
    if strategy == Strategy.UNIFORM:
        check_budget(n, budget, strategy)
        return [min(k_max, budget // n)] * n
    if strategy not in STRATEGIES:
        raise InputError(f"Unknown allocation strategy {strategy!r}.")
    kept_count = min(n, max(1, budget // k_max))
    per_segment = min(k_max, budget // kept_count)
    by_relevance = sorted(range(n), key=lambda i: relevance[i])
    if strategy == Strategy.TOPK:
        kept = by_relevance[n - kept_count:]
    elif strategy == Strategy.ADVERSARIAL:
        kept = by_relevance[:kept_count]
    else:
        kept = random.Random(seed).sample(range(n), kept_count)
    kept_set = set(kept)
    return [per_segment if i in kept_set else 0 for i in range(n)]


def reduce_memory(memory: torch.Tensor, k: int, truncation: str = "head") -> torch.Tensor:
    """Keep k of a segment's memory tokens [k_max, d]: the first k (the paper's default), the last k,
    or k merged tokens."""
    if k >= memory.shape[0]:
        return memory
    if truncation == "head":
        return memory[:k]
    if truncation == "tail":
        return memory[memory.shape[0] - k:]
    if truncation == "merge":
        return merge_tokens(memory, k)
    raise InputError(f"Unknown truncation {truncation!r}; choose one of {', '.join(TRUNCATIONS)}.")


def merge_tokens(tokens: torch.Tensor, k: int) -> torch.Tensor:
    """Token merging by bipartite soft matching (Bolya et al.): repeatedly average each of the most similar
    (even, odd) token pairs, weighting by how many tokens each already stands for, until k remain.
    Merged tokens keep the position of their earliest member, so the sequence stays in order."""
    if k <= 0:
        return tokens[:0]
    x = tokens.float()
    sizes = torch.ones(x.shape[0])
    positions = torch.arange(x.shape[0])
    while x.shape[0] > k:
        a, b = x[0::2], x[1::2]
        merges = min(x.shape[0] - k, a.shape[0])
        similarity = torch.nn.functional.normalize(a, dim=-1) @ torch.nn.functional.normalize(b, dim=-1).T
        best, partner = similarity.max(dim=-1)
        merged = best.argsort(descending=True)[:merges]
        kept = torch.ones(a.shape[0], dtype=torch.bool)
        kept[merged] = False

        size_a, size_b = sizes[0::2], sizes[1::2].clone()
        b_total = b * size_b[:, None]
        b_total.index_add_(0, partner[merged], a[merged] * size_a[merged, None])
        size_b.index_add_(0, partner[merged], size_a[merged])
        b_positions = positions[1::2].clone()
        b_positions.scatter_reduce_(0, partner[merged], positions[0::2][merged], reduce="amin")

        x = torch.cat([a[kept], b_total / size_b[:, None]])
        sizes = torch.cat([size_a[kept], size_b])
        positions = torch.cat([positions[0::2][kept], b_positions])
        order = positions.argsort()
        x, sizes, positions = x[order], sizes[order], positions[order]
    return x.to(tokens.dtype)
