"""A request as the engine takes it at its door: the video, the question and the settings, and which answers to give,
all plain fields. `answer_configs` turns `answers` into the configs the accelerator answers under, once the video's
probe says how many segments it has."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from enum import Enum

from ..allocation import Strategy
from ..config import RunConfig
from ..events import VideoProbed
from ..model.prompts import Exchange

SWEEP_BUDGETS = 6  # rows of a budget sweep


class Answers(str, Enum):
    """Which answers a request gives once its video is compressed (one trip to the accelerator for all of them)."""

    NONE = "none"  # the compression alone
    ONE = "one"  # the question under `config`; where `config.zoom` looks closer, this pass only compresses
    COMPARED = "compared"  # under `config`, then under `compared_with`: two allocations of one compression
    BUDGETS = "budgets"  # `config`'s strategy at budgets from one token per segment to every memory token


@dataclass(frozen=True)
class Request:
    """One question about one video, as the engine takes it (`config` and `question` already checked)."""

    video: str | os.PathLike
    question: str
    config: RunConfig  # how the video is sampled and compressed, and how the (first) answer is allocated and made
    answers: Answers = Answers.ONE
    compared_with: RunConfig | None = None  # the second allocation, for Answers.COMPARED
    history: tuple[Exchange, ...] = ()  # the conversation's earlier turns, oldest first

    def __post_init__(self) -> None:
        if (self.answers is Answers.COMPARED) != (self.compared_with is not None):
            raise ValueError("compared_with is given exactly when the request's answers are Answers.COMPARED")


def sweep_budgets(num_segments: int, k_max: int, count: int = SWEEP_BUDGETS) -> list[int]:
    """`count` budgets from one token per segment to every memory token, evenly spaced on a log scale."""
    low, high = num_segments, num_segments * k_max
    if count < 2 or low >= high:
        return [high]
    budgets = {round(low * (high / low) ** (i / (count - 1))) for i in range(count)}
    return sorted(budgets)


def sweep_configs(config: RunConfig, num_segments: int, k_max: int,
                  budgets: list[int] | None = None) -> list[RunConfig]:
    """`config` at each budget (default `sweep_budgets`). At every memory token the top row keeps them all (no
    compression): under its strategy a budget that large is never spent (ATA keeps k_min plus a share of the
    relevance, not the budget), and the sweep should end at what the decoder sees uncompressed."""
    budgets = budgets or sweep_budgets(num_segments, k_max)
    rows = []
    for budget in budgets:
        strategy = Strategy.OFF.value if budget >= num_segments * k_max else config.allocation.strategy
        rows.append(replace(config, allocation=replace(config.allocation, budget=budget, strategy=strategy)))
    return rows


def answer_configs(request: Request, probed: VideoProbed, k_max: int, looks_closer: bool = False
                   ) -> tuple[RunConfig, ...]:
    """The configs the accelerator answers `request` under, one answer each, for the video `probed` says;
    `looks_closer`: one answer comes after zoom's closer pass (`zoom.looks_closer`), so this pass gives none."""
    config = request.config
    match request.answers:
        case Answers.NONE:
            return ()
        case Answers.ONE:
            return () if looks_closer else (config,)
        case Answers.COMPARED:
            assert request.compared_with is not None  # Request checks it
            return (config, request.compared_with)
        case Answers.BUDGETS:
            return tuple(sweep_configs(config, probed.num_segments, k_max))
    raise ValueError(f"unknown answers {request.answers!r}")
