"""The GPU check's cold call: what a ZeroGPU visitor's first request costs in a worker that has never run the model.

ZeroGPU keeps the model's weights in the serving process's host memory and hands them, with the request's pixels,
to a fresh worker, which moves them onto its GPU slice and runs the request. Here a fresh process is spawned and
gets the loaded model from this one (its tensors in shared host memory, pickled as ZeroGPU pickles them) and the
1-hour video's pixels; it then times each part separately: the CUDA context, receiving, the weights onto the device,
the compiled decoding package loaded (when there is one), and the request from pixels to the last answer token,
then the same request once more, warm. Python's own start and imports are timed apart: a ZeroGPU worker is forked
from a process that has them already.
"""

from __future__ import annotations

import contextlib
import logging
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.multiprocessing as mp

from benchmarks.gpu import runs
from tempo.model import TempoModel

log = logging.getLogger("gpu-check")
WAIT_S = 600.0  # the longest the worker may take to answer before it is stopped


@dataclass(frozen=True)
class Call:
    """What the worker gets: the model on the host, the video, and how to answer."""

    model: TempoModel
    video: runs.Video
    device: str
    answer_tokens: int
    package: str | None  # a compiled decoding package to load (`tempo.model.compiled_decoding`), or None


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
    model = call.model.to(device)
    model.compressor.vision_chunks = stack_chunks(model.compressor.vlm.visual)
    figures["weights_to_device_s"] = lap()
    if call.package is not None:
        model.decoder.compiled = CompiledLayers(call.package, model.decoder.lm)
    figures["compiled_ready_s"] = lap()
    config = runs.answer_config(call.answer_tokens)
    first = runs.request(model, call.video, runs.QUESTION, config)
    figures["first_request"] = first.figures()
    warm = runs.request(model, call.video, runs.QUESTION, config)
    figures["warm_request"] = warm.figures()
    figures["token_ids"] = first.finished.token_ids
    figures["same_tokens_warm"] = warm.finished.token_ids == first.finished.token_ids
    return figures


@contextlib.contextmanager
def on_host(model: TempoModel) -> Iterator[TempoModel]:
    """`model` moved to shared host memory for a while (the device then holds none of it, as before a ZeroGPU
    call), and back onto its device after. Meanwhile the vision tower's layers have their own forward: the stacked
    attention is a method bound into each layer, which pickle cannot carry (the worker binds it again)."""
    from tempo.model.vision_attention import stack_chunks

    device = model.device
    model.to("cpu").share_memory()
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


def cold_call(model: TempoModel, video: runs.Video, answer_tokens: int, package: str | None) -> dict:
    """The cold call's figures; `cold_call_s` is everything from the handover to the last token, as a ZeroGPU
    worker spends it (the decoder's compiled layers, which point at this process's weights, are let go)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with contextlib.suppress(ValueError, OSError):  # each shared tensor travels as a file descriptor
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    model.decoder.compiled = None
    device = str(model.device)
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
        with on_host(model):
            handed = time.perf_counter()
            ours.send(Call(model, video, device, answer_tokens, package))
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
    figures.update(answer)
    parts = ("receive_s", "device_init_s", "weights_to_device_s", "compiled_ready_s")
    for name in parts:
        figures[name] = round(figures[name], 4)
    figures["cold_call_s"] = round(sum(figures[name] for name in parts) + figures["first_request"]["total_s"], 4)
    figures["cold_minus_warm_s"] = round(figures["cold_call_s"] - figures["warm_request"]["total_s"], 4)
    return figures
