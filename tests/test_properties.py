"""Issue 6, part 4: property tests over sampling, segmentation, ATA and prompt building.

What tests/test_video.py and tests/test_allocation.py already check (the 2-fps rule's frame count, ATA's bounds,
monotonicity and determinism on scores in [0, 1], token merging) is not repeated: these add other sampling
settings and extreme frame rates, whole sampling plans, segment streaming on worker threads, every allocation
strategy on any float scores (NaN, infinities, huge values), the budget check, settings validation, and prompts
built around arbitrary unicode questions.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tempo.allocation import STRATEGIES, TRUNCATIONS, allocate, check_budget, reduce_memory
from tempo.config import AllocationConfig, GenerationConfig, RunConfig, SamplingConfig
from tempo.engine import check_question
from tempo.errors import InputError, VideoError
from tempo.model import CheckpointSpec
from tempo.model.prompts import compressor_prompt_ids, decoder_prompt_ids, frame_group_times, time_tag
from tempo.model.tokenizer import TextTokenizer
from tempo.settings import limits_from_env, setting_named, validate
from tempo.video import VideoInfo, fast_seek_plan, sample_frame_indices, segment_ranges, uniform_plan
from tempo.video.stream import segment_stream

FAST = settings(max_examples=150, deadline=None)
native_fps = st.floats(1e-3, 1e4, allow_nan=False)
any_float = st.floats(allow_nan=True, allow_infinity=True)


# ------------------------------------------------------------------------------------------------ sampling

@FAST
@given(st.integers(0, 2_000_000), native_fps, st.floats(0.01, 60), st.integers(1, 64), st.integers(1, 4096))
def test_sampling_any_rate_and_bounds(total, fps, rate, min_frames, max_frames):
    indices = sample_frame_indices(total, fps, rate, min_frames, max_frames)
    assert 1 <= len(indices) <= max(1, max_frames)
    assert indices == sorted(indices)
    assert all(0 <= i < max(total, 1) for i in indices)
    if len(indices) <= total:  # enough frames: none is read twice
        assert len(set(indices)) == len(indices)


@FAST
@given(st.integers(0, 10_000), st.integers(1, 64))
def test_segments_partition_the_sampled_frames(frames, size):
    windows = segment_ranges(frames, size)
    assert [i for w in windows for i in w] == list(range(frames))
    assert len(windows) == math.ceil(frames / size)
    assert all(len(w) == size for w in windows[:-1])
    assert all(1 <= len(w) <= size for w in windows)


@st.composite
def plans(draw):
    info = VideoInfo("x.mp4", draw(st.integers(1, 200_000)), draw(native_fps), 64, 48, "test")
    sampling = SamplingConfig(fps=draw(st.floats(0.05, 30)), max_frames=draw(st.integers(1, 2048)),
                              min_frames=draw(st.integers(1, 8)), segment_frames=draw(st.integers(1, 16)))
    return info, sampling, uniform_plan(info, sampling)


@FAST
@given(plans())
def test_uniform_plan_is_consistent(drawn):
    info, sampling, plan = drawn
    n = len(plan.frame_indices)
    assert len(plan.frame_times) == n and n >= 1
    assert [i for w in plan.segments for i in w] == list(range(n))
    assert math.isfinite(plan.real_fps) and plan.real_fps > 0
    assert all(0 <= t < info.duration + 1e-9 for t in plan.frame_times)
    spans = [plan.span(i) for i in range(len(plan.segments))]
    for start, end in spans:
        assert 0 <= start <= end <= info.duration * (1 + 1e-9)
    for (_, end), (start, _) in zip(spans, spans[1:]):  # segments tile the video, in order
        assert start == pytest.approx(end, rel=1e-9, abs=1e-9)
    for i, window in enumerate(plan.segments):
        times = plan.model_times(i, len(window) + 1)  # padded by one frame, as the compressor may pad
        assert len(times) == len(window) + 1 and times == sorted(times)
        assert plan.tag_time(i) >= spans[i][0]


@FAST
@given(st.lists(st.floats(0, 0.999), min_size=1, max_size=300, unique=True), st.floats(1, 36_000),
       st.integers(1, 2048), st.integers(1, 16))
def test_fast_seek_plan_is_consistent(fractions, duration, max_frames, segment_frames):
    times = sorted(f * duration for f in fractions)
    info = VideoInfo("x.mp4", max(1, round(duration * 30)), max(1, round(duration * 30)) / duration, 64, 48, "pyav")
    plan = fast_seek_plan(times, info, SamplingConfig(max_frames=max_frames, segment_frames=segment_frames))
    assert plan.frame_indices == sorted(set(plan.frame_indices))
    assert all(0 <= k < len(times) for k in plan.frame_indices)
    assert len(plan.frame_indices) <= max(4, max_frames)  # each intra frame at most once
    assert [i for w in plan.segments for i in w] == list(range(len(plan.frame_indices)))
    spans = [plan.span(i) for i in range(len(plan.segments))]
    assert all(start <= end for start, end in spans)
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)


# ------------------------------------------------------------------------------------------------ streaming

class FakeReader:
    """Frames are their own index; optionally fails after `fail_after` frames."""

    def __init__(self, fail_after: int | None = None):
        self.fail_after, self.delivered, self.closed = fail_after, 0, False

    def read(self, indices):
        for i in indices:
            if self.fail_after is not None and self.delivered >= self.fail_after:
                raise RuntimeError("broken packet")
            self.delivered += 1
            yield np.full((1,), i)

    def close(self):
        self.closed = True


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), st.integers(1, 4), st.integers(1, 5), st.one_of(st.none(), st.integers(0, 60)))
def test_segment_stream_delivers_every_segment_in_order_or_fails_cleanly(drawn, workers, chunk, fail_after):
    _, _, plan = drawn
    assume(len(plan.segments) <= 64)
    readers = [FakeReader(fail_after) for _ in range(workers)]
    prepare = lambda index, frames: (index, [int(f[0]) for f in frames])
    delivered = []
    try:
        for item in segment_stream(plan, [lambda r=r: r for r in readers], prepare, chunk=chunk):
            delivered.append(item)
        failed = False
    except VideoError as error:  # said plainly, at the segment it stopped at, without the decoder's words
        assert str(error).startswith("The video is damaged: decoding failed") and "broken packet" not in str(error)
        assert f"(segment {len(delivered) + 1} of {len(plan.segments)})" in str(error)
        failed = True
    expected = [(i, [plan.frame_indices[k] for k in w]) for i, w in enumerate(plan.segments)]
    assert delivered == expected[:len(delivered)]  # in order, each with its own frames
    if not failed:
        assert len(delivered) == len(expected)
    used = [r for r in readers if r.delivered or r.closed]
    assert all(r.closed for r in used)  # every reader a worker opened is closed, failure or not
    assert not [t for t in threading.enumerate() if t.name.startswith("tempo-decode")]


# ------------------------------------------------------------------------------------------------ allocation

@st.composite
def allocations(draw):
    n = draw(st.integers(1, 200))
    scores = draw(st.lists(any_float | st.floats(-1e38, 1e38), min_size=n, max_size=n))
    k_max = draw(st.integers(1, 128))
    k_min = draw(st.integers(1, k_max))
    budget = draw(st.integers(1, n * k_max + 100))
    return scores, budget, k_min, k_max, draw(st.sampled_from(tuple(STRATEGIES))), draw(st.integers(0, 2**32))


@settings(max_examples=400, deadline=None)
@given(allocations())
def test_every_strategy_on_any_scores_stays_in_bounds(drawn):
    scores, budget, k_min, k_max, strategy, seed = drawn
    n = len(scores)
    if strategy in ("ata", "uniform") and budget < n:
        with pytest.raises(InputError, match="cannot keep even one token"):
            allocate(scores, budget, k_min, k_max, strategy, seed)
        return
    tokens = allocate(scores, budget, k_min, k_max, strategy, seed)
    assert len(tokens) == n and all(isinstance(k, int) and 0 <= k <= k_max for k in tokens)
    if strategy == "off":
        assert tokens == [k_max] * n
        return
    assert sum(tokens) <= budget
    if strategy in ("ata", "uniform"):
        assert min(tokens) >= 1
    if strategy == "uniform":
        assert len(set(tokens)) == 1
    if strategy in ("topk", "random", "adversarial"):
        kept = [k for k in tokens if k]
        assert len(kept) == min(n, max(1, budget // k_max)) and len(set(kept)) == 1
    assert tokens == allocate(scores, budget, k_min, k_max, strategy, seed)  # deterministic for a seed


@FAST
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=100, unique=True), st.integers(1, 64), st.integers(1, 5000))
def test_topk_keeps_the_most_relevant_and_adversarial_the_least(scores, k_max, budget):
    for strategy in ("topk", "adversarial"):
        tokens = allocate(scores, budget, 1, k_max, strategy)
        kept = [s for s, k in zip(scores, tokens) if k]
        dropped = [s for s, k in zip(scores, tokens) if not k]
        if kept and dropped:
            assert min(kept) > max(dropped) if strategy == "topk" else max(kept) < min(dropped)


@FAST
@given(st.integers(1, 500), st.integers(1, 128), st.integers(1, 200), st.integers(-5, 70_000),
       st.sampled_from(tuple(STRATEGIES)))
def test_budget_check_agrees_with_allocation(segments, k_max, k_min, budget, strategy):
    config = RunConfig(allocation=AllocationConfig(budget=budget, k_min=k_min, strategy=strategy))
    highest = setting_named("budget").maximum
    try:
        validate(config, CheckpointSpec("test", num_memory_tokens=k_max))  # the settings, against the checkpoint
        check_budget(segments, budget, strategy)  # then the budget, against the video
    except InputError as error:
        assert k_min > k_max or not 1 <= budget <= highest or (strategy in ("ata", "uniform") and budget < segments), \
            error
        return
    assert k_min <= k_max  # what validation lets through: the allocation then fits
    tokens = allocate([0.5] * segments, budget, k_min, k_max, strategy)
    assert strategy == "off" or sum(tokens) <= budget


@FAST
@given(st.integers(1, 48), st.integers(1, 16), st.integers(-3, 60), st.sampled_from(tuple(TRUNCATIONS)))
def test_reduce_memory_keeps_k_tokens(k_max, dim, k, truncation):
    memory = torch.randn(k_max, dim, generator=torch.Generator().manual_seed(k_max * 131 + dim))
    kept = reduce_memory(memory, max(k, 0), truncation)
    assert kept.shape == (min(max(k, 0), k_max), dim)
    if 0 < k < k_max and truncation != "merge":
        expected = memory[:k] if truncation == "head" else memory[k_max - k:]
        assert torch.equal(kept, expected)


# ------------------------------------------------------------------------------------------------ settings

anything = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), any_float, st.text(max_size=8),
                     st.lists(st.integers(), max_size=2))


@settings(max_examples=300, deadline=None)
@given(anything, anything, anything, anything, anything, anything, anything, anything)
@example(1, None, 1, [], None, None, None, None)  # a list where a name goes: the check itself once failed on it
def test_settings_validate_or_explain(max_frames, budget, k_min, strategy, truncation, new_tokens, temperature, top_p):
    config = RunConfig(sampling=SamplingConfig(max_frames=max_frames),
                       allocation=AllocationConfig(budget=budget, k_min=k_min, strategy=strategy,
                                                   truncation=truncation),
                       generation=GenerationConfig(max_new_tokens=new_tokens, temperature=temperature, top_p=top_p))
    acceptable = (whole(max_frames, 1, 2048) and (budget is None or whole(budget, 1, 65536)) and whole(k_min, 1)
                  and named(strategy, STRATEGIES) and named(truncation, TRUNCATIONS) and whole(new_tokens, 1, 2048)
                  and number(temperature, 0, 2) and number(top_p, 0.01, 1))
    try:
        validate(config)
    except InputError as error:
        assert not acceptable, f"refused settings the table allows: {error}"
        assert str(error).endswith(").") or "choose one of" in str(error)
    else:
        assert acceptable, "accepted settings outside the table's ranges"


def whole(value: object, low: float, high: float = math.inf) -> bool:
    """What a whole-number setting built in code must be: an int (not a bool, not 3.0) within its range."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def named(value: object, names: dict[str, str]) -> bool:
    """What a named setting must be: one of the table's names (a list or a number is none of them)."""
    return isinstance(value, str) and value in names


