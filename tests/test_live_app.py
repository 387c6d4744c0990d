"""Live mode in the app: /watch (gradio_client) and wait_for (the mcp client) over an HLS stream made with ffmpeg and
served on loopback, let through by replacing only the address check (as test_mcp does); the same URL refused
without that; sources that die mid-stream (the server gone, a corrupt segment, a camera that stops) ending the
watch with one sentence, keeping what was seen and leaking nothing; the cap on watches; the lab-network setting;
and ZeroGPU's refusal, with its numbers."""

from __future__ import annotations

import asyncio
import functools
import http.server
import json
import socket
import threading
import time
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import pytest
from appserver import load_app_model, serve
from gradio_client import Client
from gradio_client.exceptions import AppError
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client

from demo import handover, live, live_api, live_layout, live_sources
from tempo.config import Limits
from tempo.errors import InputError
from tempo.live import LiveWorld

pytestmark = pytest.mark.slow

SEED = 800_007  # in two-minute clips: an orange diamond from 8.9 s to 14.5 s, nothing like it before 1:40
QUESTION = "When does the orange diamond appear?"
EVIDENCE = (8.85, 14.54)
SEGMENT = 4.0


def hls(folder: Path, seconds: float = 20.0, live_playlist: bool = False) -> Path:
    """The synthetic stream's first `seconds` as HLS (4-s MPEG-TS segments) in `folder`; `live_playlist`: without
    its end, as a live stream's playlist reads while it grows."""
    folder.mkdir(parents=True, exist_ok=True)
    frames = np.stack([frame for _, frame in LiveWorld(SEED, clip_s=120.0).frames(fps=4.0, until=seconds)])
    writer = imageio_ffmpeg.write_frames(str(folder / "live.m3u8"), (512, 256), fps=4, codec="libx264",
                                         pix_fmt_out="yuv420p", macro_block_size=2, quality=None,
                                         output_params=["-g", "16", "-f", "hls", "-hls_time", "4",
                                                        "-hls_list_size", "0"])
    writer.send(None)
    writer.send(frames)
    writer.close()
    if live_playlist:
        playlist = folder / "live.m3u8"
        playlist.write_text(playlist.read_text().replace("#EXT-X-ENDLIST\n", ""))
    return folder / "live.m3u8"


class Web:
    """A web server on loopback over a folder; `gone()` takes it away mid-stream."""

    def __init__(self, folder: Path):
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        handler.log_message = lambda *args: None
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def gone(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def app(fixtures):
    with serve(load_app_model(fixtures)) as url:
        yield url


@pytest.fixture
def public(monkeypatch):
    """Loopback let through as if it were public: the one check the tests stand in for."""
    monkeypatch.setattr(handover, "public_address", lambda host: "127.0.0.1")


def feed_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "tempo-live-feed" and t.is_alive()]


