import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tempo.allocation import (
    adaptive_token_allocation,
    allocate,
    check_budget,
    logit,
    merge_tokens,
    reduce_memory,
    scaled_relevance,
)
from tempo.errors import InputError

float32 = st.floats(0, 1, width=32)


@st.composite
def ata_inputs(draw):
    n = draw(st.integers(1, 300))
    scores = draw(st.lists(float32, min_size=n, max_size=n))
    k_max = draw(st.integers(1, 128))
    k_min = draw(st.integers(1, k_max))
    budget = draw(st.integers(n, n * k_max + 50))
    return scores, budget, k_min, k_max


@settings(max_examples=300, deadline=None)
@given(ata_inputs())
def test_ata_respects_budget_and_bounds(inputs):
    scores, budget, k_min, k_max = inputs
    tokens = adaptive_token_allocation(scores, budget, k_min, k_max)
    assert len(tokens) == len(scores)
    assert sum(tokens) <= budget
    floor = k_min if len(scores) * k_min <= budget else max(1, budget // len(scores))
    flat = max(scores) - min(scores) < 1e-8
    for k in tokens:
        assert (min(k_max, budget // len(scores)) if flat else floor) <= k <= k_max


@settings(max_examples=300, deadline=None)
@given(ata_inputs())
def test_ata_higher_score_never_gets_fewer_tokens(inputs):
    scores, budget, k_min, k_max = inputs
    tokens = adaptive_token_allocation(scores, budget, k_min, k_max)
    # In score order, each segment gets at least the most any strictly lower score got (every pair, in n log n).
    ranked = sorted(zip(np.float32(scores).tolist(), tokens))
    most_below, most_at, level = -1, -1, None
    for score, k in ranked:
        if score != level:
            most_below, level = max(most_below, most_at), score
        assert k >= most_below, (score, k, most_below)
        most_at = max(most_at, k)


@st.composite
def distinct_ata_inputs(draw):
    """ATA's inputs with distinct scores, a millionth apart at least (so their float32 s_hat differ too)."""
    millionths = draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=300, unique=True))
    k_max = draw(st.integers(1, 128))
    k_min = draw(st.integers(1, k_max))
    budget = draw(st.integers(len(millionths), len(millionths) * k_max + 50))
    return [m / 10**6 for m in millionths], budget, k_min, k_max


@settings(max_examples=200, deadline=None)
@given(distinct_ata_inputs(), st.randoms(use_true_random=False))
def test_ata_depends_on_the_scores_not_on_where_the_segments_sit(inputs, random):
    # Segments reordered keep their tokens: nothing (the remainder's order, say) goes by position. Distinct scores
    # only: tied segments may share a remainder either way.
    scores, budget, k_min, k_max = inputs
    order = list(range(len(scores)))
    random.shuffle(order)
    tokens = adaptive_token_allocation(scores, budget, k_min, k_max)
    shuffled = adaptive_token_allocation([scores[i] for i in order], budget, k_min, k_max)
    assert shuffled == [tokens[i] for i in order]


def test_ata_examples_from_the_paper_rule():
    # ideal allocation fits: k = 4 + floor(28 * s_hat)
    assert adaptive_token_allocation([0.0, 0.5, 1.0], 8192, 4, 32) == [4, 18, 32]
    # float32 arithmetic: (0.2-0.1)/(0.3-0.1) is just below 0.5 in float32
    assert adaptive_token_allocation([0.1, 0.2, 0.3], 8192, 4, 32) == [4, 17, 32]
    # too much demand: k_min each, residual in proportion, remainder to the top score
    assert adaptive_token_allocation([0.2, 0.9], 35, 4, 32) == [4, 31]
    # flat scores: equal split capped at k_max
    assert adaptive_token_allocation([0.5] * 6, 100, 4, 32) == [16] * 6


def test_budget_below_segment_count_is_refused():
    with pytest.raises(InputError, match="cannot keep even one token"):
        adaptive_token_allocation([0.1, 0.5, 0.9], 2, 4, 32)
    with pytest.raises(InputError):
        allocate([0.1, 0.5, 0.9], 2, 4, 32, "uniform")


def test_ablation_strategies():
    scores = [0.1, 0.9, 0.5, 0.3, 0.7, 0.2]
    assert allocate(scores, 64, 4, 32, "off") == [32] * 6
    assert allocate(scores, 64, 4, 32, "uniform") == [10] * 6
    assert allocate(scores, 64, 4, 32, "topk") == [0, 32, 0, 0, 32, 0]
    assert allocate(scores, 64, 4, 32, "adversarial") == [32, 0, 0, 0, 0, 32]
    chosen = allocate(scores, 64, 4, 32, "random", seed=3)
    assert sorted(chosen) == [0, 0, 0, 0, 32, 32]
    assert chosen == allocate(scores, 64, 4, 32, "random", seed=3)
    assert any(allocate(scores, 64, 4, 32, "random", seed=s) != chosen for s in range(10))
    # a budget smaller than k_max keeps the single best segment with what there is
    assert allocate(scores, 20, 4, 32, "topk") == [0, 20, 0, 0, 0, 0]


def test_reduce_memory_modes():
    memory = torch.arange(32 * 3, dtype=torch.float32).reshape(32, 3)
    assert torch.equal(reduce_memory(memory, 5, "head"), memory[:5])
    assert torch.equal(reduce_memory(memory, 5, "tail"), memory[-5:])
    assert reduce_memory(memory, 5, "merge").shape == (5, 3)
    assert reduce_memory(memory, 0, "head").shape == (0, 3)
    assert reduce_memory(memory, 40, "merge") is memory


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 40), st.integers(0, 2**31 - 1))
def test_merge_tokens_returns_k_averages(n, k, seed):
    tokens = torch.randn(n, 8, generator=torch.Generator().manual_seed(seed))
    merged = merge_tokens(tokens, k)
    assert merged.shape == (min(n, k), 8)
    if 0 < k < n:
        # merged tokens are averages of groups, so constant features stay constant
        ones = merge_tokens(torch.ones(n, 8), k)
        assert torch.allclose(ones, torch.ones_like(ones))


