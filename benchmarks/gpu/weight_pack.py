"""Weights moved into a fresh worker as ZeroGPU moves them (`spaces` 0.51.3, `spaces/zero/torch/packing.py`): at start
every tensor is written once into one file, each at a page boundary, the small ones grouped so that a group fills at
most one buffer and the large ones read a buffer at a time; in the worker the file is read through two buffers of
128 MiB (pinned where there is CUDA), one filling from the file on a thread while the other is copied onto the device
on a side stream, with `O_DIRECT` where the file system and the buffer allow it, as `spaces` reads.

Written for the GPU check's cold call (benchmarks/gpu/cold_call.py); nothing here is `spaces`' code.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from queue import Queue

import torch

PAGE = 4096
BUFFER_BYTES = 128 * 2**20  # as `spaces`: two buffers of 128 MiB
BUFFERS = 2


@dataclass(frozen=True)
class Entry:
    """One tensor in the file: every name it goes by in the module (tied weights share one entry), its place."""

    names: tuple[str, ...]
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int  # in the file, at a page boundary
    nbytes: int


@dataclass(frozen=True)
class Piece:
    """`length` bytes at `start` in a buffer, for entry `entry` at byte `at` of it."""

    entry: int
    at: int
    start: int
    length: int


@dataclass(frozen=True)
class Read:
    """One buffer's worth of the file: `length` bytes (a whole number of pages) from `offset`, and what they hold."""

    offset: int
    length: int
    pieces: tuple[Piece, ...]


@dataclass(frozen=True)
class Pack:
    """The file and how to read it back; it travels to the worker (pickled), the tensors do not."""

    path: str
    entries: tuple[Entry, ...]
    reads: tuple[Read, ...]
    buffer_bytes: int

    @property
    def nbytes(self) -> int:
        return sum(entry.nbytes for entry in self.entries)


def aligned(size: int) -> int:
    return size + (-size % PAGE)


