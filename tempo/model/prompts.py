"""The two prompts Tempo builds: the compressor's per-segment routing prompt and the decoder's ChatML prompt."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..video.patches import PatchGeometry
from ..video.sampling import SamplingPlan
from .tokenizer import TextTokenizer

# The paper's explicit routing prompt (appendix, P_route): the compression instruction plus a Yes/No question
# whose answer logit is read, not generated.
ROUTING_SYSTEM_PROMPT = (
    "You are a query-conditioned visual compressor. "
    "Store in the provided memory tokens the minimal visual information needed to answer the Query. "
    "Ignore irrelevant details. "
    "Now, before compressing, answer exactly 'Yes' or 'No': is this segment relevant to the Query?"
)
DECODER_SYSTEM_PROMPT = "You are a helpful assistant."

VISION_START, VIDEO_PAD, VISION_END = "<|vision_start|>", "<|video_pad|>", "<|vision_end|>"


def frame_group_times(times: list[float], group: int) -> list[float]:
    """Qwen3-VL labels each group of `group` frames with the mean time of its first and last frame."""
    times = times + [times[-1]] * (-len(times) % group)
    return [(times[i] + times[i + group - 1]) / 2 for i in range(0, len(times), group)]


def compressor_prompt_ids(tokenizer: TextTokenizer, question: str, group_times: list[float],
                          tokens_per_group: int, system: str = ROUTING_SYSTEM_PROMPT) -> list[int]:
    """The SVLM input for one segment, ending right before where the memory tokens are appended.

    This is what Qwen3-VL's chat template renders for [system, user(video, text)] with a generation
    prompt, after the processor expands the video into `<t seconds>` + one placeholder block per group.
    (`system` is the routing prompt at inference; base pre-training also asks other things.)
    """
    video = "".join(f"<{t:.1f} seconds>{VISION_START}{VIDEO_PAD * tokens_per_group}{VISION_END}" for t in group_times)
    head = f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{video}"
    return tokenizer.markup(head) + tokenizer.text("\nQuery:\n" + question) + tokenizer.markup(
        "<|im_end|>\n<|im_start|>assistant\n")


def segment_prompt_ids(tokenizer: TextTokenizer, question: str, plan: SamplingPlan, index: int,
                       grid: tuple[int, int, int], geometry: PatchGeometry,
                       system: str = ROUTING_SYSTEM_PROMPT) -> list[int]:
    """The compressor's prompt for segment `index` of `plan`, whose frames became the patch grid `grid`
    (inference, conformance and training all build it here)."""
    times = frame_group_times(plan.model_times(index, grid[0] * geometry.temporal_patch_size), geometry.merge_size)
    return compressor_prompt_ids(tokenizer, question, times, grid[1] * grid[2] // geometry.merge_size**2, system)


@dataclass(frozen=True)
class Exchange:
    """An earlier turn of a conversation: what was asked and what the model answered."""

    question: str
    answer: str


def exchange_ids(tokenizer: TextTokenizer, exchange: Exchange) -> list[int]:
    """An earlier turn as ChatML, the user's text only, then the answer: the release's template renders a message
    whose content is a string as `<|im_start|>{role}\n{content}<|im_end|>\n`."""
    return (tokenizer.markup("<|im_start|>user\n") + tokenizer.text(exchange.question) +
            tokenizer.markup("<|im_end|>\n<|im_start|>assistant\n") + tokenizer.text(exchange.answer) +
            tokenizer.markup("<|im_end|>\n"))


def decoder_prompt_ids(tokenizer: TextTokenizer, question: str,
                       history: Sequence[Exchange] = ()) -> tuple[list[int], list[int]]:
    """ChatML ids before and after the `<image>` slot where the visual sequence goes: the system message, the
    earlier turns (text only), then the question's own turn, whose visual input is this question's compression."""
    before = tokenizer.markup(f"<|im_start|>system\n{DECODER_SYSTEM_PROMPT}<|im_end|>\n")
    for exchange in history:
        before += exchange_ids(tokenizer, exchange)
    before += tokenizer.markup("<|im_start|>user\n")
    after = tokenizer.text("\n" + question) + tokenizer.markup("<|im_end|>\n<|im_start|>assistant\n")
    return before, after


def history_within(tokenizer: TextTokenizer, history: Sequence[Exchange],
                   allowance: int) -> tuple[tuple[Exchange, ...], int]:
    """The latest earlier turns whose ChatML fits in `allowance` tokens (the oldest go first), and how many went."""
    kept: list[Exchange] = []
    used = 0
    for exchange in reversed(history):
        used += len(exchange_ids(tokenizer, exchange))
        if used > allowance:
            break
        kept.append(exchange)
    return tuple(reversed(kept)), len(history) - len(kept)


# Words by which a follow-up points back at what an earlier question named ("what colour is it?").
REFERRING = re.compile(r"\b(it|its|it's|that|this|those|these|they|them|their|there|then|he|she|him|her|the same|"
                       r"again|before|after)\b", re.IGNORECASE)


def compressor_query(question: str, history: Sequence[Exchange]) -> str:
    """What the compressor reads as the query of a follow-up: the question alone, unless it points back with a
    pronoun or the like, when the previous question goes before it (the compressor sees no history, so "it" needs
    its referent; an unrelated previous question would only blur a question that stands alone)."""
    if history and REFERRING.search(question):
        return f"{history[-1].question.strip()} {question.strip()}"
    return question


def time_tag(seconds: float) -> str:
    """The decoder's per-segment tag, e.g. `<12.0 seconds>`."""
    return f"<{seconds:.1f} seconds>"
