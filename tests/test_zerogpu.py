"""The Space on ZeroGPU, emulated on this CPU: the app runs with the real `spaces` package's GPU path (a forked
worker, arguments and results pickled, a memory of its own; tests/zerogpu_app.py) against a device API served here,
which records every GPU request. One visitor asks about a video, asks again with another budget, compares,
sweeps and clicks a segment: the video is compressed once, in the worker, and kept by the server."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from appserver import ROOT, free_port
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

import tempo
from demo import device
from demo.device import COST
from tempo.engine import Job
from tempo.events import Compression
from tempo.timing import Timer

EXAMPLE = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))[0]
VIDEO = ROOT / "examples" / EXAMPLE["video"]
SETTINGS = dict(max_new_tokens=8)


class DeviceAPI(BaseHTTPRequestHandler):
    """ZeroGPU's device API as `spaces` calls it: a GPU for every schedule (the worker kept warm), and a record of
    each request's reserved seconds and of the processes allowed on the GPU."""

    schedules: list[int] = []
    allowed: list[int] = []

    def do_POST(self):
        url = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        body = b""
        if url.path == "/schedule":
            self.schedules.append(int(query["durationSeconds"]))
            body = json.dumps({"idle": True, "nvidiaIndex": 0, "nvidiaUUID": "GPU-emulated",
                               "allowToken": f"token-{len(self.schedules)}"}).encode()
        elif url.path == "/allow":
            self.allowed.append(int(query["pid"]))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def device_api():
    server = ThreadingHTTPServer(("127.0.0.1", 0), DeviceAPI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture(scope="module")
def space(device_api, tmp_path_factory):
    """The emulated Space: its URL, its process and its log."""
    log = tmp_path_factory.mktemp("zerogpu") / "server.log"
    env = {**os.environ, "SPACES_ZERO_GPU": "true", "SPACES_ZERO_DEVICE_API_URL": device_api,
           "PYTHONPATH": str(ROOT), "TEMPO_MAX_QUESTION_CHARS": "30000"}
    env.pop("TEMPO_MODEL", None)
    with log.open("w") as stderr:
        process = subprocess.Popen([sys.executable, str(ROOT / "tests" / "zerogpu_app.py"), str(free_port())],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=ROOT,
                                   env=env)
        try:
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:"), log.read_text()[-3000:]
            yield url, process, log
        finally:
            process.stdin.close()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def compressions(log: Path) -> int:
    return log.read_text().count("compressed ")


@pytest.mark.slow
def test_one_visitor_session_compresses_once_and_asks_the_gpu_only_for_model_work(space):
    url, process, log = space
    client = Client(url, verbose=False)
    video, question = handle_file(str(VIDEO)), EXAMPLE["question"]
    reserved = DeviceAPI.schedules

    first = client.predict(video, question, **SETTINGS, api_name="/answer")
    assert len(reserved) == 1
    assert DeviceAPI.allowed and process.pid not in DeviceAPI.allowed  # the model ran in a forked worker

    again = client.predict(video, question, budget=512, **SETTINGS, api_name="/answer")
    compare = client.predict(video, question, other_strategy="uniform", other_budget=1024, other_k_min=4,
                             other_truncation="head", **SETTINGS, api_name="/compare")
    sweep = client.predict(video, question, **SETTINGS, api_name="/sweep")
    results = {"ask": first, "again": again, "compared": compare["first"], "the other": compare["second"],
               **{f"sweep {r['budget']}": r for r in sweep["results"]}}
    assert [name for name, result in results.items() if "compress" in result["timings"]] == ["ask"]
    assert len(reserved) == 4 and compressions(log) == 1  # one trip each; the video compressed once in all
    assert reserved[1] < reserved[0] and reserved[2] < reserved[0]  # a cache hit reserves less than a first ask
    assert again["tokens_used"] <= 512 and len(sweep["results"]) == 6
    assert [s["relevance"] for s in compare["first"]["segments"]] == [s["relevance"] for s in first["segments"]]

    facts, frames = client.predict(video, question, segment=30, **SETTINGS, api_name="/segment")
    assert len(reserved) == 4  # a segment click needs no GPU
    assert facts["relevance"] == pytest.approx(first["segments"][30]["relevance"]) and len(frames) == 8
    assert all(seconds <= COST.cap for seconds in reserved)

    # The same answer the library gives in one process.
    model = tempo.from_pretrained(device="cpu")
    config = tempo.RunConfig(allocation=tempo.AllocationConfig(budget=model.spec.visual_token_budget),
                             generation=tempo.GenerationConfig(max_new_tokens=8))
    local = tempo.answer(model, VIDEO, question, config)
    assert first["answer"] == local.answer
    assert [s["tokens"] for s in first["segments"]] == [s.tokens for s in local.segments]
    assert [s["relevance"] for s in first["segments"]] == pytest.approx([s.relevance for s in local.segments],
                                                                        abs=1e-6)


@pytest.mark.slow
def test_refusals_arrive_with_their_own_text(space):
    url, _, log = space
    client = Client(url, verbose=False)
    video, question = handle_file(str(VIDEO)), EXAMPLE["question"]
    before = len(DeviceAPI.schedules)
    with pytest.raises(AppError, match=r"^Temperature 9 is greater than maximum 2"):
        client.predict(video, question, temperature=9, api_name="/answer")
    with pytest.raises(AppError, match="cannot keep even one token for each of the 38 segments"):
        client.predict(video, question, budget=10, api_name="/answer")
    assert len(DeviceAPI.schedules) == before  # refused before a GPU was asked for
    # Refused inside the worker, by the decoder: a question (8,400 tokens) that leaves the video no room in its
    # context. Two segments, so that the compressor reads it quickly.
    with pytest.raises(AppError, match=r"leaves no room for the video in the decoder's 8192-token context"):
        client.predict(video, "Why? " * 4200, max_frames=16, max_new_tokens=2, api_name="/answer")
    assert len(DeviceAPI.schedules) == before + 1


@pytest.mark.parametrize("space_id, zero_gpu, tempo_model, served", [
    (None, False, None, None),  # anywhere else: the embedded Tempo-Tiny
    ("someone/tempo", True, None, "Vision-CAIR/Tempo-6B"),  # a ZeroGPU Space: the released model
    ("someone/tempo", False, None, None),  # a CPU Space: Tempo-Tiny, which runs there
    ("someone/tempo", True, "/models/tempo", "/models/tempo"),  # the variable chooses
])
def test_which_model_a_space_serves(monkeypatch, space_id, zero_gpu, tempo_model, served):
    from demo import launch

    for name, value in (("SPACE_ID", space_id), ("TEMPO_MODEL", tempo_model)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(launch.SpacesConfig, "zero_gpu", zero_gpu)
    monkeypatch.setattr(launch.torch.cuda, "is_available", lambda: False)
    loaded = []
    monkeypatch.setattr(launch, "from_pretrained", lambda name, base=None, int8=False: loaded.append(name))
    launch.load_model()
    assert loaded == [served]


def test_off_zerogpu_the_model_runs_in_this_process(fixture_model, monkeypatch):
    monkeypatch.setattr(device.SpacesConfig, "zero_gpu", False)
    on = device.on_device(fixture_model)
    assert isinstance(on.accelerate, functools.partial) and on.accelerate.func is device.on_accelerator
    assert not on.remote  # the decoding stream goes to the model as it is read
    assert on.concurrency == 1  # one model on one device: one request at a time


def test_on_zerogpu_one_function_asks_for_the_gpu_time_its_job_needs(fixture_model, monkeypatch):
    decorated = []

    def gpu(duration=None, size=None):
        def wrap(fn):
            decorated.append((fn.func, duration, size))
            return fn
        return wrap

    monkeypatch.setattr(device.spaces, "GPU", gpu)
    monkeypatch.setattr(device.SpacesConfig, "zero_gpu", True)
    on_zerogpu = device.on_device(fixture_model)
    assert on_zerogpu.remote and on_zerogpu.concurrency == device.ZEROGPU_CONCURRENCY > 1  # a GPU slice per call
    # one entry for every kind of request, on ZeroGPU's default size
    assert decorated == [(device.on_accelerator, device.gpu_seconds, "large")]

    def job(segments: int, answers: int, cached: bool, max_new_tokens: int = 512) -> Job:
        config = tempo.RunConfig(generation=tempo.GenerationConfig(max_new_tokens=max_new_tokens))
        probed = tempo.VideoProbed("v.mp4", 60.0, 30.0, 1800, 640, 360, 8 * segments, 2.0, segments, "pyav")
        return Job("q", probed, None, config.micro_batch, (config,) * answers, Timer(),
                   compression=Compression("q", probed, None) if cached else None)

    seconds = device.gpu_seconds
    assert seconds(job(128, 1, False)) > seconds(job(16, 1, False)) > seconds(job(16, 1, True))  # what it compresses
    assert seconds(job(16, 2, True)) > seconds(job(16, 1, True))  # how many answers
    assert seconds(job(16, 1, True, 64)) < seconds(job(16, 1, True))  # and how long they may be
    assert seconds(job(128, 6, False, 2048)) == device.COST.cap  # never more than the cap
