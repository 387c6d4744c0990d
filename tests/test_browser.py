"""A real visitor: Debian's headless Chromium uploads a video, asks, and watches the app answer, offline."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from appserver import ROOT, load_app_model, serve

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]


def example(fixtures: Path) -> tuple[Path, str]:
    """The smallest shipped example when there are any, else a short H.264 clip the browser can play."""
    listing = ROOT / "examples" / "examples.json"
    if listing.is_file():
        entries = [e for e in json.loads(listing.read_text(encoding="utf-8"))
                   if (listing.parent / e["video"]).is_file()]
        if entries:
            smallest = min(entries, key=lambda e: (listing.parent / e["video"]).stat().st_size)
            return listing.parent / smallest["video"], smallest["question"]
    return fixtures / "videos" / "bikes.mp4", "What are the people riding?"


@pytest.fixture(scope="module")
def app_url(fixtures):
    with serve(load_app_model(fixtures)) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    if not os.path.isfile(CHROMIUM):
        pytest.fail("Debian's chromium is missing: `make browser` installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def test_a_broken_upload_gets_a_clear_message(app_url, browser, tmp_path):
    fake = tmp_path / "holiday.mp4"
    fake.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(200))  # an mp4 header and nothing after it
    page = browser.new_page()
    page.goto(app_url)
    page.locator("#tempo-video input[type=file]").set_input_files(str(fake))
    page.get_by_label("Question").fill("What happens?")
    page.get_by_role("button", name="Compress & answer").click()
    page.locator(".tempo-status.error").get_by_text("holiday.mp4 is not a readable video").wait_for(timeout=30_000)
    page.close()


def test_visitor_gets_timeline_key_frames_and_answer_offline(app_url, browser, fixtures, tmp_path):
    video, question = example(fixtures)
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))

    page.goto(app_url)
    page.locator("#tempo-video input[type=file]").set_input_files(str(video))
    page.get_by_label("Question").fill(question)
    page.get_by_role("button", name="Compress & answer").click()

    page.wait_for_function("() => document.querySelector('#tempo-answer textarea')?.value.trim().length > 0",
                           timeout=90_000)
    page.get_by_text("Done in").wait_for(timeout=30_000)
    timeline = page.locator("#tempo-timeline .js-plotly-plot")
    assert timeline.locator(".barlayer .point").count() >= 1  # tokens per segment
    assert timeline.locator(".scatterlayer .trace").count() >= 1  # relevance curve
    page.locator("#tempo-gallery img").first.wait_for(timeout=30_000)
    assert page.locator("#tempo-gallery img").count() >= 1
    assert page.get_by_role("button", name="Segments · JSON").is_visible()

    shot = page.screenshot(path=str(tmp_path / "app.png"), full_page=True)
    if os.environ.get("TEMPO_SCREENSHOT"):
        target = Path(os.environ["TEMPO_SCREENSHOT"])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(shot)

    own = urlsplit(app_url).netloc
    elsewhere = [url for url in requests
                 if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).netloc != own]
    assert not elsewhere, f"the page fetched from outside the app: {elsewhere}"


def test_a_video_the_browser_cannot_play_still_previews(app_url, browser, hostile_media):
    """MPEG-4 Part 2 (older cameras): the page shows a playable proxy, with no "Video not playable" toast."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(app_url)
    page.locator("#tempo-video input[type=file]").set_input_files(str(hostile_media["mpeg4_part2.mp4"]))
    page.wait_for_function("() => (document.querySelector('#tempo-preview video')?.readyState ?? 0) >= 2",
                           timeout=60_000)
    assert page.locator(".toast-body").count() == 0
    assert not page.get_by_text("Video not playable").count()
    page.close()