def test_merge_keeps_identical_tokens_together():
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    tokens = torch.stack([a, a, b, b])
    merged = merge_tokens(tokens, 2)
    assert torch.allclose(merged, torch.stack([a, b]))


def test_allocate_is_ata_unless_told_otherwise():
    # Algorithm 1 by hand: k = 4 + floor(28 * s_hat) with s_hat = 0, 0.5, 1 fits the budget.
    assert allocate([0.0, 0.5, 1.0], 8192, 4, 32) == [4, 18, 32]
    assert allocate([0.0, 0.5, 1.0], 8192, 4, 32, "ata") == [4, 18, 32]
    # 4 + 28 = 32 and 4 ask 36 > 35: k_min each, the residual 27 all to the one with weight 1
    assert allocate([0.2, 0.9], 35, 4, 32, "ata") == [4, 31]


def test_ata_computes_in_float32_as_released():
    # 0.2499999999 is 0.25 in float32: 4 + floor(28 * 0.25) = 11; in float64 28 * s_hat is just below 7 (10)
    assert adaptive_token_allocation([0.0, 0.2499999999, 1.0], 8192, 4, 32) == [4, 11, 32]
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # a program that computes in float64 elsewhere: ATA still does not
    try:
        assert adaptive_token_allocation([0.0, 0.2499999999, 1.0], 8192, 4, 32) == [4, 11, 32]
    finally:
        torch.set_default_dtype(default)


def test_an_ideal_that_meets_the_budget_exactly_stands():
    """s_hat = (v - 0.12) / 0.86, k = 7 + floor(9 * s_hat): 0.64 -> 5.44 (12), 0.7 -> 6.07 (13), 0.98 -> 9 (16),
    0.36 -> 2.51 (9), 0.32 -> 2.09 (9), 0.12 -> 0 (7), 0.59 -> 4.92 (11): 77 tokens, the budget. Only a sum over
    it is shared in proportion (which would give 13, 13, 16, 9, 8, 7, 11)."""
    relevance = [0.64, 0.7, 0.98, 0.36, 0.32, 0.12, 0.59]
    assert adaptive_token_allocation(relevance, 77, 7, 16) == [12, 13, 16, 9, 9, 7, 11]


