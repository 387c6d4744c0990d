"""The decoder's static-cache step (what a GPU replays as a CUDA graph) computes what the eager forward computes.

On a CPU the step runs eagerly; the GPU check (benchmarks/gpu) compares the captured graph with the eager forward
on CUDA at Tempo-6B's sizes."""

from __future__ import annotations

import pytest
import torch

from tempo.config import GenerationConfig
from tempo.model.static_decoding import ATTENTIONS, StaticDecoding


def eager_and_static(model, embeds, tokens):
    """Logits after each of `tokens`, from the eager forward with its dynamic cache and from the static step."""
    decoder = model.decoder
    with torch.inference_mode():
        _, cache = decoder.prefill(embeds)
        _, fresh = decoder.prefill(embeds)
        steps = StaticDecoding(decoder.lm, [layer.keys for layer in fresh.layers],
                               [layer.values for layer in fresh.layers], len(tokens), graph=False)
        eager, static = [], []
        for token in tokens:
            output = decoder.lm(input_ids=torch.tensor([[token]]), use_cache=True, **{decoder.cache_argument: cache})
            eager.append(output.logits[0, -1])
            static.append(steps.step(token))
    return torch.stack(eager), torch.stack(static)


def decoder_embeds(model, length=300, seed=0):
    generator = torch.Generator().manual_seed(seed)
    width = model.decoder.lm.config.hidden_size
    return torch.randn(length, width, generator=generator) * 0.5


def test_static_steps_match_the_eager_forward_on_the_fixture_decoder(fixture_model):
    """4 query heads over 2 KV heads (grouped attention), tied embeddings, 40 steps, teacher-forced."""
    tokens = torch.randint(0, 3000, (40,), generator=torch.Generator().manual_seed(1)).tolist()
    eager, static = eager_and_static(fixture_model, decoder_embeds(fixture_model), tokens)
    assert (eager - static).abs().max() < 1e-5
    assert torch.equal(eager.argmax(-1), static.argmax(-1))


def test_static_steps_match_on_the_embedded_model():
    import tempo

    model = tempo.from_pretrained(device="cpu")
    tokens = torch.randint(0, 200, (24,), generator=torch.Generator().manual_seed(2)).tolist()
    eager, static = eager_and_static(model, decoder_embeds(model, 500), tokens)
    # float32 sums in another order over 500 positions: 1.3e-5 seen on v4's weights, with logits of order 1
    assert (eager - static).abs().max() < 5e-5
    assert torch.equal(eager.argmax(-1), static.argmax(-1))


def test_a_wrong_position_is_caught(fixture_model):
    """The comparison can fail: a step that believes it is one position further along gives other logits."""
    decoder = fixture_model.decoder
    embeds = decoder_embeds(fixture_model)
    with torch.inference_mode():
        _, cache = decoder.prefill(embeds)
        _, fresh = decoder.prefill(embeds)
        steps = StaticDecoding(decoder.lm, [layer.keys for layer in fresh.layers],
                               [layer.values for layer in fresh.layers], 4, graph=False)
        steps.position += 1
        eager = decoder.lm(input_ids=torch.tensor([[7]]), use_cache=True, **{decoder.cache_argument: cache})
        assert (eager.logits[0, -1] - steps.step(7)).abs().max() > 1e-3


def test_generation_is_unchanged_where_no_gpu_is(fixture_model):
    """Off CUDA, `generate` keeps the eager forward: the same tokens whatever the switch says."""
    decoder = fixture_model.decoder
    embeds = decoder_embeds(fixture_model)
    greedy = GenerationConfig(max_new_tokens=12, temperature=0.0)
    first = list(decoder.generate(embeds, greedy, set()))
    decoder.cuda_graphs = False
    try:
        assert list(decoder.generate(embeds, greedy, set())) == first
    finally:
        decoder.cuda_graphs = True


def test_both_ways_of_attending_agree(fixture_model):
    """The fused kernel and the split products compute the same attention (the GPU check times both)."""
    decoder = fixture_model.decoder
    embeds = decoder_embeds(fixture_model, 700)
    tokens = torch.randint(0, 3000, (12,), generator=torch.Generator().manual_seed(3)).tolist()
    logits = {}
    with torch.inference_mode():
        for attention in ("fused", "split"):
            _, cache = decoder.prefill(embeds)
            steps = StaticDecoding(decoder.lm, [layer.keys for layer in cache.layers],
                                   [layer.values for layer in cache.layers], len(tokens), graph=False,
                                   attention=attention)
            logits[attention] = torch.stack([steps.step(token) for token in tokens])
    assert (logits["fused"] - logits["split"]).abs().max() < 1e-5


@pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile")
def test_every_way_of_attending_agrees(fixture_model):
    """Split-KV (flash-decoding, each piece its own softmax, combined by log-sum-exp) and FlexAttention compute what
    the fused kernel does, over a cache of three pieces whose last is partly filled."""
    decoder = fixture_model.decoder
    embeds = decoder_embeds(fixture_model, 600)
    tokens = torch.randint(0, 3000, (12,), generator=torch.Generator().manual_seed(4)).tolist()
    logits = {}
    with torch.inference_mode():
        for attention in ATTENTIONS:
            _, cache = decoder.prefill(embeds)
            steps = StaticDecoding(decoder.lm, [layer.keys for layer in cache.layers],
                                   [layer.values for layer in cache.layers], len(tokens), graph=False,
                                   attention=attention)
            assert steps.capacity == 768
            logits[attention] = torch.stack([steps.step(token) for token in tokens])
    for attention in ATTENTIONS:
        assert (logits[attention] - logits["fused"]).abs().max() < 1e-5, attention
