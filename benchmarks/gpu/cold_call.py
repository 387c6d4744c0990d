"""The GPU check's cold call: what a ZeroGPU visitor's first request costs in a worker that has never run the model.

ZeroGPU's `spaces` packs the model's weights into one file when the Space starts, and a fresh worker, forked with the
model's structure, reads that file onto its GPU slice through two pinned buffers, then runs the request on the
pixels it was handed. Here the weights are packed the same way (benchmarks/gpu/weight_pack.py, on a disk:
$TEMPO_PACK_DIR or the temporary directory), a fresh process is spawned and gets the model without its weights (a
skeleton on the meta device, as a fork would hold it) and the 1-hour video's pixels; it then times each part: the
CUDA context, receiving, the weights from the file onto the device, the compiled decoding package loaded (when there
is one), a warm-up (the memory the request will need reserved, then the first two micro-batches answered with two
tokens, so that the kernels a request uses are loaded), and the request from pixels to the last answer token, then
the same request once more, warm. Python's own start and imports are timed apart: a ZeroGPU worker is forked from a
process that has them already.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.multiprocessing as mp

from benchmarks.gpu import runs, weight_pack
from tempo.model import TempoModel
from tempo.settings import setting_named

log = logging.getLogger("gpu-check")
WAIT_S = 600.0  # the longest the worker may take to answer before it is stopped


@dataclass(frozen=True)
class Call:
    """What the worker gets: the model without its weights, where they are packed, the video, and how to answer."""

    model: TempoModel
    pack: weight_pack.Pack
    video: runs.Video
    device: str
    answer_tokens: int
    package: str | None  # a compiled decoding package to load (`tempo.model.compiled_decoding`), or None
    reserve_bytes: int  # device memory the request needs beyond the weights, reserved at warm-up


class Laps:
    """Seconds since the previous lap (or since made), the device's work included."""

    def __init__(self, device: torch.device):
        self.device, self.last = device, time.perf_counter()

    def __call__(self) -> float:
        runs.synchronize(self.device)
        now = time.perf_counter()
        seconds, self.last = now - self.last, now
        return seconds


def worker(connection) -> None:
    """The fresh process: ready, then one `Call`, answered with its figures (or its error)."""
    from torch._inductor.cpu_vec_isa import valid_vec_isa_list

    valid_vec_isa_list()  # compiled once and cached before any call, as `spaces`' AoT helpers do in the server

    logging.basicConfig(level=logging.INFO, format="%(asctime)s cold-call %(message)s", datefmt="%H:%M:%S")
    connection.send("ready")
    try:
        connection.send(run_call(connection))
    except Exception as exc:  # the parent records it as the part's error
        connection.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        connection.close()


def run_call(connection) -> dict:
    """Every part of the cold call, timed one after another."""
    from tempo.model.compiled_decoding import CompiledLayers
    from tempo.model.vision_attention import stack_chunks

    connection.poll(None)  # the clock starts when the call arrives
    lap = Laps(torch.device("cpu"))
    figures: dict = {}
    call: Call = connection.recv()
    figures["receive_s"] = lap()
    device = torch.device(call.device)
    if device.type == "cuda":
        torch.zeros(1, device=device)  # the CUDA context a new process makes
    lap.device = device
    figures["device_init_s"] = lap()
    tensors, figures["weights_read"] = weight_pack.load(call.pack, device)
    model = call.model
    weight_pack.put(model, tensors)
    model.to(device)  # tensors held outside parameters and buffers, if any
    model.compressor.vision_chunks = stack_chunks(model.compressor.vlm.visual)
    figures["weights_to_device_s"] = lap()
    if call.package is not None:
        model.decoder.compiled = CompiledLayers(call.package, model.decoder.lm)
    figures["compiled_ready_s"] = lap()
    figures["warm_up"] = warm_up(model, call.video, call.reserve_bytes)
    figures["warm_up_s"] = lap()
    config = runs.answer_config(call.answer_tokens)
    first = runs.request(model, call.video, runs.QUESTION, config)
    figures["first_request"] = first.figures()
    warm = runs.request(model, call.video, runs.QUESTION, config)
    figures["warm_request"] = warm.figures()
    figures["token_ids"] = first.finished.token_ids
    figures["same_tokens_warm"] = warm.finished.token_ids == first.finished.token_ids
    return figures


def warm_up(model: TempoModel, video: runs.Video, reserve_bytes: int) -> dict:
    """The memory a request needs reserved in one piece (the caching allocator keeps it), then `video`'s first two
    micro-batches (one segment, then a full one) answered with two tokens: a request's kernels loaded before it."""
    if model.device.type == "cuda" and reserve_bytes > 0:
        torch.empty(reserve_bytes, dtype=torch.uint8, device=model.device)
    size = setting_named("micro_batch").default(place=model.device.type)
    assert isinstance(size, int)  # the table's default for a whole-number setting
    few = replace(video, segments=video.segments[:1 + size])
    run = runs.request(model, few, runs.QUESTION, runs.answer_config(2))
    return {"segments": len(few.segments), "reserved_gb": round(reserve_bytes / 1e9, 3), "request_s":
            round(run.total_s, 4)}


