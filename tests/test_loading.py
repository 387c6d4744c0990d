import http.server
import json
import shutil
import threading
from functools import partial

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import tempo
from tempo.errors import ModelError
from tempo.model import checkpoint_files, relevance_direction

BASE = "base/tiny-qwen3-vl"


class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Serves byte ranges like the hub's CDN, and counts how many bytes went out."""

    sent = 0

    def do_GET(self):
        path = self.translate_path(self.path)
        with open(path, "rb") as f:
            data = f.read()
        start, end = 0, len(data) - 1
        if "Range" in self.headers:
            start, end = (int(x) for x in self.headers["Range"].removeprefix("bytes=").split("-"))
        body = data[start:end + 1]
        RangeHandler.sent += len(body)
        self.send_response(206 if "Range" in self.headers else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_read_rows_by_http_range_matches_local(fixtures, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    weights = fixtures / BASE / "model.safetensors"
    with safe_open(weights, "pt") as f:
        expected = f.get_slice("lm_head.weight")[[300, 294]]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(RangeHandler, directory=str(weights.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        read = relevance_direction._http_reader(f"http://127.0.0.1:{server.server_port}/model.safetensors")
        RangeHandler.sent = 0
        rows = relevance_direction.read_rows(read, "lm_head.weight", [300, 294])
    finally:
        server.shutdown()
    assert torch.equal(torch.stack(rows), expected)
    # only the header and two rows travelled, not the file
    assert RangeHandler.sent < weights.stat().st_size / 4


def test_relevance_direction_is_yes_minus_no_of_the_base_lm_head(fixture_model, fixtures):
    with safe_open(fixtures / BASE / "model.safetensors", "pt") as f:
        head = f.get_tensor("lm_head.weight")
    assert torch.allclose(fixture_model.compressor.relevance_direction, head[300] - head[294])
    # the fixtures make the choice of table visible: the embedding rows differ
    with safe_open(fixtures / BASE / "model.safetensors", "pt") as f:
        embed = f.get_tensor("model.language_model.embed_tokens.weight")
    assert not torch.allclose(fixture_model.compressor.relevance_direction, embed[300] - embed[294])


def test_direction_is_cached_and_later_loads_skip_the_base_weights(fixture_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("TEMPO_CACHE", str(tmp_path / "cache"))
    before = sorted(p.name for p in (fixture_copy / "tempo").iterdir())
    first = tempo.from_pretrained(fixture_copy / "tempo", base=fixture_copy / BASE, device="cpu")
    assert sorted(p.name for p in (fixture_copy / "tempo").iterdir()) == before  # local dirs are not written to
    assert list((tmp_path / "cache").rglob(checkpoint_files.RELEVANCE_FILE))

    def no_base_weights(*args, **kwargs):
        raise AssertionError("base weights were read again")

    monkeypatch.setattr(relevance_direction, "relevance_direction", no_base_weights)
    (fixture_copy / BASE / "model.safetensors").unlink()
    second = tempo.from_pretrained(fixture_copy / "tempo", base=fixture_copy / BASE, device="cpu")
    assert torch.equal(first.compressor.relevance_direction, second.compressor.relevance_direction)


def test_loader_errors_are_specific(fixture_copy, tmp_path):
    with pytest.raises(ModelError, match="No Tempo checkpoint"):
        tempo.from_pretrained(tmp_path / "nothing-here")
    config_path = fixture_copy / "tempo" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "model_type": "llama"}))
    with pytest.raises(ModelError, match="not a Tempo checkpoint"):
        tempo.from_pretrained(fixture_copy / "tempo", base=fixture_copy / BASE)
    config_path.write_text(json.dumps(config))
    with pytest.raises(ModelError, match="Could not fetch Qwen/Qwen3-VL-2B-Instruct"):
        tempo.from_pretrained(fixture_copy / "tempo")  # the config names the hub base; there is no network
    bad = {k: v for k, v in config.items() if k != "num_compression_tokens"}
    config_path.write_text(json.dumps(bad))
    with pytest.raises(ModelError, match="num_compression_tokens"):
        tempo.from_pretrained(fixture_copy / "tempo", base=fixture_copy / BASE)


def test_truncated_weights_are_reported(fixture_copy):
    weights = fixture_copy / "tempo" / "model.safetensors"
    with safe_open(weights, "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys() if "layers.1." not in k}
    save_file(tensors, weights)
    with pytest.raises(ModelError, match="lacks"):
        tempo.from_pretrained(fixture_copy / "tempo", base=fixture_copy / BASE)


def test_decoder_head_is_tied_as_configured(fixture_model):
    lm = fixture_model.decoder.lm
    assert lm.lm_head.weight.data_ptr() == lm.model.embed_tokens.weight.data_ptr()


def test_save_pretrained_round_trips_the_released_format(fixture_model, fixtures, tmp_path):
    from safetensors import safe_open

    target = tmp_path / "copy"
    tempo.model.save_pretrained(fixture_model, target)
    for name in ("tokenizer.json", "generation_config.json"):
        shutil.copy(fixtures / "tempo" / name, target / name)
    with safe_open(fixtures / "tempo" / "model.safetensors", "pt") as original, \
            safe_open(target / "model.safetensors", "pt") as saved:
        assert set(saved.keys()) == set(original.keys())
        for key in original.keys():
            assert torch.equal(saved.get_tensor(key), original.get_tensor(key)), key
    reloaded = tempo.from_pretrained(target, base=fixtures / BASE, device="cpu")
    assert (json.loads((target / "config.json").read_text())
            == json.loads((fixtures / "tempo" / "config.json").read_text()))
    assert reloaded.spec == fixture_model.spec.__class__(**{**fixture_model.spec.__dict__, "name": str(target)})
