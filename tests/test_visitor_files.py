"""The public app opens only what visitors uploaded (and its examples); every upload gets a playable preview.

Raw file payloads go through gradio_client with its upload step switched off, as a client that names server paths
instead of uploading would send them. Gradio itself refuses most of them (with its generic error); the app's own
check refuses the rest, and stands on its own should Gradio's ever let one through.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import av
import pytest
from appserver import ROOT, load_app_model, serve
from gradio.utils import get_upload_folder
from gradio_client import Client, handle_file
from gradio_client.client import Endpoint
from gradio_client.exceptions import AppError

import tempo
from demo import html, preview
from demo.server import NOT_UPLOADED, Server
from tempo.video import probe

QUESTION = "What moves across the screen?"
SETTINGS = dict(max_new_tokens=4)
GRADIO_REFUSAL = "The upstream Gradio app has raised an exception but has not enabled verbose error reporting."


@pytest.fixture(scope="module")
def app_url(fixtures):
    with serve(load_app_model(fixtures)) as url:
        yield url


@pytest.fixture(scope="module")
def client(app_url):
    return Client(app_url, verbose=False)


@pytest.fixture()
def raw_client(app_url, monkeypatch):
    """A client that sends file payloads as they are, without uploading the files they name."""
    monkeypatch.setattr(Endpoint, "_upload_file", lambda self, payload, data_index: payload)
    return Client(app_url, verbose=False)


@pytest.fixture()
def never_opened(monkeypatch):
    """Fails the test if the app reads a video or probes one for the preview."""
    def refuse(*args, **kwargs):
        raise AssertionError("a file that was not uploaded was opened")

    for target in ("tempo.engine.host.open_decoder", "demo.preview.browser_playable", "demo.preview.make_proxy"):
        monkeypatch.setattr(target, refuse)


def file_payload(path: str | os.PathLike) -> dict:
    return {"path": os.fspath(path), "meta": {"_type": "gradio.FileData"}}


def outside_paths(fixtures: Path, tmp_path: Path) -> dict[str, str]:
    """Paths a request may name but the app must not open; the symlink sits inside the upload folder."""
    uploads = Path(get_upload_folder())
    uploads.mkdir(parents=True, exist_ok=True)
    link = uploads / f"tempo-test-link-{os.getpid()}-{tmp_path.name}.mp4"
    link.symlink_to(fixtures / "videos" / "bikes.mp4")
    return {
        "passwd": "/etc/passwd",
        "missing": "/nonexistent/holiday.mp4",
        "dot-dot": str(uploads / ".." / ".." / "etc" / "passwd"),
        "video-outside": str(fixtures / "videos" / "bikes.mp4"),
        "symlink-in-uploads": str(link),
        "missing-in-uploads": str(uploads / f"tempo-test-{os.getpid()}" / "holiday.mp4"),
    }


def call(client: Client, endpoint: str, video: object):
    if endpoint == "/answer":
        return client.predict(video, QUESTION, **SETTINGS, api_name="/answer")
    return client.predict(video, QUESTION, 1024, 1024, 4, "ata", "head", 0, 4, False, api_name="/analyze")


@pytest.mark.parametrize("endpoint", ["/answer", "/analyze"])
@pytest.mark.parametrize("name", ["passwd", "missing", "dot-dot", "video-outside", "symlink-in-uploads",
                                  "missing-in-uploads"])
def test_paths_that_were_not_uploaded_are_refused(raw_client, never_opened, fixtures, tmp_path, endpoint, name):
    path = outside_paths(fixtures, tmp_path)[name]
    try:
        with pytest.raises(AppError) as error:
            call(raw_client, endpoint, file_payload(path))
        assert str(error.value) == NOT_UPLOADED or str(error.value).startswith(GRADIO_REFUSAL)
        if name == "missing-in-uploads":  # Gradio lets this one through: the app's check is what refuses it
            assert str(error.value) == NOT_UPLOADED
    finally:
        for link in Path(get_upload_folder()).glob(f"tempo-test-link-{os.getpid()}-*"):
            link.unlink()


def test_the_app_refuses_what_gradio_would_let_through(fixture_model, fixtures, tmp_path):
    """The app's own check, called as the handlers call it: only files under the upload folder or the examples,
    symlinks resolved, whether or not the path exists."""
    server = Server(fixture_model, tempo.Limits())
    uploads = Path(get_upload_folder())
    inside = uploads / f"tempo-test-{os.getpid()}"
    inside.mkdir(parents=True, exist_ok=True)
    try:
        video = inside / "clip.mp4"
        video.write_bytes((fixtures / "videos" / "bikes.mp4").read_bytes())
        (inside / "link.mp4").symlink_to(fixtures / "videos" / "bikes.mp4")
        assert server.visitor_video(file_payload(video)) == str(video.resolve())
        example = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))[0]["video"]
        assert server.visitor_video(str(ROOT / "examples" / example)).endswith(example)
        refused = [inside, inside / "link.mp4", inside / "missing.mp4", inside / ".." / ".." / "etc" / "passwd",
                   "/etc/passwd", "/etc/no-such-file", fixtures / "videos" / "bikes.mp4"]
        messages = set()
        for path in refused:
            with pytest.raises(tempo.InputError) as error:
                server.visitor_video(file_payload(path))
            messages.add(str(error.value))
        assert messages == {NOT_UPLOADED}
    finally:
        for path in sorted(inside.rglob("*"), reverse=True):
            path.unlink()
        inside.rmdir()


def test_an_existing_and_a_missing_file_get_identical_answers(raw_client, never_opened):
    messages = []
    for path in ("/etc/passwd", "/etc/no-such-file"):
        with pytest.raises(AppError) as error:
            call(raw_client, "/answer", file_payload(path))
        messages.append(str(error.value))
    assert messages[0] == messages[1] and "passwd" not in messages[0]


def test_uploads_are_opened(client, fixtures):
    for endpoint in ("/answer", "/analyze"):
        result = call(client, endpoint, handle_file(str(fixtures / "videos" / "bikes.mp4")))
        assert result["answer"].strip() if endpoint == "/answer" else "data-turn='0'" in str(result[2])


# ------------------------------------------------------------------------------------------------ preview

def video_stream(path: Path) -> tuple[str, str, int, int, int]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for packet in container.demux(stream) if packet.size)
        context = stream.codec_context
        return context.name, context.format.name, context.width, context.height, frames


def playable(path) -> bool:
    return preview.browser_playable(path, probe.read_headers(path))


def test_browsers_play_h264_but_not_mpeg4_part2_hevc_like_files_or_webm_named_mp4(hostile_media, fixtures):
    assert playable(fixtures / "videos" / "bikes.mp4")
    assert playable(hostile_media["two_seconds.mp4"])
    assert not playable(hostile_media["mpeg4_part2.mp4"])
    assert not playable(hostile_media["vp9_named.mp4"])  # WebM content with an .mp4 name
    assert not playable(hostile_media["odd_333x199.mp4"])  # H.264 4:4:4


def test_the_proxy_is_small_h264_that_browsers_play(hostile_media, tmp_path):
    proxy = preview.make_proxy(hostile_media["mpeg4_part2.mp4"], tmp_path)
    codec, pixels, width, height, frames = video_stream(proxy)
    assert (codec, pixels, width, height) == ("h264", "yuv420p", 160, 120)
    assert frames == 20  # 2 s at 10 fps: full motion for a short clip
    assert playable(proxy)


def test_long_videos_get_a_key_frame_proxy_and_big_ones_shrink(hostile_media, tmp_path, monkeypatch):
    monkeypatch.setattr(preview, "FULL_MOTION_MAX_S", 1.0)
    proxy = preview.make_proxy(hostile_media["mpeg4_part2.mp4"], tmp_path)
    assert video_stream(proxy)[4] < 20  # intra frames only
    assert preview.proxy_size(7680, 4320) == (480, 270)
    assert preview.proxy_size(1, 2000) == (2, 480)
    assert preview.proxy_size(333, 199) == (332, 200)


def test_an_undecodable_file_has_no_proxy(hostile_media, tmp_path):
    with pytest.raises(tempo.VideoError, match="cannot be previewed"):
        preview.make_proxy(hostile_media["truncated.mp4"], tmp_path)


# ------------------------------------------------------------------------------------------------ header

def test_the_page_says_what_tempo_tiny_knows(fixture_model):
    tiny = tempo.from_pretrained(device="cpu")
    assert "only knows its synthetic world" in html.header_html(tiny)
    assert f"a {sum(p.numel() for p in tiny.parameters()) / 1e6:.1f}M-parameter Tempo" in html.header_html(tiny)
    assert "synthetic world" not in html.header_html(fixture_model)


def test_a_video_s_headers_are_read_once_for_its_preview_its_questions_and_a_segment(monkeypatch):
    """The preview, a question, a follow-up and a segment click all read the file's headers through one reading,
    kept while the file is unchanged."""
    from demo import handlers

    reads = []
    read = probe.read_headers
    monkeypatch.setattr(probe, "read_headers", lambda path: reads.append(path) or read(path))
    probe._probes.clear()
    server = Server(tempo.from_pretrained(device="cpu"), tempo.Limits())
    entry = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))[0]
    video = {"path": str(ROOT / "examples" / entry["video"])}
    list(handlers.show_preview(server, video))
    for question in (entry["question"], "What moves?"):
        list(handlers.analyze(server, video, question, max_new_tokens=4))
    handlers.segment_view(server, video, entry["question"], {"segment": 1}, max_new_tokens=4)
    assert len(reads) == 1
