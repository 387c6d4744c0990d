"""Local pages only, for a local server (MCP's rule against DNS rebinding): raw HTTP requests with a forged Host or
Origin against the app on 127.0.0.1 are refused with one sentence on every route (the page, the API, the upload
route, MCP), and requests from localhost, 127.0.0.1 and [::1] on any port pass."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx
import pytest
from appserver import load_app_model, serve

from demo import hosts

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test_hosts", "version": "1"}}}
ROUTES = ("page", "api", "upload", "mcp")


@pytest.fixture(scope="module")
def app(fixtures):
    with serve(load_app_model(fixtures)) as url:
        yield url


def send(url: str, route: str, headers: dict[str, str]) -> httpx.Response:
    """One raw request to `route`, with `headers` as given (httpx sends a Host header it is given unchanged)."""
    if route == "page":
        return httpx.get(url + "/", headers=headers)
    if route == "api":
        return httpx.get(url + "/gradio_api/info", headers=headers)
    if route == "upload":
        return httpx.post(url + "/gradio_api/upload", headers=headers,
                          files={"files": ("clip.mp4", b"not really a video", "video/mp4")})
    return httpx.post(url + "/gradio_api/mcp/", headers={**headers, "Accept": "application/json, text/event-stream"},
                      json=INITIALIZE)


def assert_refused(response: httpx.Response, site: str) -> None:
    assert response.status_code == 403, response.text[:200]
    sentence = response.text
    assert sentence.startswith("This Tempo server answers only pages and clients on this machine"), sentence
    assert site in sentence and sentence.count(". ") == 0 and sentence.endswith(".") and "\n" not in sentence


@pytest.mark.parametrize("route", ROUTES)
def test_a_forged_host_is_refused_on_every_route(app, route):
    port = urlsplit(app).port
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", "localhost.evil.example"):
        assert_refused(send(app, route, {"Host": host}), host)


@pytest.mark.parametrize("route", ROUTES)
def test_a_forged_origin_is_refused_on_every_route(app, route):
    for origin in ("http://evil.example", f"{app.replace('127.0.0.1', 'rebound.example')}", "null"):
        assert_refused(send(app, route, {"Origin": origin}), origin)


@pytest.mark.parametrize("route", ROUTES)
def test_local_hosts_and_origins_pass_on_any_port(app, route):
    port = urlsplit(app).port
    for host, origin in [(f"127.0.0.1:{port}", None), (f"localhost:{port}", "http://localhost:5173"),
                         (f"[::1]:{port}", "http://[::1]:8080"), ("localhost", f"http://127.0.0.1:{port}"),
                         (f"LocalHost:{port}", "https://localhost")]:
        headers = {"Host": host} | ({"Origin": origin} if origin else {})
        response = send(app, route, headers)
        assert response.status_code == 200, (host, origin, response.text[:200])
    if route == "mcp":  # a real answer, not only a status
        assert "serverInfo" in response.text
    if route == "upload":
        assert json.loads(response.text)[0].endswith("clip.mp4")


def test_the_rule_follows_where_the_server_listens_and_the_setting():
    assert hosts.host_rule("0.0.0.0", "", {}) is None  # put on the network to be reached: every name
    for local in ("127.0.0.1", "localhost", "::1", "[::1]", "127.0.0.2"):
        assert hosts.host_rule(local, "", {}) is not None
    lab = hosts.host_rule("127.0.0.1", "lab-box, Other.Example:7860", {})
    assert lab.refusal({"host": ["lab-box:7860"], "origin": ["http://other.example"]}) is None
    assert "lab-box, other.example" in lab.refusal({"host": ["elsewhere.example"]})
    assert lab.refusal({"host": ["localhost", "evil.example"]}) is not None  # a header given twice: both checked
    assert lab.refusal({}) is not None  # no Host at all


def test_on_a_space_the_origin_must_be_the_spaces_own():
    space = hosts.host_rule("0.0.0.0", "", {"SPACE_ID": "owner/tempo", "SPACE_HOST": "owner-tempo.hf.space"})
    assert space.refusal({"host": ["10.0.3.7:7860"], "origin": ["https://owner-tempo.hf.space"]}) is None
    assert space.refusal({"host": ["owner-tempo.hf.space"]}) is None
    assert space.refusal({"origin": ["https://huggingface.co"]}) is None
    refused = space.refusal({"host": ["owner-tempo.hf.space"], "origin": ["https://evil.example"]})
    assert refused.startswith("This Tempo server answers only pages on its own site")
    assert "owner-tempo.hf.space" in refused