def test_a_spread_of_exactly_the_flat_range_is_not_flat():
    # 1e-8 in float32 is the float32 threshold itself: not below it, so s_hat = 0, 1 and k = 4, 32 (not 32, 32)
    assert adaptive_token_allocation([0.0, 1e-8], 64, 4, 32) == [4, 32]
    assert adaptive_token_allocation([0.0, 9e-9], 64, 4, 32) == [32, 32]  # below it: an equal split


def test_anchors_that_overflow_shrink_to_what_the_budget_holds():
    # 2 segments * k_min 4 > budget 5: k_min becomes 5 // 2 = 2; the ideal [2, 2 + 30] asks 34, so the residual
    # 5 - 2 * 2 = 1 goes to the relevant one (weights 0 and 1).
    assert adaptive_token_allocation([0.0, 1.0], 5, 4, 32) == [2, 3]
    # flat scores split evenly, each capped at k_max: 300 // 6 = 50 > 32
    assert adaptive_token_allocation([0.5] * 6, 300, 4, 32) == [32] * 6


def test_the_ablations_keep_whole_tokens_and_their_seed():
    scores = [0.1, 0.9, 0.5, 0.3, 0.7, 0.2]
    for strategy in ("topk", "adversarial", "random", "uniform", "off", "ata"):
        tokens = allocate(scores, 20, 1, 32, strategy)
        assert all(type(k) is int for k in tokens), (strategy, tokens)
    # the seed is 0 unless given: the default draws what seed 0 draws, and seed 1 draws another pair here
    assert allocate(scores, 64, 4, 32, "random") == allocate(scores, 64, 4, 32, "random", seed=0)
    assert allocate(scores, 64, 4, 32, "random") != allocate(scores, 64, 4, 32, "random", seed=1)
    with pytest.raises(InputError, match=r"^Unknown allocation strategy 'best'\.$"):
        allocate(scores, 64, 4, 32, "best")


def test_check_budget_says_what_would_fit():
    check_budget(10, 10)  # one token each fits exactly
    check_budget(10, 5, "topk")  # routing ablations keep what they can
    with pytest.raises(InputError, match=r"A budget of 5 visual tokens cannot keep even one token for each of the "
                                         r"10 segments\. Raise the budget to at least 10\.$"):
        check_budget(10, 5)
    # 5 tokens at 8 frames a segment: 40 frames at most
    with pytest.raises(InputError, match=r"at least 10, or lower max frames to 40 or fewer\.$"):
        check_budget(10, 5, "uniform", 8)


def test_logit_is_the_log_odds_kept_off_0_and_1():
    assert logit(0.5) == 0.0
    assert logit(0.75) == pytest.approx(math.log(3), rel=1e-12)  # 0.75 / 0.25 = 3
    # clamped to 1e-6: log(1e-6 / (1 - 1e-6)) = -13.815509557963774 (ln 1e-6 = -13.815510557964274)
    for low in (0.0, -5.0, 1e-9):
        assert logit(low) == pytest.approx(-13.815509557963774, rel=1e-10)
    for high in (1.0, 7.0):
        assert logit(high) == pytest.approx(13.815509557963774, rel=1e-10)  # 1 - 1e-6 rounds in floats


def test_scaled_relevance_by_hand():
    # (r - 0.2) / (0.6 - 0.2): 0, 1 and 0.5; None stays None
    assert scaled_relevance([0.2, None, 0.6, 0.4]) == pytest.approx([0.0, None, 1.0, 0.5])
    assert scaled_relevance([0.3, 0.3 + 1e-9, None]) == [1.0, 1.0, None]  # flat: all 1
    assert scaled_relevance([0.0, 1e-8]) == [0.0, 1.0]  # a range of exactly 1e-8 is not flat
    assert scaled_relevance([None, None]) == [None, None]
    assert scaled_relevance([]) == []


def test_reduce_memory_keeps_a_short_memory_as_it_is():
    memory = torch.arange(32 * 3, dtype=torch.float32).reshape(32, 3)
    assert reduce_memory(memory, 32, "head") is memory  # k equal to the length: nothing to cut
    assert torch.equal(reduce_memory(memory, 31, "tail"), memory[1:])
    with pytest.raises(InputError, match=r"^Unknown truncation 'middle'; choose one of head, tail, merge\.$"):
        reduce_memory(memory, 5, "middle")