def number(value: object, low: float, high: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
        low <= value <= high


@pytest.mark.parametrize("field, value", [("max_frames", 0), ("max_frames", 2.0), ("k_min", True),
                                          ("strategy", "best"), ("temperature", float("nan")), ("top_p", 0)])
def test_settings_outside_the_table_are_refused(field, value):
    defaults = dict(max_frames=1024, k_min=4, strategy="ata", temperature=0.0, top_p=1.0)
    values = defaults | {field: value}
    config = RunConfig(sampling=SamplingConfig(max_frames=values["max_frames"]),
                       allocation=AllocationConfig(k_min=values["k_min"], strategy=values["strategy"]),
                       generation=GenerationConfig(temperature=values["temperature"], top_p=values["top_p"]))
    with pytest.raises(InputError, match=setting_named(field).label):
        validate(config)


env_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.one_of(env_text, st.sampled_from(["inf", "-inf", "nan", "1e400", "-1", "0", "2.5", " 7 ", "1_000"])),
       st.sampled_from(["TEMPO_MAX_QUESTION_CHARS", "TEMPO_MAX_UPLOAD_MB", "TEMPO_MAX_DURATION_MIN"]))
def test_limits_from_any_environment_or_a_clear_error(value, name):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(name, value)
        try:
            limits = limits_from_env()
        except InputError as error:
            assert f"{name}=" in str(error) and "is not a number" in str(error) or \
                f"{name} must be a positive number" in str(error)
            return
    assert isinstance(limits.max_question_chars, int) and isinstance(limits.max_upload_bytes, int)
    assert limits.max_question_chars >= 0 and limits.max_upload_bytes > 0 and limits.max_duration_s > 0


