"""The visual token budget a run spends and the memory tokens it keeps of each segment: ATA (or an ablation) over the
compression's relevance, under the run's allocation settings and the checkpoint's budget where the run leaves it."""

from __future__ import annotations

from ..allocation import allocate
from ..config import RunConfig
from ..model import TempoModel


def effective_budget(model: TempoModel, config: RunConfig) -> int:
    """The visual token budget of a run: the configured one, else the checkpoint's."""
    budget = config.allocation.budget
    return model.spec.visual_token_budget if budget is None else budget


def allocate_tokens(model: TempoModel, relevance: list[float], config: RunConfig) -> list[int]:
    """Memory tokens kept per segment under `config`'s allocation settings (and budget, or the checkpoint's)."""
    allocation = config.allocation
    return allocate(relevance, effective_budget(model, config), allocation.k_min, model.spec.num_memory_tokens,
                    allocation.strategy, allocation.seed)