def module_tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer by its qualified name, tied ones under each of their names."""
    named: dict[str, torch.Tensor] = dict(module.named_parameters(remove_duplicate=False))
    named.update(module.named_buffers(remove_duplicate=False))
    return named


def layout(tensors: dict[str, torch.Tensor], buffer_bytes: int) -> tuple[list[torch.Tensor], Pack]:
    """Where each distinct tensor goes (small ones by size, grouped into buffers; those larger than a buffer last,
    split across buffers), as `spaces` lays out its file; the tensors in file order."""
    names: dict[int, list[str]] = {}
    distinct: dict[int, torch.Tensor] = {}
    for name, tensor in tensors.items():
        names.setdefault(id(tensor), []).append(name)
        distinct[id(tensor)] = tensor
    by_size = sorted(distinct.values(), key=lambda t: aligned(t.numel() * t.element_size()))
    small = [t for t in by_size if aligned(t.numel() * t.element_size()) <= buffer_bytes]
    ordered = small + [t for t in by_size if aligned(t.numel() * t.element_size()) > buffer_bytes]
    entries, offset = [], 0
    for tensor in ordered:
        nbytes = tensor.numel() * tensor.element_size()
        entries.append(Entry(tuple(names[id(tensor)]), tensor.dtype, tuple(tensor.shape), offset, nbytes))
        offset += aligned(nbytes)
    reads: list[Read] = []
    group: list[int] = []
    for index, entry in enumerate(entries[:len(small)]):
        if group and entry.offset + aligned(entry.nbytes) - entries[group[0]].offset > buffer_bytes:
            reads.append(_group_read(entries, group))
            group = []
        group.append(index)
    if group:
        reads.append(_group_read(entries, group))
    for index in range(len(small), len(entries)):
        entry = entries[index]
        for at in range(0, entry.nbytes, buffer_bytes):
            length = min(buffer_bytes, entry.nbytes - at)
            reads.append(Read(entry.offset + at, aligned(length), (Piece(index, at, 0, length),)))
    return ordered, Pack("", tuple(entries), tuple(reads), buffer_bytes)


def _group_read(entries: list[Entry], group: list[int]) -> Read:
    first, last = entries[group[0]], entries[group[-1]]
    pieces = tuple(Piece(i, 0, entries[i].offset - first.offset, entries[i].nbytes) for i in group)
    return Read(first.offset, last.offset + aligned(last.nbytes) - first.offset, pieces)


def pack(tensors: dict[str, torch.Tensor], path: str | os.PathLike, buffer_bytes: int = BUFFER_BYTES) -> Pack:
    """Write `tensors` (on the host) into the file at `path`; the file is synced and dropped from the page cache, so
    that a worker reads it from the disk as a ZeroGPU worker does."""
    ordered, laid = layout(tensors, buffer_bytes)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    try:
        for tensor, entry in zip(ordered, laid.entries):
            data = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().data
            written = 0
            while written < entry.nbytes:
                written += os.write(fd, data[written:])
            os.write(fd, bytes(aligned(entry.nbytes) - entry.nbytes))
        os.fsync(fd)
        with contextlib.suppress(OSError, AttributeError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return Pack(str(path), laid.entries, laid.reads, buffer_bytes)


@contextlib.contextmanager
def opened(path: str, probe: memoryview | None) -> Iterator[tuple[int, bool]]:
    """The file for reading, with `O_DIRECT` when a page-aligned `probe` buffer is given and a first page reads into
    it that way (some file systems open such a file but refuse the read); whether it did."""
    fd = -1
    if probe is not None and hasattr(os, "O_DIRECT"):
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
            try:
                os.preadv(fd, [probe[:PAGE]], 0)
            except OSError:
                os.close(fd)
                fd = -1
    used = fd >= 0
    if not used:
        fd = os.open(path, os.O_RDONLY)
    try:
        yield fd, used
    finally:
        os.close(fd)


def fill(fd: int, view: memoryview, offset: int, length: int) -> None:
    done = 0
    while done < length:
        got = os.preadv(fd, [view[done:length]], offset + done)
        if got == 0:
            raise EOFError(f"the pack ends at {offset + done}, {length - done} bytes short")
        done += got


class Buffers:
    """Two host buffers of `size` bytes at page boundaries: pinned where there is CUDA, else anonymous memory."""

    def __init__(self, size: int, pinned: bool):
        self.maps = [] if pinned else [mmap.mmap(-1, size) for _ in range(BUFFERS)]
        if pinned:
            self.tensors = [torch.empty(size, dtype=torch.uint8, pin_memory=True) for _ in range(BUFFERS)]
        else:
            self.tensors = [torch.frombuffer(m, dtype=torch.uint8) for m in self.maps]
        self.views = [t.numpy().data for t in self.tensors]
        self.page_aligned = all(t.data_ptr() % PAGE == 0 for t in self.tensors)


def load(pack: Pack, device: torch.device, direct: bool = True) -> tuple[dict[str, torch.Tensor], dict]:
    """Every tensor of `pack` on `device` by each of its names (tied ones one tensor), through the double buffers;
    figures: seconds, GB/s, whether the file was read with `O_DIRECT` and the buffers pinned."""
    started = time.perf_counter()
    cuda = device.type == "cuda"
    buffers = Buffers(pack.buffer_bytes, pinned=cuda)
    targets = [torch.empty(entry.nbytes, dtype=torch.uint8, device=device) for entry in pack.entries]
    free: Queue[int | None] = Queue()
    full: Queue[tuple[int, Read] | None] = Queue()
    for index in range(BUFFERS):
        free.put(index)
    failed: list[BaseException] = []
    stream = torch.cuda.Stream(device) if cuda else None
    with opened(pack.path, buffers.views[0] if direct and buffers.page_aligned else None) as (fd, used):
        def reader() -> None:
            try:
                for read in pack.reads:
                    index = free.get()
                    if index is None:
                        return
                    fill(fd, buffers.views[index], read.offset, read.length)
                    full.put((index, read))
            except BaseException as exc:  # raised again in the caller's thread
                failed.append(exc)
            finally:
                full.put(None)

        thread = threading.Thread(target=reader, name="pack-reader", daemon=True)
        thread.start()
        try:
            copy_buffers(buffers, targets, full, free, stream)
        finally:
            free.put(None)
            thread.join()
    if failed:
        raise failed[0]
    if stream is not None:
        torch.cuda.current_stream(device).wait_stream(stream)
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    tensors: dict[str, torch.Tensor] = {}
    for entry, target in zip(pack.entries, targets):
        tensor = target.view(entry.dtype).view(entry.shape)
        tensors.update(dict.fromkeys(entry.names, tensor))
    return tensors, {"seconds": round(seconds, 4), "gb": round(pack.nbytes / 1e9, 3),
                     "gb_s": round(pack.nbytes / 1e9 / seconds, 2), "direct_io": used, "pinned": cuda,
                     "buffer_mb": pack.buffer_bytes / 2**20, "reads": len(pack.reads)}


def copy_buffers(buffers: Buffers, targets: list[torch.Tensor], full: Queue, free: Queue,
                 stream: torch.cuda.Stream | None) -> None:
    """Each filled buffer's pieces into their tensors (on `stream`, where there is one), the buffer handed back for
    the next read once its copies are done: the file is read into one buffer while the other is being copied."""
    while (item := full.get()) is not None:
        index, read = item
        source = buffers.tensors[index]
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            for piece in read.pieces:
                targets[piece.entry][piece.at:piece.at + piece.length].copy_(
                    source[piece.start:piece.start + piece.length], non_blocking=stream is not None)
        if stream is not None:
            stream.synchronize()
        free.put(index)


def put(module: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """`module`'s parameters and buffers replaced by `tensors`, by name (tied names get one parameter)."""
    made: dict[int, torch.Tensor] = {}
    for name, tensor in tensors.items():
        owner_name, _, leaf = name.rpartition(".")
        owner = module.get_submodule(owner_name)
        if leaf in owner._parameters:
            if id(tensor) not in made:
                made[id(tensor)] = torch.nn.Parameter(tensor, requires_grad=False)
            owner._parameters[leaf] = made[id(tensor)]  # type: ignore[assignment]
        else:
            owner._buffers[leaf] = tensor


@contextlib.contextmanager
def without_weights(module: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """`module` with every parameter and buffer on the meta device for a while (ties kept), so that it pickles as a
    skeleton; its own tensors back after."""
    originals = module_tensors(module)
    meta = {id(t): torch.empty(t.shape, dtype=t.dtype, device="meta") for t in originals.values()}
    put(module, {name: meta[id(t)] for name, t in originals.items()})
    try:
        yield module
    finally:
        restore(module, originals)


def restore(module: torch.nn.Module, originals: dict[str, torch.Tensor]) -> None:
    for name, tensor in originals.items():
        owner_name, _, leaf = name.rpartition(".")
        owner = module.get_submodule(owner_name)
        if leaf in owner._parameters:
            owner._parameters[leaf] = tensor  # type: ignore[assignment]
        else:
            owner._buffers[leaf] = tensor
