"""The app as an MCP server, driven by the `mcp` client as an agent's host would: exactly two tools, the same answer
and segments as /answer, a refused file as a tool error with the page's sentence; and how a video is handed over
(an upload's path or URL, a data: URI, a public URL; never a loopback or private address, never over the limit)."""

from __future__ import annotations

import asyncio
import base64
import functools
import http.server
import json
import threading
from pathlib import Path

import httpx
import pytest
from appserver import load_app_model, serve
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from demo import handover
from tempo.config import Limits
from tempo.errors import InputError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def app(fixtures):
    with serve(load_app_model(fixtures)) as url:
        yield url


@pytest.fixture(scope="module")
def example() -> tuple[Path, str]:
    entry = json.loads((EXAMPLES / "examples.json").read_text())[0]
    return EXAMPLES / entry["video"], entry["question"]


def with_tools(url: str, work):
    """`work(session)` in an MCP session with the app, as an agent's host opens one."""
    async def session():
        async with streamablehttp_client(url + "/gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as opened:
                await opened.initialize()
                return await work(opened)
    return asyncio.run(session())


def call(url: str, tool: str, progress=None, **arguments):
    return with_tools(url, lambda session: session.call_tool(tool, arguments, progress_callback=progress))


def uploaded(url: str, path: Path) -> str:
    """The file POSTed to the app's upload route, as a client on any machine can: the path the server gives back."""
    with path.open("rb") as file:
        response = httpx.post(url + "/gradio_api/upload", files={"files": (path.name, file, "video/mp4")})
    response.raise_for_status()
    return response.json()[0]


def test_the_app_lists_exactly_the_three_tools_described_for_an_agent(app):
    tools = with_tools(app, lambda session: session.list_tools()).tools
    assert sorted(tool.name for tool in tools) == ["answer", "locate", "wait_for"]
    waits = next(tool for tool in tools if tool.name == "wait_for")  # a stream's, not a video's (test_live_app.py)
    assert waits.inputSchema["required"] == ["stream", "question"] and "Returns JSON" in waits.description
    tools = [tool for tool in tools if tool is not waits]
    for tool in tools:
        schema = tool.inputSchema
        assert schema["required"] == ["video", "question"]  # the settings are optional
        assert "upload it first" in schema["properties"]["video"]["description"]
        assert "m:ss" in schema["properties"]["start"]["description"]
        assert "Returns JSON" in tool.description
    answer, locate = sorted(tools, key=lambda tool: tool.name)
    assert list(answer.inputSchema["properties"]) == ["video", "question", "budget", "start", "end", "zoom"]
    assert list(locate.inputSchema["properties"]) == ["video", "question", "start", "end"]
    assert "the checkpoint's" in answer.inputSchema["properties"]["budget"]["description"]


def test_both_tools_give_what_answer_gives(app, example):
    path, question = example
    expected = Client(app, verbose=False).predict(handle_file(str(path)), question, api_name="/answer")
    on_server = uploaded(app, path)
    answered = call(app, "answer", video=on_server, question=question)
    assert not answered.isError, answered.content[0].text
    result = json.loads(answered.content[0].text)
    assert result["answer"] == expected["answer"]
    assert result["looked_at"] == expected["looked_at"]
    assert len(expected["looked_at"]) == 3
    assert result["moments"] == expected["moments"] and expected["moments"]
    assert result["model"] == expected["model"] and result["model"]
    assert (result["tokens_used"], result["budget"]) == (expected["tokens_used"], expected["budget"])

    located = call(app, "locate", video=f"{app}/gradio_api/file={on_server}", question=question)
    assert not located.isError, located.content[0].text
    found = json.loads(located.content[0].text)
    assert [m["index"] for m in found["looked_at"]] == [s["index"] for s in expected["looked_at"]]
    # locate reads relevance rounded to four digits, so an edge read between segment middles may move a hundredth
    assert [t for m in found["moments"] for t in (m["start"], m["end"])] == pytest.approx(
        [t for m in expected["moments"] for t in (m["start"], m["end"])], abs=0.05)
    assert [m["score"] for m in found["moments"]] == pytest.approx([m["score"] for m in expected["moments"]], abs=2e-4)
    by_index = {s["index"]: s for s in expected["segments"]}
    assert len(found["segments"]) == len(expected["segments"])
    for segment in found["segments"]:
        assert segment["relevance"] == pytest.approx(by_index[segment["index"]]["relevance"], abs=1e-4)
        assert (segment["start"], segment["end"]) == (by_index[segment["index"]]["start"],
                                                      by_index[segment["index"]]["end"])


def test_a_short_clip_can_come_as_a_data_uri_with_a_time_range_and_reports_progress(app, fixtures):
    clip = fixtures / "videos" / "shapes_40s_320x240.mp4"
    uri = "data:video/mp4;base64," + base64.b64encode(clip.read_bytes()).decode()
    messages = []

    async def progress(done, total, message):
        messages.append(message or "")

    located = call(app, "locate", progress, video=uri, question="Where is the red circle?", start="0:10", end="30")
    assert not located.isError, located.content[0].text
    found = json.loads(located.content[0].text)
    assert found["segments"][0]["start"] >= 10 and found["segments"][-1]["end"] <= 30
    # Gradio forwards the progress it has when it polls, so how many steps arrive varies; each names the total.
    steps = [m for m in messages if "segments compressed" in m]
    assert steps and all(m.endswith(f" of {len(found['segments'])}") for m in steps), messages


def test_a_refused_file_is_a_tool_error_with_the_pages_sentence(app, example, tmp_path):
    fake = tmp_path / "notes.mp4"
    fake.write_text("this is not a video\n")
    with pytest.raises(AppError) as refused:
        Client(app, verbose=False).predict(handle_file(str(fake)), "What happens?", api_name="/answer")
    sentence = str(refused.value).strip()
    assert "not a readable video" in sentence
    for tool in ("answer", "locate"):
        result = call(app, tool, video=uploaded(app, fake), question="What happens?")
        assert result.isError and sentence in result.content[0].text
    outside = call(app, "answer", video="/etc/passwd", question="What happens?")
    assert outside.isError and "only analyses videos uploaded to it" in outside.content[0].text
    _, question = example
    loopback = call(app, "locate", video=f"http://127.0.0.1:1/{fake.name}", question=question)
    assert loopback.isError and "not a public internet address" in loopback.content[0].text


# ------------------------------------------------------------------------------------------------ the handover

LIMITS = Limits(max_upload_bytes=1000)


def test_a_data_uri_is_stored_once_by_its_content(tmp_path):
    uri = "data:video/mp4;base64," + base64.b64encode(b"x" * 600).decode()
    first, again = handover.handed_over(uri, tmp_path, LIMITS), handover.handed_over(uri, tmp_path, LIMITS)
    assert first == again and Path(first).read_bytes() == b"x" * 600
    assert Path(first).parent.parent == tmp_path and len(Path(first).parent.name) == 64 and first.endswith(".mp4")


@pytest.mark.parametrize("video, message", [
    ("data:video/mp4;base64," + base64.b64encode(b"x" * 1500).decode(), "this server accepts up to"),
    ("data:video/mp4;base64,not base64!", "base64 is not valid"),
    ("data:video/mp4,raw", "must be base64"),
    ("file:///etc/passwd", "does not read file: addresses"),
    ("", "Please give a video"),
    ("http://localhost:8000/v.mp4", "not a public internet address"),
    ("http://10.1.2.3/v.mp4", "not a public internet address"),
    ("http://169.254.169.254/latest/meta-data", "not a public internet address"),
    ("http://[::1]/v.mp4", "not a public internet address"),
])
def test_what_cannot_be_handed_over_is_named(tmp_path, video, message):
    with pytest.raises(InputError, match=message):
        handover.handed_over(video, tmp_path, LIMITS)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing left behind


def test_this_servers_own_file_url_is_read_without_a_fetch(tmp_path):
    upload = tmp_path / ("a" * 64) / "clip.mp4"
    upload.parent.mkdir()
    upload.write_bytes(b"video")
    url = f"http://127.0.0.1:7860/gradio_api/file={upload}"  # loopback, but nothing is fetched
    assert handover.handed_over(url, tmp_path, LIMITS) == str(upload)
    with pytest.raises(InputError, match="not a public internet address"):  # anything else there is fetched
        handover.handed_over(f"http://127.0.0.1:7860/gradio_api/file={tmp_path}/elsewhere.mp4", tmp_path, LIMITS)


@pytest.fixture
def web(tmp_path, monkeypatch):
    """A web server on loopback, let through as if it were public (the one check the test stands in for)."""
    served = tmp_path / "served"
    served.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(handover, "public_address", lambda host: "127.0.0.1")
    yield served, f"http://public.example:{server.server_address[1]}"
    server.shutdown()


def test_a_url_is_fetched_within_the_limit(web, tmp_path):
    served, base = web
    uploads = tmp_path / "uploads"
    (served / "small.mp4").write_bytes(b"s" * 900)
    (served / "large.mp4").write_bytes(b"l" * 5000)
    path = handover.handed_over(f"{base}/small.mp4", uploads, LIMITS)
    assert Path(path).read_bytes() == b"s" * 900 and Path(path).name == "small.mp4"
    with pytest.raises(InputError, match="The file is 0.0 MB; this server accepts up to"):
        handover.handed_over(f"{base}/large.mp4", uploads, LIMITS)
    with pytest.raises(InputError, match="answered HTTP 404"):
        handover.handed_over(f"{base}/missing.mp4", uploads, LIMITS)
    assert sorted(p.name for p in uploads.rglob("*") if p.is_file()) == ["small.mp4"]


def test_a_download_that_passes_the_limit_is_cut_off_whatever_its_length_said(tmp_path):
    chunks = handover.limited(iter([b"x" * 600, b"x" * 600, b"x" * 600]), LIMITS)
    with pytest.raises(InputError, match="this server accepts up to"):
        handover.stored(chunks, "v.mp4", tmp_path)
    assert not list(tmp_path.rglob("*.mp4")) and not list(tmp_path.glob(".handed-*"))


def test_a_tool_call_with_progress_keeps_a_finished_job_s_output(monkeypatch):
    """gradio's MCP path with progress can end its loop on a finished job before reading the final output; the
    mended path then takes the job's result (the race, made certain: a job whose updates were all missed)."""
    from gradio.mcp import GradioMCPServer

    from demo.tools import mend_mcp_progress

    class MissedUpdates:
        def __aiter__(self):
            return self

        async def __anext__(self):
            raise StopAsyncIteration

        def exception(self):
            return None

        def result(self):
            return '{"answer": "At 12.0 seconds."}'

    method = GradioMCPServer._execute_tool_with_progress
    monkeypatch.setattr(GradioMCPServer, "_execute_tool_with_progress", getattr(method, "unmended", method))
    server = object.__new__(GradioMCPServer)  # the two paths read nothing of the server when no update comes
    with pytest.raises(UnboundLocalError):
        asyncio.run(server._execute_tool_with_progress(MissedUpdates(), 1))
    mend_mcp_progress()
    mend_mcp_progress()  # once is enough: a second call wraps nothing again
    assert not hasattr(GradioMCPServer._execute_tool_with_progress.unmended, "unmended")
    assert asyncio.run(server._execute_tool_with_progress(MissedUpdates(), 1)) == ['{"answer": "At 12.0 seconds."}']
