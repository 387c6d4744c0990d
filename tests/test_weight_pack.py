"""The GPU check's copy of ZeroGPU's weight path (benchmarks/gpu/weight_pack.py) on this CPU: a model's weights packed
into one file and read back through the two buffers give every tensor back bit for bit, ties kept, and a model sent as
a skeleton answers as before once they are put back."""

from __future__ import annotations

import pickle

import pytest
import torch

from benchmarks.gpu import weight_pack
from benchmarks.gpu.weight_pack import PAGE, aligned, load, module_tensors, pack, put, without_weights


class Small(torch.nn.Module):
    """A bit of everything a model holds: bf16 and float32 weights, a tied head, an integer buffer, a tensor larger
    than a buffer and sizes that are not whole pages."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(37, 24, dtype=torch.bfloat16)
        self.layers = torch.nn.ModuleList(torch.nn.Linear(24, 24, dtype=torch.bfloat16) for _ in range(3))
        self.wide = torch.nn.Linear(24, 700)  # 67,200 bytes: split over several buffers of 3 pages
        self.head = torch.nn.Linear(24, 37, bias=False, dtype=torch.bfloat16)
        self.head.weight = self.embed.weight
        self.register_buffer("positions", torch.arange(11, dtype=torch.int64))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids + self.positions[: ids.shape[-1]] % 3)
        for layer in self.layers:
            x = x + layer(x)
        return self.head(x).float().sum() + self.wide(x.float()).sum()


def bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().contiguous().reshape(-1).view(torch.uint8)


def test_every_tensor_comes_back_bit_for_bit(tmp_path, fixture_model):
    """The tiny Tempo model through buffers of 16 pages, so that small tensors share buffers and large ones span
    several; on this CPU the buffers are not pinned."""
    tensors = module_tensors(fixture_model)
    packed = pack(tensors, tmp_path / "weights.pack", buffer_bytes=16 * PAGE)
    assert any(len(read.pieces) > 1 for read in packed.reads)  # buffers shared by small tensors
    assert any(read.pieces[0].at > 0 for read in packed.reads)  # and large tensors read a buffer at a time
    assert all(read.length % PAGE == 0 and read.length <= 16 * PAGE for read in packed.reads)
    loaded, figures = load(packed, torch.device("cpu"))
    assert set(loaded) == set(tensors) and not figures["pinned"]
    for name, tensor in tensors.items():
        assert loaded[name].dtype == tensor.dtype and loaded[name].shape == tensor.shape, name
        assert torch.equal(bits(loaded[name]), bits(tensor)), name
    assert figures["gb"] == round(sum(t.numel() * t.element_size() for t in {id(t): t for t in
                                                                              tensors.values()}.values()) / 1e9, 3)


def test_the_file_is_laid_out_as_spaces_lays_it(tmp_path):
    """Small tensors by size in groups of at most a buffer, each at a page boundary; the one larger than a buffer
    last, in reads of a buffer each (67,200 bytes in buffers of 12,288: six, the last 5,760 bytes in 2 pages)."""
    model = Small()
    packed = pack(module_tensors(model), tmp_path / "weights.pack", buffer_bytes=3 * PAGE)
    assert all(entry.offset % PAGE == 0 for entry in packed.entries)
    assert packed.entries[-1].names == ("wide.weight",) and packed.entries[-1].nbytes == 67_200
    sizes = [aligned(entry.nbytes) for entry in packed.entries[:-1]]
    assert sizes == sorted(sizes)
    assert [read.length for read in packed.reads[-6:]] == [3 * PAGE] * 5 + [2 * PAGE]
    assert (tmp_path / "weights.pack").stat().st_size == packed.entries[-1].offset + aligned(67_200)
    assert [entry.names for entry in packed.entries if len(entry.names) > 1] == [("embed.weight", "head.weight")]


def test_a_skeleton_answers_as_before_with_its_weights_put_back(tmp_path):
    """The model pickled without its weights (as the cold call sends it), then given the loaded ones: the same
    output, the tie kept, and the sender's own weights untouched."""
    model = Small()
    ids = torch.tensor([[1, 5, 9, 36]])
    expected = model(ids)
    packed = pack(module_tensors(model), tmp_path / "weights.pack", buffer_bytes=3 * PAGE)
    with without_weights(model):
        skeleton = pickle.loads(pickle.dumps(model))
    assert skeleton.embed.weight.device.type == "meta" and len(pickle.dumps(skeleton)) < 20_000
    assert model.wide.weight.device.type == "cpu" and torch.equal(model(ids), expected)
    loaded, _ = load(packed, torch.device("cpu"))
    put(skeleton, loaded)
    assert skeleton.head.weight is skeleton.embed.weight
    assert torch.equal(skeleton(ids), expected)


def test_a_short_file_is_an_error_not_zeros(tmp_path):
    model = Small()
    packed = pack(module_tensors(model), tmp_path / "weights.pack", buffer_bytes=3 * PAGE)
    with open(packed.path, "r+b") as file:
        file.truncate(packed.reads[-1].offset)
    with pytest.raises(EOFError, match="bytes short"):
        load(packed, torch.device("cpu"))
    assert weight_pack.BUFFERS == 2 and weight_pack.BUFFER_BYTES == 128 * 2**20  # spaces 0.51.3's
