"""A real visitor: Debian's headless Chromium uploads a video, asks, and watches the app answer, offline."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from appserver import ROOT, decoding_processes, load_app_model, serve

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

    page.locator("#tempo-chat [data-turn='0'] .tempo-reply").wait_for(timeout=90_000)
    assert page.locator("#tempo-chat [data-turn='0'] .tempo-reply").inner_text().strip()
    page.get_by_text("Done in").wait_for(timeout=30_000)
    timeline = page.locator("#tempo-timeline .js-plotly-plot")
    assert timeline.locator(".barlayer .point").count() >= 1  # tokens per segment
    assert timeline.locator(".scatterlayer .trace").count() >= 1  # relevance curve
    page.locator("#tempo-gallery img").first.wait_for(timeout=30_000)
    assert page.locator("#tempo-gallery img").count() >= 1
    assert page.get_by_role("button", name="Turns · JSON").is_visible()

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


# ------------------------------------------------------------------------------------------------ analysis

@pytest.fixture(scope="module")
def analysed(app_url, browser):
    """A page that ran the first shipped example (a 2.5-minute needle question) to its answer."""
    entry = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))[0]
    page = browser.new_page(viewport={"width": 1440, "height": 1100})
    page.goto(app_url)
    page.get_by_text(entry["label"]).first.click()
    page.wait_for_function("() => document.querySelector('#tempo-preview video')?.src", timeout=30_000)
    page.get_by_role("button", name="Compress & answer").click()
    page.get_by_text("Done in").wait_for(timeout=120_000)
    page.locator("#tempo-filmstrip [data-segment]").first.wait_for(timeout=30_000)
    yield page, entry
    page.close()


def screenshot(page, name: str) -> None:
    """The analysis tabs, for the README, when $TEMPO_SCREENSHOT_DIR asks for them."""
    if os.environ.get("TEMPO_SCREENSHOT_DIR"):
        directory = Path(os.environ["TEMPO_SCREENSHOT_DIR"])
        directory.mkdir(parents=True, exist_ok=True)
        page.locator("#tempo-analysis").screenshot(path=str(directory / name))


def plot_data(page, selector: str) -> list:
    return page.evaluate(f"() => document.querySelector('{selector} .js-plotly-plot').data")


def test_an_example_shows_its_evidence_and_expected_answer(analysed):
    page, entry = analysed
    truth = page.locator("#tempo-truth .tempo-truth").inner_text()
    assert f"Expected {entry['expected']}" in truth and ("right" in truth or "wrong" in truth)
    shapes = page.evaluate("() => document.querySelector('#tempo-timeline .js-plotly-plot').layout.shapes")
    (start, end), = entry["evidence"]
    assert any(s.get("x0") == pytest.approx(start) and s.get("x1") == pytest.approx(end) for s in shapes)


def test_the_filmstrip_has_a_thumbnail_per_segment_bordered_by_its_tokens(analysed):
    from tempo.render.report import token_colour

    page, _ = analysed
    bars = next(trace for trace in plot_data(page, "#tempo-timeline") if trace["type"] == "bar")
    tokens = bars["y"]
    cells = page.locator("#tempo-filmstrip [data-segment]")
    assert cells.count() == len(tokens) == 38
    borders = cells.evaluate_all("cells => cells.map(c => getComputedStyle(c).borderTopColor)")
    assert borders == [token_colour(k, 4, 32) for k in tokens]
    assert len(set(borders)) > 2  # squeezed and kept segments look different


def test_clicking_a_segment_shows_its_frames(analysed):
    page, _ = analysed
    page.locator("#tempo-filmstrip [data-segment='30']").click()
    page.wait_for_function("() => document.querySelector('#tempo-segment h3')?.textContent === 'Segment 31'",
                           timeout=30_000)
    page.locator("#tempo-segment-frames img").nth(7).wait_for(timeout=30_000)
    assert page.locator("#tempo-segment-frames img").count() == 8
    assert "02:00–02:04" in page.locator("#tempo-segment").inner_text()
    bar = page.locator("#tempo-timeline .barlayer .point").nth(10)  # the timeline picks segments too
    box = bar.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] - 3)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] - 3)
    page.wait_for_function("() => document.querySelector('#tempo-segment h3')?.textContent === 'Segment 11'",
                           timeout=30_000)


def test_clicking_a_filmstrip_cell_or_a_time_in_the_chat_moves_the_player_there(analysed):
    page, _ = analysed
    for selector in ("#tempo-filmstrip [data-segment='30']", "#tempo-filmstrip [data-segment='5']",
                     "#tempo-chat .tempo-look >> nth=0", "#tempo-gallery .tempo-key >> nth=-1"):
        target = page.locator(selector)
        seconds = float(target.get_attribute("data-seconds"))
        target.click()
        page.wait_for_function(f"() => Math.abs(document.querySelector('#tempo-preview video').currentTime - "
                               f"{seconds}) < 1", timeout=5_000)


def test_three_turns_stay_in_the_chat_and_each_shows_its_own_run_again(app_url, browser):
    entry = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))[0]
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(app_url)
    page.get_by_text(entry["label"]).first.click()
    page.wait_for_function("() => document.querySelector('#tempo-preview video')?.src", timeout=30_000)
    budgets = {0: 1024, 1: 64, 2: 200}  # a different allocation each turn (ATA spends 316 of 1,024 here)
    tokens = {}
    for turn, budget in budgets.items():
        budget_box = page.get_by_label("number input for Visual token budget")
        if not budget_box.is_visible():
            page.get_by_text("Advanced settings").click()
        budget_box.fill(str(budget))
        budget_box.press("Enter")
        page.locator("#tempo-question textarea").fill(entry["question"] if turn != 1 else "What moves?")
        page.locator("#tempo-ask").click()
        page.locator(f"#tempo-chat [data-turn='{turn}']").wait_for(timeout=120_000)
        page.get_by_text("Done in").wait_for(timeout=30_000)
        tokens[turn] = next(t for t in plot_data(page, "#tempo-timeline") if t["type"] == "bar")["y"]
    assert len({tuple(t) for t in tokens.values()}) == 3
    assert page.locator("#tempo-chat [data-turn]").count() == 3
    for turn in (0, 2, 1):
        page.locator(f"#tempo-chat [data-turn='{turn}'] .tempo-meta").click()
        page.wait_for_function(f"() => document.querySelector('#tempo-chat .tempo-turn.selected')?.dataset.turn "
                               f"=== '{turn}'", timeout=10_000)
        page.wait_for_function("(want) => { const plot = document.querySelector('#tempo-timeline .js-plotly-plot');"
                               " const bars = plot && plot.data.find(t => t.type === 'bar');"
                               " return bars && JSON.stringify(bars.y) === JSON.stringify(want); }",
                               arg=tokens[turn], timeout=10_000)
    page.close()


def test_at_laptop_size_the_first_visit_fits_and_nothing_overlaps(app_url, browser, analysed):
    labelled = ["#tempo-video", "#tempo-question", "#tempo-ask", "#tempo-cancel"]
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(app_url)
    page.locator("#tempo-ask").wait_for()
    boxes = {selector: page.locator(selector).bounding_box() for selector in labelled}
    for selector, box in boxes.items():  # everything a first visit needs is on the first screen
        assert box and box["y"] >= 0 and box["y"] + box["height"] <= 720 and box["x"] + box["width"] <= 1280, selector
    done, _ = analysed  # and after a run, the result's parts do not cover each other
    done.set_viewport_size({"width": 1280, "height": 720})
    parts = ["#tempo-status", "#tempo-timeline", "#tempo-filmstrip", "#tempo-chat", "#tempo-stats", "#tempo-gallery"]
    placed = {selector: done.locator(selector).bounding_box() for selector in parts}
    for i, a in enumerate(parts):
        assert placed[a]["x"] >= 0 and placed[a]["x"] + placed[a]["width"] <= 1280, a
        for b in parts[i + 1:]:
            first, second = placed[a], placed[b]
            apart = (first["x"] + first["width"] <= second["x"] + 1 or second["x"] + second["width"] <= first["x"] + 1
                     or first["y"] + first["height"] <= second["y"] + 1
                     or second["y"] + second["height"] <= first["y"] + 1)
            assert apart, f"{a} overlaps {b}"
    page.close()


def test_cancel_stops_a_long_run_and_its_decoder(app_url, browser):
    """The 45-minute example, cancelled from the page once its first segments are in: the page says so, its
    decoding process goes away, and the status stays cancelled."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(app_url)
    page.locator("#tempo-video input[type=file]").set_input_files(str(ROOT / "examples" /
                                                                       "synthetic-900004-45min.mp4"))
    page.locator("#tempo-question textarea").fill("What moves?")
    page.locator("#tempo-ask").click()
    page.get_by_text("Compressing segment").wait_for(timeout=60_000)
    page.locator("#tempo-cancel").click()
    page.get_by_text("Cancelled").wait_for(timeout=5_000)
    deadline = time.monotonic() + 60  # a bound on waiting, not a measurement: the run is stopped either way
    while decoding_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not decoding_processes(), "the run's decoding process outlived the cancel"
    assert page.get_by_text("Cancelled").is_visible()
    page.close()


