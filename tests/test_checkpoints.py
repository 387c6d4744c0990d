"""Tempo-6B as the hub serves it, on the tiny fixture model: sharded bf16 checkpoints and bases, a hub cache used
offline, HTTP range reads against real loopback servers, and the warning a big model gets on a CPU."""

from __future__ import annotations

import http.server
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import tracemalloc
from functools import partial
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import tempo
from tempo.errors import ModelError
from tempo.model import checkpoint_files, relevance_direction
from tests.conftest import ROOT

BASE = "base/tiny-qwen3-vl"
QUESTION = "How many bikes pass the camera?"
YES, NO = 300, 294  # "Yes" and "No" in the fixtures' tokenizer


def shard(tensors: dict[str, torch.Tensor], directory: Path, shards: int) -> None:
    """Save `tensors` the way big releases are stored: several files and a model.safetensors.index.json."""
    directory.mkdir(parents=True, exist_ok=True)
    names = sorted(tensors)
    weight_map, total = {}, 0
    for number in range(shards):
        part = {name: tensors[name].contiguous() for name in names[number::shards]}
        file = f"model-{number + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, directory / file, metadata={"format": "pt"})
        weight_map |= dict.fromkeys(part, file)
        total += sum(t.numel() * t.element_size() for t in part.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))


def bf16_release(fixtures: Path, target: Path) -> Path:
    """The fixture checkpoint stored like Tempo-6B: bf16, three shards, torch_dtype in its config."""
    tensors = {name: tensor.to(torch.bfloat16) for name, tensor in load_file(fixtures / "tempo" /
                                                                             "model.safetensors").items()}
    shard(tensors, target, 3)
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "special_tokens_map.json"):
        if (fixtures / "tempo" / name).is_file():
            shutil.copy(fixtures / "tempo" / name, target / name)
    config = json.loads((fixtures / "tempo" / "config.json").read_text()) | {"torch_dtype": "bfloat16"}
    (target / "config.json").write_text(json.dumps(config, indent=2))
    return target


def sharded_base(fixtures: Path, target: Path, tied: bool) -> Path:
    """The fixture base stored in two shards; tied: no LM head of its own, the embedding table serves."""
    shutil.copytree(fixtures / BASE, target, ignore=shutil.ignore_patterns("model.safetensors"))
    tensors = load_file(fixtures / BASE / "model.safetensors")
    if tied:
        del tensors["lm_head.weight"]
        config = json.loads((target / "config.json").read_text())
        config["tie_word_embeddings"] = True
        config.get("text_config", {})["tie_word_embeddings"] = True
        (target / "config.json").write_text(json.dumps(config, indent=2))
    shard(tensors, target, 2)
    return target


def compressed(model: tempo.TempoModel, fixtures: Path) -> tuple[torch.Tensor, list[float], tempo.Finished]:
    from tempo import engine

    config = tempo.RunConfig(allocation=tempo.AllocationConfig(budget=64),
                             generation=tempo.GenerationConfig(max_new_tokens=8))
    video = fixtures / "videos" / "bikes.mp4"
    result = engine.compress(model, video, QUESTION, config, tempo.VideoCache())
    return torch.stack(result.memories), result.relevance, engine.reanswer(model, result, config)


def test_a_sharded_bf16_checkpoint_loads_like_the_single_file_float32_one(fixtures, fixture_model, tmp_path):
    release = bf16_release(fixtures, tmp_path / "Tempo-6B")
    model = tempo.from_pretrained(release, base=fixtures / BASE, device="cpu")
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # bf16 weights come up in float32 on a CPU
    # Exactly the float32 model with its weights rounded to bf16 ...
    rounded = tempo.from_pretrained(fixtures / "tempo", base=fixtures / BASE, device="cpu")
    with torch.no_grad():
        for parameter in rounded.parameters():
            parameter.copy_(parameter.to(torch.bfloat16).float())
    memories, relevance, answer = compressed(model, fixtures)
    expected_memories, expected_relevance, expected_answer = compressed(rounded, fixtures)
    assert torch.equal(memories, expected_memories) and relevance == expected_relevance
    assert answer.token_ids == expected_answer.token_ids
    # ... and within bf16's precision of the float32 one.
    full_memories, full_relevance, _ = compressed(fixture_model, fixtures)
    assert torch.allclose(memories, full_memories, atol=0.05, rtol=0.02)
    assert max(abs(a - b) for a, b in zip(relevance, full_relevance)) < 0.01