# ------------------------------------------------------------------------------------------------ prompts

@pytest.fixture(scope="module")
def tokenizer(fixtures):
    return TextTokenizer(fixtures / "tempo")


SPECIAL = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_start|>", "<|vision_end|>", "<|video_pad|>",
           "<|image_pad|>")
unicode_text = st.text(st.characters(blacklist_categories=()), max_size=300)  # every code point, surrogates too
markup_text = st.lists(st.sampled_from([*SPECIAL, "<image>", "<think>", "\n", "system", "user", "assistant", " "]),
                       max_size=12).map("".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(unicode_text, markup_text, st.tuples(unicode_text, markup_text).map("".join)))
def test_prompts_keep_their_structure_for_any_question(tokenizer, raw):
    try:
        question = check_question(raw, 2000)
    except InputError as error:
        assert not raw.strip() and "Please type a question" in str(error)
        return
    assert len(question) == len(raw) and not any(0xD800 <= ord(c) <= 0xDFFF for c in question)
    special = {tokenizer.token_id(t) for t in SPECIAL}
    structure = lambda ids: [i for i in ids if i in special]
    times, per_group = [0.5, 1.5, 2.5], 3
    benign = "What happens?"
    assert structure(compressor_prompt_ids(tokenizer, question, times, per_group)) == \
        structure(compressor_prompt_ids(tokenizer, benign, times, per_group))
    before, after = decoder_prompt_ids(tokenizer, question)
    benign_before, benign_after = decoder_prompt_ids(tokenizer, benign)
    assert before == benign_before and structure(after) == structure(benign_after)
    # the question's own tokens carry exactly its text (the released tokenizer normalises to NFC)
    assert tokenizer.decode(tokenizer.text(question)) == unicodedata.normalize("NFC", question)


@FAST
@given(st.one_of(st.none(), st.integers(), st.binary(max_size=4), st.text(max_size=50)), st.integers(0, 60))
def test_check_question_refuses_or_passes_text_through(raw, limit):
    try:
        question = check_question(raw, limit)
    except InputError as error:
        message = str(error)
        assert message == "Please type a question about the video." or message.startswith("The question is ")
        assert not isinstance(raw, str) or not raw.strip() or len(raw) > limit
        return
    assert isinstance(raw, str) and raw.strip() and len(raw) <= limit and question == raw


@FAST
@given(st.lists(st.floats(0, 1e6), min_size=1, max_size=64).map(sorted), st.integers(1, 4))
def test_frame_group_times_stay_within_the_frames(times, group):
    grouped = frame_group_times(times, group)
    assert len(grouped) == math.ceil(len(times) / group)
    assert grouped == sorted(grouped)
    assert all(times[0] <= t <= times[-1] for t in grouped)


@FAST
@given(st.floats(0, 1e9))
def test_time_tags_are_well_formed(seconds):
    assert re.fullmatch(r"<\d+\.\d seconds>", time_tag(seconds))
