import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tempo.allocation import adaptive_token_allocation, allocate, merge_tokens, reduce_memory
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
    for i in range(len(scores)):
        for j in range(len(scores)):
            if np.float32(scores[i]) > np.float32(scores[j]):
                assert tokens[i] >= tokens[j], (i, j)


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
