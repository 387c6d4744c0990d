"""`python -m tempo figures`: the paper's allocation figures from a batch's results, checked against numbers worked
out by hand, and written as PNG, offline HTML and JSON."""

from __future__ import annotations

import io
import json
import math
import shutil

import pytest

from tempo import cli
from tempo.render import figures


def result(job_id: str, tokens: list[int], budget: int, family: str | None = None, k_max: int = 8,
           k_min: int = 2) -> dict:
    line = {"id": job_id, "video": f"{job_id}.mp4", "question": "?", "answer": "a",
            "segments": [{"index": i, "start": 4.0 * i, "end": 4.0 * (i + 1), "relevance": 0.5, "tokens": k}
                         for i, k in enumerate(tokens)],
            "budget": budget, "tokens_used": sum(tokens), "k_max": k_max, "settings": {"k_min": k_min}}
    return line | ({"family": family} if family else {})


SMALL = [result("needle", [2, 2, 8, 2], 16, "needle"),  # one segment kept, the rest at k_min
         result("global", [4, 4, 4, 4], 16, "global"),  # an even spread
         result("long", [2, 2, 2, 2, 2, 2, 4, 8], 16, "needle")]


def test_the_numbers_match_a_hand_computation():
    numbers = figures.numbers(SMALL)
    assert numbers["jobs"] == 3 and numbers["k_max"] == 8 and numbers["split_by"] == "family"
    needle, spread = numbers["histogram"]["needle"], numbers["histogram"]["global"]
    assert needle["segments"] == 12 and spread["segments"] == 4
    assert needle["share"][2] == pytest.approx(9 / 12) and needle["share"][8] == pytest.approx(2 / 12)
    assert needle["share"][4] == pytest.approx(1 / 12) and spread["share"][4] == 1.0
    utilisation = numbers["utilisation"]["16"]
    assert utilisation["capacity"] == pytest.approx(3 * 16 / 16)  # 3 jobs x budget 16 / 16 segments
    by_id = {job["id"]: job for job in utilisation["jobs"]}
    assert by_id["needle"]["tokens_per_segment"] == pytest.approx(14 / 4) and by_id["needle"]["limit"] == 4.0
    assert by_id["long"]["tokens_per_segment"] == pytest.approx(24 / 8) and by_id["long"]["limit"] == 2.0
    assert utilisation["quartiles"] == pytest.approx([3.25, 3.5, 3.75])  # of 3, 3.5, 4
    shapes = {job["id"]: job for job in numbers["allocation_shape"]}
    assert shapes["needle"]["at_k_min"] == 0.75 and shapes["global"]["at_k_min"] == 0.0
    assert shapes["global"]["entropy"] == pytest.approx(1.0)
    p = [2 / 14, 2 / 14, 8 / 14, 2 / 14]
    assert shapes["needle"]["entropy"] == pytest.approx(-sum(x * math.log(x) for x in p) / math.log(4))


def test_the_split_follows_what_the_jobs_carry():
    plain = [{k: v for k, v in r.items() if k != "family"} for r in SMALL]
    assert figures.numbers(plain)["split_by"] is None and list(figures.numbers(plain)["histogram"]) == ["all"]
    mixed = plain + [result("big", [8, 8, 2, 2], 32)]
    assert figures.numbers(mixed)["split_by"] == "budget"
    assert set(figures.numbers(mixed)["utilisation"]) == {"16", "32"}
    assert figures.numbers(SMALL, "none")["split_by"] is None


@pytest.mark.slow
def test_figures_of_twenty_jobs_as_png_html_and_json(tmp_path):
    shutil.which("chromium") or pytest.fail("kaleido draws PNGs with Chromium: `make browser` installs it")
    lines = [result(f"job-{i}", [2 + (i + j) % 7 for j in range(4 + i % 5)], 24 + 8 * (i % 2),
                    "needle" if i % 2 else "global") for i in range(20)]
    lines.insert(3, {"id": "failed", "error": "not a video"})
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(["figures", str(results), "--out", str(tmp_path / "figures")], out=out, err=err)
    assert code == 0, err.getvalue()
    written = tmp_path / "figures"
    for name in figures.NAMES:
        assert (written / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    numbers = json.loads((written / "figures.json").read_text())
    assert numbers["jobs"] == 20 and numbers == json.loads(json.dumps(figures.numbers(figures.read_results(results))))
    assert_open_offline([written / f"{name}.html" for name in figures.NAMES])


def assert_open_offline(pages) -> None:
    """Each page draws its figure in Chromium with the network off, and asks for nothing beyond itself."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update"]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=args)
        context = browser.new_context(offline=True)
        for page_file in pages:
            page = context.new_page()
            requests: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            page.goto(page_file.as_uri())
            page.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=30_000)
            assert [url for url in requests if not url.startswith(("file:", "data:"))] == [], page_file.name
            page.close()
        browser.close()


def test_results_without_answers_are_refused_clearly(tmp_path):
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"id": "a", "error": "no"}) + "\n")
    err = io.StringIO()
    assert cli.main(["figures", str(results), "--out", str(tmp_path)], out=io.StringIO(), err=err) == 2
    assert err.getvalue().strip() == "error: results.jsonl holds no answered jobs."
