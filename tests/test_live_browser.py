"""Live mode in a real browser: Chromium's fake camera plays a clip of the synthetic world (made into .y4m with
imageio-ffmpeg's ffmpeg), the visitor asks a standing question on the Live tab and presses record, and the alert
appears in the conversation within two segments of the evidence, with its time; clicking it plays the replay, and
Ask now answers over what was seen."""

from __future__ import annotations

import os
import shutil

import imageio_ffmpeg
import numpy as np
import pytest
from appserver import load_app_model, serve

from tempo.live import LiveWorld
from tempo.times import clock

pytestmark = pytest.mark.browser
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SEED = 800_007  # in two-minute clips: an orange diamond from 8.85 s to 14.54 s
EVIDENCE = (8.85, 14.54)
QUESTION = "When does the orange diamond appear?"
CLIP_S = 24.0
SEGMENT = 4.0


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> str:
    """The stream's first CLIP_S seconds at 5 fps as raw YUV 4:2:0 (.y4m): what Chromium's fake camera plays."""
    path = tmp_path_factory.mktemp("camera") / "clip.y4m"
    frames = np.stack([frame for _, frame in LiveWorld(SEED, clip_s=120.0).frames(fps=5.0, until=CLIP_S)])
    writer = imageio_ffmpeg.write_frames(str(path), (512, 256), fps=5, codec="rawvideo", pix_fmt_out="yuv420p",
                                         macro_block_size=2, output_params=["-f", "yuv4mpegpipe"])
    writer.send(None)
    writer.send(frames)
    writer.close()
    return str(path)


@pytest.fixture(scope="module")
def page(fixtures, clip):
    if not os.path.isfile(CHROMIUM):
        pytest.fail("Debian's chromium is missing: `make browser` installs it")
    from playwright.sync_api import sync_playwright

    with serve(load_app_model(fixtures)) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--use-fake-device-for-media-stream",
            "--use-fake-ui-for-media-stream", f"--use-file-for-fake-video-capture={clip}"])
        context = browser.new_context(permissions=["camera"], viewport={"width": 1280, "height": 1000})
        opened = context.new_page()
        opened.goto(url)
        yield opened
        browser.close()


def test_a_standing_question_over_the_camera_alerts_within_two_segments_of_the_evidence(page):
    page.get_by_role("tab", name="Live").click()
    page.locator("#tempo-live-kind").get_by_text("Camera").click()
    page.locator("#tempo-live-question textarea").fill(QUESTION)
    page.locator("#tempo-live-camera").get_by_text("Click to Access Webcam").click()
    page.wait_for_function("() => (document.querySelector('#tempo-live-camera video')?.readyState ?? 0) >= 2",
                           timeout=30_000)
    record = page.locator("#tempo-live-camera button[aria-label='capture photo']")
    record.click()
    # The fake camera started with the webcam; the watch starts with the first frame after record.
    offset = page.evaluate("() => document.querySelector('#tempo-live-camera video').currentTime") % CLIP_S
    alert = page.locator("#tempo-live-chat .tempo-live-alert").first
    alert.wait_for(timeout=90_000)
    moment = float(alert.get_attribute("data-live-seconds"))
    start, end = EVIDENCE[0] - offset, EVIDENCE[1] - offset
    if start < -SEGMENT:  # the clip had passed its evidence when the watch began: its next loop is the one
        start, end = start + CLIP_S, end + CLIP_S
    assert start - SEGMENT - 1 <= moment <= end + 2 * SEGMENT + 1, (offset, moment)
    assert f"Alert at {clock(moment)}" in alert.inner_text()  # its time, in the stream
    assert "behind real time" in page.locator("#tempo-live-status").inner_text()
    points = page.evaluate("() => document.querySelector('#tempo-live-timeline .js-plotly-plot').data[0].x.length")
    assert points >= 2
    alert.click()
    page.wait_for_function("() => document.querySelector('#tempo-live-replay video')?.src", timeout=60_000)
    assert "the moment at" in page.locator("#tempo-live-replay").inner_text()
    page.locator("#tempo-live-ask").locator("input, textarea").first.fill(QUESTION)
    page.locator("#tempo-live-ask-button").click()
    page.locator("#tempo-live-chat .tempo-meta").get_by_text("of the stream").wait_for(timeout=60_000)
    page.locator("#tempo-live-stop").click()
    page.get_by_text("Stopped: the watch and everything it kept").wait_for(timeout=15_000)