@pytest.mark.parametrize("tied", [False, True], ids=["untied-head", "tied-head"])
def test_a_sharded_base_gives_the_relevance_direction(fixtures, tmp_path, tied, monkeypatch):
    monkeypatch.setenv("TEMPO_CACHE", str(tmp_path / "cache"))
    base = sharded_base(fixtures, tmp_path / "Qwen3-VL-2B-Instruct-tiny-qwen3-vl", tied)
    model = tempo.from_pretrained(fixtures / "tempo", base=base, device="cpu")
    with safe_open(fixtures / BASE / "model.safetensors", "pt") as f:
        table = f.get_tensor("model.language_model.embed_tokens.weight" if tied else "lm_head.weight")
    assert torch.equal(model.compressor.relevance_direction, table[YES] - table[NO])


# ------------------------------------------------------------------------------------------------ hub cache

def cache_repo(home: Path, repo_id: str, source: Path, commit: str) -> Path:
    """`source`'s files as huggingface_hub caches a repo: blobs, a snapshot of links to them, refs/main."""
    repo = home / "hub" / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for file in source.iterdir():
        blob = repo / "blobs" / f"{commit[:8]}-{file.name}"
        shutil.copy(file, blob)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return snapshot


@pytest.fixture()
def hub_home(fixtures, tmp_path) -> tuple[Path, Path]:
    """A Hugging Face cache holding a Tempo-6B-like checkpoint and its base, as a restarted Space has them."""
    home = tmp_path / "hf"
    release = bf16_release(fixtures, tmp_path / "release")
    snapshot = cache_repo(home, "Vision-CAIR/Tempo-6B", release, "a" * 40)
    cache_repo(home, "Qwen/Qwen3-VL-2B-Instruct", sharded_base(fixtures, tmp_path / "base", tied=False), "b" * 40)
    return home, snapshot


def offline(home: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HOME": str(home), "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9",
           "TEMPO_CACHE": str(home / "tempo-cache")}
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_loading_by_hub_id_from_an_offline_cache(hub_home, fixtures):
    home, snapshot = hub_home
    code = ("import tempo, torch\n"
            "m = tempo.from_pretrained('Vision-CAIR/Tempo-6B', device='cpu')\n"
            "print(m.spec.num_memory_tokens, m.compressor.relevance_direction.abs().sum().item())")
    done = offline(home, "-c", code)
    assert done.returncode == 0, done.stderr[-3000:]
    with safe_open(fixtures / BASE / "model.safetensors", "pt") as f:
        head = f.get_tensor("lm_head.weight")
    tokens, direction = done.stdout.split()
    assert int(tokens) == 32 and float(direction) == pytest.approx((head[YES] - head[NO]).abs().sum().item(), 1e-5)
    assert (snapshot / checkpoint_files.RELEVANCE_FILE).is_file()  # cached beside the hub snapshot, as the README says