def settled(app_url: str) -> None:
    """Nothing left running or kept once a watch is over: no watch, no reading thread."""
    deadline = time.monotonic() + 15
    while (feed_threads() or any(len(w) for w in live_api._watches.values())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not feed_threads() and not any(len(w) for w in live_api._watches.values())


def watched(app_url: str, stream: str, question: str = QUESTION, **more) -> list[dict]:
    """/watch's results, in order; a refusal raises (AppError, with its sentence)."""
    job = Client(app_url, verbose=False).submit(stream, question, **more, api_name="/watch")
    results = list(job)
    job.result()
    return results


def test_watch_reads_hls_on_loopback_and_alerts_within_two_segments_of_the_evidence(app, public, tmp_path):
    web = Web(hls(tmp_path / "hls").parent)
    try:
        results = watched(app, f"http://camera.example:{web.port}/live.m3u8")
    finally:
        web.gone()
    assert results[0]["status"] == results[0]["stage"] == "started" and results[-1]["status"] == "ended"
    assert results[-1]["reason"] == "The stream ended." and not results[-1]["failed"]
    segments = [r["segment"] for r in results if r["status"] == "watching"]
    assert [s["start"] for s in segments] == [0.0, 4.0, 8.0, 12.0, 16.0]  # stream time, one result per segment
    assert all(s["lag"] is not None and s["lag"] >= 0 for s in segments)
    (alert,) = results[-1]["alerts"]
    assert alert["end"] > EVIDENCE[0] and alert["start"] < EVIDENCE[1] + 2 * SEGMENT
    assert alert["at"] and alert["clock"].endswith("Z")
    settled(app)


def test_a_loopback_stream_is_refused_with_the_pages_sentence(app, tmp_path):
    web = Web(hls(tmp_path / "hls", seconds=4.0).parent)
    url = f"http://127.0.0.1:{web.port}/live.m3u8"
    try:
        with pytest.raises(AppError, match="is not a public internet address; this server reads streams from the "
                                           "public internet only"):
            watched(app, url)
        with pytest.raises(InputError, match="is not a public internet address"):
            live_sources.url_source(url, Limits())
        result = call(app, "wait_for", stream=url, question=QUESTION)
        assert result.isError and "is not a public internet address" in result.content[0].text
    finally:
        web.gone()
    settled(app)


def call(url: str, tool: str, progress=None, **arguments):
    async def session():
        async with streamablehttp_client(url + "/gradio_api/mcp/") as (read, write, _):
            async with ClientSession(read, write) as opened:
                await opened.initialize()
                return await opened.call_tool(tool, arguments, progress_callback=progress)
    return asyncio.run(session())


def test_wait_for_gives_the_first_moment_with_progress_or_not_seen(app, public, tmp_path):
    web = Web(hls(tmp_path / "hls").parent)
    messages = []

    async def progress(done, total, message):
        messages.append(message or "")

    try:
        stream = f"http://camera.example:{web.port}/live.m3u8"
        seen = call(app, "wait_for", progress, stream=stream, question=QUESTION, timeout=60)
        absent = call(app, "wait_for", stream=stream, question="When does the green star appear?", timeout=6)
    finally:
        web.gone()
    assert not seen.isError, seen.content[0].text
    found = json.loads(seen.content[0].text)
    assert found["seen"] and found["moment"]["end"] > EVIDENCE[0] and found["moment"]["start"] < EVIDENCE[1] + 8
    assert [m for m in messages if "stream watched" in m]
    nothing = json.loads(absent.content[0].text)
    assert not nothing["seen"] and nothing["answer"] == "not seen" and "6 s allowed" in nothing["reason"]
    settled(app)


def test_the_stream_server_gone_ends_the_watch_with_one_sentence_and_keeps_what_was_seen(app, public, tmp_path):
    web = Web(hls(tmp_path / "hls", seconds=12.0, live_playlist=True).parent)
    results = []
    for result in Client(app, verbose=False).submit(f"http://camera.example:{web.port}/live.m3u8", QUESTION,
                                                     api_name="/watch"):
        results.append(result)
        if result["status"] == "watching" and result["segment"]["index"] == 1:
            web.gone()
    ended = results[-1]
    assert ended["status"] == "ended" and ended["failed"] and ended["segments"] >= 2
    assert "camera.example cannot be reached" in ended["reason"] and "what was seen is kept" in ended["reason"]
    settled(app)


def test_a_corrupt_segment_ends_the_watch_with_one_sentence(app, public, tmp_path):
    playlist = hls(tmp_path / "hls", seconds=16.0)
    (playlist.parent / "live2.ts").write_bytes(np.random.default_rng(1).integers(0, 256, 50_000, np.uint8).tobytes())
    web = Web(playlist.parent)
    try:
        ended = watched(app, f"http://camera.example:{web.port}/live.m3u8")[-1]
    finally:
        web.gone()
    assert ended["failed"] and ended["segments"] == 2
    assert ended["reason"].startswith("The stream's segment 2 ")
    settled(app)


def test_a_file_uploaded_first_is_played_as_if_live_for_the_minutes_asked(app):
    example = Path(__file__).resolve().parent.parent / "examples" / "synthetic-900001-2min.mp4"
    import httpx

    with example.open("rb") as file:
        path = httpx.post(app + "/gradio_api/upload", files={"files": (example.name, file, "video/mp4")}).json()[0]
    results = watched(app, path, "What moves?", minutes=0.1)
    assert results[0]["source"] == example.name
    assert results[-1]["reason"] == "The watch reached its minutes." and results[-1]["segments"] == 2
    settled(app)


# ------------------------------------------------------------------------------------------------ the page's watches

class Request:
    def __init__(self, session: str):
        self.session_hash = session


@pytest.fixture(scope="module")
def server(fixtures):
    from demo.server import Server

    return Server(load_app_model(fixtures), Limits(live_watches=2))


def test_a_camera_that_stops_sending_ends_its_watch_and_keeps_what_was_seen(server, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(live, "camera_clock", lambda: now[0])
    owner = live_layout.owner_of(Request("camera-visitor"))
    for t, frame in LiveWorld(SEED, clip_s=120.0).frames(until=9.0):  # a frame every half second
        now[0] = 1000.0 + t
        live.camera_frame(server, frame, QUESTION, 4.0, owner=owner)
    watching = live_api.watches_of(server).get(owner)
    assert watching.live.segments >= 1 and len(watching.live.recent) >= 1
    assert live.camera_silent(watching, watching.last_frame + 1.0) is None  # a pause is not an end
    shown = live.camera_silent(watching, watching.last_frame + live.CAMERA_SILENCE_S + 1)
    assert "The camera stopped sending frames" in shown["status"] and "what was seen is kept" in shown["status"]
    assert len(watching.live.recent) >= 1 and watching.live.replay.span() is not None
    answered = list(live.ask_now(server, QUESTION, owner=owner))[-1]["chat"]  # asked after the end: still there
    assert "tempo-live-answer" in answered[-1]["content"] and "of the stream" in answered[-1]["content"]
    (replayed,) = list(live.replay_at(server, {"seconds": 4.0, "click": 1}, owner=owner))
    assert "the moment at 00:04" in replayed["replay"].label
    live.stop_watch(server, owner=owner)
    assert live_api.watches_of(server).get(owner) is None
    assert len(watching.live.recent) == 0 and watching.live.replay.span() is None  # stopping frees everything
    live.camera_frame(server, frame, QUESTION, 4.0, owner=owner)  # the camera, still recording, starts nothing
    assert live_api.watches_of(server).get(owner) is None


def test_the_page_watches_the_synthetic_world_until_stopped(server):
    owner = live_layout.owner_of(Request("synthetic-visitor"))
    shown = live.start_watch(server, "synthetic", "", None, 800_011, "When does the purple diamond appear?", 4.0,
                             owner=owner)
    first = next(shown)
    assert "Watching the synthetic world (seed 800011)" in first["status"]
    segment = next(update for update in shown if "segments" in update["status"])
    assert "00:04 of stream" in segment["status"] and "behind real time" in segment["status"]
    assert segment["film"].count("data-live-seconds") == 1
    live.stop_watch(server, owner=owner)
    assert "The watch was stopped." in list(shown)[-1]["status"]
    assert live_api.watches_of(server).get(owner) is None


def test_the_server_watches_no_more_than_its_cap(server):
    watches = live_api.watches_of(server)
    opened = [live_api.begin(server, f"visitor-{n}", live_sources.synthetic_source(800_100), QUESTION, None)
              for n in range(2)]
    with pytest.raises(InputError, match="watches at most 2 streams at once"):
        live_api.begin(server, "visitor-2", live_sources.synthetic_source(800_100), QUESTION, None)
    again = live_api.begin(server, "visitor-1", live_sources.synthetic_source(800_101), QUESTION, None)  # a restart
    assert len(watches) == 2 and opened[1].stop.is_set() and not again.stop.is_set()
    for n in range(2):
        watches.close(f"visitor-{n}")
    assert len(watches) == 0 and all(w.stop.is_set() for w in (*opened, again))


def test_cameras_on_a_private_network_only_when_the_owner_allows_and_never_on_a_space(monkeypatch):
    def resolve(host, *args, **kwargs):
        address = {"lab-camera": "192.168.1.20", "metadata": "169.254.169.254", "me": "127.0.0.1"}[host]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("SPACE_HOST", raising=False)
    with pytest.raises(InputError, match="TEMPO_LIVE_LAB_STREAMS=1"):
        live_sources.stream_address("lab-camera", lab=False)
    assert live_sources.stream_address("lab-camera", lab=True) == "192.168.1.20"
    for host in ("metadata", "me"):  # link-local and loopback stay refused
        with pytest.raises(InputError, match="not a public internet address"):
            live_sources.stream_address(host, lab=True)
    assert live_sources.lab_allowed(Limits(live_lab_streams=True))
    monkeypatch.setenv("SPACE_ID", "someone/tempo")
    assert not live_sources.lab_allowed(Limits(live_lab_streams=True))


def test_zerogpu_gets_no_live_mode_and_says_why_with_its_numbers(server, monkeypatch):
    per_minute, minutes, _ = live_sources.zerogpu_live_cost()
    assert per_minute > 40 and minutes < 5  # one call per segment: a day's anonymous minutes, a few of stream
    grouped_per_minute, grouped_minutes, least_lag = live_sources.zerogpu_live_cost(15)
    assert grouped_minutes > 4 * minutes and least_lag > 60  # more stream, but alerts a minute late
    monkeypatch.setattr(server, "device", type(server.device)(server.device.accelerate, remote=True))
    with pytest.raises(InputError, match="Live mode needs dedicated hardware"):
        live_api.begin(server, "zero", live_sources.synthetic_source(800_100), QUESTION, None)

