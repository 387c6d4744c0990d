"""The two prompts Tempo builds: the compressor's per-segment routing prompt and the decoder's ChatML prompt."""

from __future__ import annotations

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


def decoder_prompt_ids(tokenizer: TextTokenizer, question: str) -> tuple[list[int], list[int]]:
    """ChatML ids before and after the `<image>` slot where the visual sequence goes."""
    before = tokenizer.markup(f"<|im_start|>system\n{DECODER_SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n")
    after = tokenizer.text("\n" + question) + tokenizer.markup("<|im_end|>\n<|im_start|>assistant\n")
    return before, after


def time_tag(seconds: float) -> str:
    """The decoder's per-segment tag, e.g. `<12.0 seconds>`."""
    return f"<{seconds:.1f} seconds>"