@pytest.mark.slow
def test_a_file_missing_from_the_cache_is_a_clear_message(hub_home, fixtures):
    home, snapshot = hub_home
    (snapshot / "tokenizer.json").unlink()
    args = ["-m", "tempo", "ask", "--video", str(fixtures / "videos" / "bikes.mp4"), "--question", QUESTION,
            "--model", "Vision-CAIR/Tempo-6B", "--device", "cpu"]
    done = offline(home, *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"error: No tokenizer.json in {snapshot}."
    shutil.rmtree(home / "hub" / "models--Qwen--Qwen3-VL-2B-Instruct")
    (snapshot / "tokenizer.json").symlink_to(fixtures / "tempo" / "tokenizer.json")
    done = offline(home, *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "error: Qwen/Qwen3-VL-2B-Instruct is not in the Hugging Face cache" in done.stderr
    assert "HF_HUB_OFFLINE is set" in done.stderr


# ------------------------------------------------------------------------------------------------ range reads

class Handler(http.server.SimpleHTTPRequestHandler):
    """Serves files in 64 KiB chunks, honouring Range or not, and counts the bytes that went out."""

    honour_range = True
    sent = 0

    def do_GET(self):
        path = self.translate_path(self.path)
        size = os.path.getsize(path)
        start, end = 0, size - 1
        if self.honour_range and "Range" in self.headers:
            start, end = (int(x) for x in self.headers["Range"].removeprefix("bytes=").split("-"))
        self.send_response(206 if self.honour_range and "Range" in self.headers else 200)
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        with open(path, "rb") as f:
            f.seek(start)
            left = end - start + 1
            try:
                while left:
                    chunk = f.read(min(left, 2**16))
                    self.wfile.write(chunk)
                    type(self).sent += len(chunk)
                    left -= len(chunk)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client had what it needed

    def log_message(self, *args):
        pass


@pytest.fixture()
def big_weights(tmp_path) -> tuple[Path, torch.Tensor]:
    """A 48 MB safetensors file whose LM head is stored after 48 MB of other weights."""
    head = torch.randn(400, 64)
    path = tmp_path / "model.safetensors"
    save_file({"aaa.big": torch.zeros(12 * 2**20), "lm_head.weight": head}, path)
    header = json.loads(path.read_bytes()[8:8 + int.from_bytes(path.read_bytes()[:8], "little")])
    assert header["lm_head.weight"]["data_offsets"][0] == 48 * 2**20  # the rows are at the far end
    return path, head


def serve_file(directory: Path, honour_range: bool):
    handler = type("ThisHandler", (Handler,), {"honour_range": honour_range, "sent": 0})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(directory)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


@pytest.mark.parametrize("honour_range", [True, False], ids=["range", "range-ignored"])
def test_the_direction_rows_come_over_http_without_holding_the_file(big_weights, monkeypatch, honour_range):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    path, head = big_weights
    server, handler = serve_file(path.parent, honour_range)
    try:
        read = relevance_direction._http_reader(f"http://127.0.0.1:{server.server_port}/{path.name}")
        tracemalloc.start()
        rows = relevance_direction.read_rows(read, "lm_head.weight", [YES, NO])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        server.shutdown()
    assert torch.equal(torch.stack(rows), head[[YES, NO]])
    assert peak < 4 * 2**20  # never the file (48 MB) in memory
    if honour_range:
        assert handler.sent < 64 * 2**10  # the header and two rows, a few KB
    else:
        # Each read streams from the start up to its bytes (the header, then each row), then hangs up.
        assert handler.sent < 3 * path.stat().st_size


def test_a_server_ignoring_ranges_is_refused_before_a_big_download(big_weights, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(relevance_direction, "RANGE_IGNORED_LIMIT", 2**20)
    path, _ = big_weights
    server, handler = serve_file(path.parent, honour_range=False)
    try:
        read = relevance_direction._http_reader(f"http://127.0.0.1:{server.server_port}/{path.name}")
        with pytest.raises(ModelError, match="ignores HTTP range requests, so reading the relevance direction would "
                                             "download 48 MB"):
            relevance_direction.read_rows(read, "lm_head.weight", [YES, NO])
    finally:
        server.shutdown()
    assert handler.sent < path.stat().st_size / 2  # what socket buffers took before the client hung up


@pytest.mark.parametrize("offline", ["0", "1"], ids=["unreachable", "hub-offline"])
def test_base_weights_neither_local_nor_reachable_say_what_to_do(monkeypatch, offline):
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    read = relevance_direction._http_reader(f"http://127.0.0.1:{port}/model.safetensors")
    with pytest.raises(ModelError, match="neither local nor reachable: download the base model and pass base=DIR"):
        relevance_direction.read_rows(read, "lm_head.weight", [YES, NO])


# ------------------------------------------------------------------------------------------------ slow on a CPU

def test_a_big_model_on_a_cpu_says_how_slow_it_will_be(fixtures, monkeypatch, caplog):
    monkeypatch.setattr(tempo.model.modeling, "cpu_gflops", lambda: 0.001)  # a CPU so slow that even this model is big
    monkeypatch.setattr(tempo.model.modeling, "FASTEST_CPU_GFLOPS", 0.001)
    with caplog.at_level(logging.WARNING, logger="tempo.model"):
        tempo.from_pretrained(fixtures / "tempo", base=fixtures / BASE, device="cpu")
    warning, = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "runs on this machine's CPU (no CUDA GPU)" in warning and "s per 8-frame segment" in warning
    assert "before the answer starts" in warning


def test_a_small_model_loads_without_measuring_the_cpu(fixtures, monkeypatch, caplog):
    def no_measuring():
        raise AssertionError("the CPU was measured for a model that cannot be slow")

    monkeypatch.setattr(tempo.model.modeling, "cpu_gflops", no_measuring)
    with caplog.at_level(logging.WARNING, logger="tempo.model"):
        tempo.from_pretrained(fixtures / "tempo", base=fixtures / BASE, device="cpu")
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