def pack_directory(nbytes: int) -> Path:
    """Where the weights are packed: $TEMPO_PACK_DIR, else the temporary directory when its disk holds them (ZeroGPU
    packs onto a disk), else the scratch that does."""
    chosen = os.environ.get("TEMPO_PACK_DIR") or tempfile.gettempdir()
    if not os.environ.get("TEMPO_PACK_DIR") and shutil.disk_usage(chosen).free < 1.2 * nbytes:
        chosen = "/dev/shm"
    return Path(tempfile.mkdtemp(prefix="tempo-pack-", dir=chosen))


def file_system(path: Path) -> str:
    """The file system type of the mount that holds `path` (from /proc/mounts), or "unknown"."""
    mounts = []
    with contextlib.suppress(OSError):
        mounts = [line.split()[1:3] for line in Path("/proc/mounts").read_text().splitlines()]
    held = [(len(point), kind) for point, kind in mounts if str(path.resolve()).startswith(point.rstrip("/") + "/")]
    return max(held)[1] if held else "unknown"


@contextlib.contextmanager
def on_host(model: TempoModel) -> Iterator[TempoModel]:
    """`model` moved to host memory for a while (the device then holds none of it, as before a ZeroGPU call), and
    back onto its device after. Meanwhile the vision tower's layers have their own forward: the stacked attention is
    a method bound into each layer, which pickle cannot carry (the worker binds it again)."""
    from tempo.model.vision_attention import stack_chunks

    device = model.device
    model.to("cpu")
    if device.type == "cuda":
        torch.cuda.empty_cache()
    for module in model.compressor.vlm.visual.modules():
        if "chunked_forward" in vars(module):
            del module.forward, module.chunked_forward, module.chunk_lengths
    try:
        yield model
    finally:
        model.to(device)
        model.compressor.vision_chunks = stack_chunks(model.compressor.vlm.visual)


def cold_call(model: TempoModel, video: runs.Video, answer_tokens: int, package: str | None,
              reserve_bytes: int = 0) -> dict:
    """The cold call's figures; `cold_call_s` is everything from the handover to the last token, as a ZeroGPU
    worker spends it (the decoder's compiled layers, which point at this process's weights, are let go). Packing the
    weights, which ZeroGPU does once at the Space's start, is timed apart (`pack_s`)."""
    model.decoder.compiled = None
    device = str(model.device)
    with on_host(model):
        directory = pack_directory(sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()]))
        try:
            started = time.perf_counter()
            packed = weight_pack.pack(weight_pack.module_tensors(model), directory / "weights.pack")
            figures: dict = {"pack_s": round(time.perf_counter() - started, 2),
                             "pack_gb": round(packed.nbytes / 1e9, 3), "pack_file_system": file_system(directory)}
            with weight_pack.without_weights(model):
                figures.update(in_worker(Call(model, packed, video, device, answer_tokens, package, reserve_bytes)))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
    parts = ("receive_s", "device_init_s", "weights_to_device_s", "compiled_ready_s", "warm_up_s")
    for name in parts:
        figures[name] = round(figures[name], 4)
    figures["cold_call_s"] = round(sum(figures[name] for name in parts) + figures["first_request"]["total_s"], 4)
    figures["cold_minus_warm_s"] = round(figures["cold_call_s"] - figures["warm_request"]["total_s"], 4)
    return figures


def in_worker(call: Call) -> dict:
    """`call` answered by a fresh process: its figures, with how long it took to start and to answer."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):  # each shared tensor travels as a file descriptor
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    context = mp.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=worker, args=(theirs,), daemon=True)
    started = time.perf_counter()
    process.start()
    theirs.close()
    try:
        if ours.recv() != "ready":
            raise RuntimeError("the cold-call worker did not start")
        figures: dict = {"process_start_s": round(time.perf_counter() - started, 2)}
        handed = time.perf_counter()
        ours.send(call)
        if not ours.poll(WAIT_S):
            raise TimeoutError(f"the cold-call worker gave no answer in {WAIT_S:.0f} s")
        answer = ours.recv()
        figures["handover_to_answer_s"] = round(time.perf_counter() - handed, 3)
    finally:
        process.join(30)
        if process.is_alive():
            process.kill()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if "error" in answer:
        raise RuntimeError(f"cold call failed in the worker: {answer['error']}")
    return {**figures, **answer}