def test_compare_shows_two_timelines_and_two_answers(analysed):
    page, _ = analysed
    page.get_by_role("tab", name="Compare").click()
    page.get_by_role("button", name="Compare", exact=True).click()
    page.locator("#tempo-compare-summary .tempo-compare").wait_for(timeout=60_000)
    for side in ("first", "second"):
        page.locator(f"#tempo-compare-{side} .js-plotly-plot .barlayer .point").first.wait_for(timeout=30_000)
        assert page.locator(f"#tempo-compare-{side}-answer textarea").input_value().strip()
    first = next(t for t in plot_data(page, "#tempo-compare-first") if t["type"] == "bar")["y"]
    second = next(t for t in plot_data(page, "#tempo-compare-second") if t["type"] == "bar")["y"]
    assert len(set(second)) == 1 and first != second  # ATA against a uniform share
    assert "uniform" in page.locator("#tempo-compare-summary").inner_text()
    screenshot(page, "compare.png")


def test_the_sweep_draws_a_heatmap_with_one_row_per_budget(analysed):
    page, _ = analysed
    page.get_by_role("tab", name="Budget sweep").click()
    page.get_by_role("button", name="Run the sweep").click()
    page.locator("#tempo-sweep .js-plotly-plot .hm").first.wait_for(timeout=60_000)
    heatmap, = plot_data(page, "#tempo-sweep")
    assert heatmap["type"] == "heatmap" and len(heatmap["y"]) == len(heatmap["z"]) == 6
    assert all(len(row) == 38 for row in heatmap["z"])
    page.wait_for_function("() => document.querySelectorAll('#tempo-sweep-answers [role=row]').length === 7",
                           timeout=30_000)  # the header, then one answer per budget
    screenshot(page, "sweep.png")


