"""Stacked frame-pair attention in the vision tower (tempo/model/vision_attention.py) gives transformers' numbers."""

from __future__ import annotations

import torch

from tempo.video.patches import normalize


def vision(model, grids, stack: bool, seed: int = 0):
    rows = torch.randint(0, 256, (sum(t * h * w for t, h, w in grids), 1536), dtype=torch.uint8,
                         generator=torch.Generator().manual_seed(seed))
    chunks = model.compressor.vision_chunks
    chunks.stack = stack
    try:
        with torch.inference_mode():
            return model.compressor.encode_vision(normalize(rows, model.geometry), grids)
    finally:
        chunks.stack = True


def same(a, b) -> bool:
    return all(torch.equal(x.embeds, y.embeds) and all(torch.equal(p, q) for p, q in zip(x.deepstack, y.deepstack))
               for x, y in zip(a, b))


def test_a_micro_batch_of_equal_segments_matches_the_chunk_by_chunk_path(fixture_model):
    grids = [(4, 8, 16)] * 3  # 12 frame pairs of 128 patches
    assert same(vision(fixture_model, grids, stack=True), vision(fixture_model, grids, stack=False))


def test_segments_of_different_sizes_take_the_chunk_by_chunk_path(fixture_model):
    grids = [(4, 8, 16), (1, 8, 8)]
    assert same(vision(fixture_model, grids, stack=True), vision(fixture_model, grids, stack=False))


def test_the_chunk_lengths_are_read_once_per_forward_pass(fixture_model, monkeypatch):
    """Every layer gets the same cu_seqlens tensor: one host read for the pass, not one per layer."""
    chunks = fixture_model.compressor.vision_chunks
    reads = []
    original = chunks.of

    def counting(cu_seqlens):
        reads.append(cu_seqlens is chunks.seen)
        return original(cu_seqlens)

    monkeypatch.setattr(chunks, "of", counting)
    vision(fixture_model, [(2, 8, 8)] * 2, stack=True)
    layers = len(fixture_model.compressor.vlm.visual.blocks)
    assert len(reads) == layers and reads.count(False) == 1


def test_the_comparison_can_fail(fixture_model):
    """Other pixels give other features: the equality above is not vacuous."""
    grids = [(2, 8, 8)]
    assert not same(vision(fixture_model, grids, stack=True, seed=1), vision(fixture_model, grids, stack=False))