def test_the_html_report_opens_offline(app_url, browser, tmp_path, fixtures):
    from gradio_client import Client, handle_file

    entry = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))[0]
    report = Client(app_url, verbose=False).predict(handle_file(str(ROOT / "examples" / entry["video"])),
                                                    entry["question"], max_new_tokens=8, api_name="/report")
    context = browser.new_context(offline=True)
    page = context.new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(Path(report).as_uri())
    page.locator(".js-plotly-plot .barlayer .point").first.wait_for(timeout=30_000)
    assert page.locator(".frames img").count() >= 1
    assert page.evaluate("() => [...document.images].every(image => image.complete && image.naturalWidth > 0)")
    assert [url for url in requests if not url.startswith(("file:", "data:"))] == []
    context.close()


def test_looking_closer_at_the_first_turns_moment_is_a_third_turn_over_the_window(app_url, browser, tmp_path):
    """Two questions about the 10-minute example, then a click on where the first one looked and "Look closer": a
    third turn whose timeline spans the 512 s window around that moment, whose times seek inside it, and a report
    that holds all three."""
    entry = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))[2]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(app_url)
    page.get_by_text(entry["label"]).first.click()
    page.wait_for_function("() => document.querySelector('#tempo-preview video')?.src", timeout=30_000)
    for turn, question in enumerate((entry["question"], "What moves?")):
        page.locator("#tempo-question textarea").fill(question)
        page.locator("#tempo-ask").click()
        page.locator(f"#tempo-chat [data-turn='{turn}']").wait_for(timeout=120_000)
        page.get_by_text("Done in").wait_for(timeout=30_000)
    looked = page.locator("#tempo-chat [data-turn='0'] .tempo-look").first
    moment = float(looked.get_attribute("data-seconds"))
    looked.click()
    page.locator("#tempo-question textarea").fill(entry["question"])
    page.locator("#tempo-closer").click()
    page.locator("#tempo-chat [data-turn='2']").wait_for(timeout=120_000)
    page.get_by_text("Done in").wait_for(timeout=30_000)
    start, end = page.evaluate("() => document.querySelector('#tempo-timeline .js-plotly-plot').layout.xaxis.range")
    assert end - start == pytest.approx(512, abs=0.2) and start <= moment <= end
    assert "over" in page.locator("#tempo-chat [data-turn='2'] .tempo-meta").inner_text()
    seconds = [float(s) for s in page.locator("#tempo-chat [data-turn='2'] [data-seconds]").evaluate_all(
        "nodes => nodes.map(n => n.dataset.seconds)")]
    assert seconds and all(start - 1 <= s <= end + 1 for s in seconds)
    with page.expect_download(timeout=30_000) as download:
        page.get_by_role("button", name="Report · HTML").click()
    report = Path(download.value.path()).read_text(encoding="utf-8")
    assert report.count("class='question'") == 3
    page.close()


def test_zoom_answers_a_when_question_in_one_turn_that_shows_both_passes(app_url, browser):
    """Zoom on, "when" on the 45-minute example: one turn whose timeline shows the whole video's relevance with the
    window shaded above the window's run, and whose answer's times seek inside that window."""
    entry = next(e for e in json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))
                 if e["video"].endswith("45min.mp4") and e["family"] == "grounding")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(app_url)
    page.get_by_text(entry["label"]).first.click()
    page.wait_for_function("() => document.querySelector('#tempo-preview video')?.src", timeout=30_000)
    if not page.get_by_text("auto ('when'").is_visible():
        page.get_by_text("Advanced settings").click()
    page.get_by_text("auto ('when'").click()
    page.locator("#tempo-ask").click()
    page.locator("#tempo-chat [data-turn='0']").wait_for(timeout=240_000)
    page.get_by_text("Done in").wait_for(timeout=30_000)
    layout = page.evaluate("() => document.querySelector('#tempo-timeline .js-plotly-plot').layout")
    start, end = layout["xaxis"]["range"]  # the window's run
    assert end - start == pytest.approx(512, abs=0.2)
    assert layout["xaxis3"]["range"] == pytest.approx([0, 2700], abs=1)  # the whole video's pass above it
    shaded = [s for s in layout["shapes"] if s.get("xref") == "x3" and s.get("type") == "rect"]
    assert any(s["x0"] == pytest.approx(start, abs=0.2) and s["x1"] == pytest.approx(end, abs=0.2) for s in shaded)
    assert page.locator("#tempo-chat .tempo-turn").count() == 1
    assert ("zoomed in, as the question asks when"
            in page.locator("#tempo-chat [data-turn='0'] .tempo-meta").inner_text())
    seconds = [float(s) for s in page.locator("#tempo-chat [data-turn='0'] .tempo-reply [data-seconds]").evaluate_all(
        "nodes => nodes.map(n => n.dataset.seconds)")]
    assert seconds and all(start <= s <= end for s in seconds)
    page.close()


def test_a_moment_s_button_plays_it_and_its_clip_downloads_as_long_as_it(app_url, browser):
    """The 2.5-minute example's "what colour is the triangle?": the second moment's button seeks the player to it and
    plays it to its end; the timeline shades it; its clip downloads, as long as the moment to one frame of the
    source."""
    import av

    entry = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))[0]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(app_url)
    page.locator("#tempo-video input[type=file]").set_input_files(str(ROOT / "examples" / entry["video"]))
    page.locator("#tempo-question textarea").fill(entry["question"])
    page.wait_for_function("() => document.querySelector('#tempo-preview video')?.src", timeout=120_000)
    page.locator("#tempo-ask").click()
    page.locator("#tempo-chat [data-turn='0']").wait_for(timeout=420_000)
    page.get_by_text("Done in").wait_for(timeout=60_000)
    buttons = page.locator("#tempo-moments .tempo-moment")
    assert buttons.count() >= 2, "this example's run should find at least two moments"
    second = buttons.nth(1)
    start, end = float(second.get_attribute("data-seconds")), float(second.get_attribute("data-end"))
    assert "2" == second.locator(".rank").inner_text().strip()
    shapes = page.evaluate("() => document.querySelector('#tempo-timeline .js-plotly-plot').layout.shapes")
    # shaded on the timeline (the button's times are rounded to the hundredth)
    assert any(s.get("x0", 0) <= start + 0.01 and end - 0.01 <= s.get("x1", 0) for s in shapes), (start, end, shapes)

    second.click()
    page.wait_for_function("([start, end]) => { const v = document.querySelector('#tempo-preview video');"
                           " return v && !v.paused && v.currentTime >= start - 0.3 && v.currentTime < end; }",
                           arg=[start, end], timeout=10_000)
    page.wait_for_function("(end) => { const v = document.querySelector('#tempo-preview video');"
                           " return v.paused && Math.abs(v.currentTime - end) < 0.5; }",
                           arg=end, timeout=(end - start + 10) * 1000)  # it plays to the moment's end, and stops

    clip = page.locator("#tempo-clip")
    clip.wait_for(state="visible", timeout=60_000)
    assert clip.inner_text().startswith("Clip 2")
    with page.expect_download(timeout=30_000) as download:
        clip.click()
    with av.open(download.value.path()) as taken:
        stream = taken.streams.video[0]
        frame = 1 / float(stream.average_rate)
        seconds = taken.duration / av.time_base
    assert seconds == pytest.approx(end - start, abs=frame + 0.01)
    page.close()
