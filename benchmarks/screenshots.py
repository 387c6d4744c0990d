"""The README's screenshots (and the ones attached to issue notes): the page at 1280×720 and 1920×1080 in Debian's
headless Chromium, first empty, then after two of the 10-minute video's examples (each graded: it stops if one is
wrong), then its Compare and Budget sweep tabs. Starts `app.py` on a free loopback port (embedded model unless
$TEMPO_MODEL says otherwise).

    python -m benchmarks.screenshots [--out shots/]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.app_first_segment import ROOT, local_app

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]
SIZES = ((1280, 720), (1920, 1080))
TURNS = ("10 min · global", "10 min · grounding")  # graded examples on one video; the second zooms in, as "when" asks


def shoot(browser, url: str, width: int, height: int, out: Path) -> None:
    entries = json.loads((ROOT / "examples" / "examples.json").read_text(encoding="utf-8"))
    examples = [next(e for e in entries if e["label"].startswith(start)) for start in TURNS]
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(url)
    page.locator("#tempo-ask").wait_for()
    page.screenshot(path=str(out / f"first-{width}.png"))
    page.get_by_text(examples[0]["label"]).first.click()
    page.wait_for_function("() => document.querySelector('#tempo-preview video')?.src", timeout=30_000)
    for turn, example in enumerate(examples):
        page.locator("#tempo-question textarea").fill(example["question"])
        page.locator("#tempo-ask").click()
        reply = page.locator(f"#tempo-chat [data-turn='{turn}']")
        reply.wait_for(timeout=120_000)
        if not reply.locator(".tempo-verdict.right").count():
            raise SystemExit(f"{example['label']!r} was answered wrong ({reply.inner_text()[:200]!r}): the "
                             f"screenshot would show a wrong answer; pick examples this model gets right")
    page.screenshot(path=str(out / f"run-{width}.png"), full_page=True)
    page.get_by_role("tab", name="Compare").click()
    page.get_by_role("button", name="Compare", exact=True).click()
    page.locator("#tempo-compare-summary .tempo-compare").wait_for(timeout=60_000)
    page.locator("#tempo-analysis").screenshot(path=str(out / f"compare-{width}.png"))
    page.get_by_role("tab", name="Budget sweep").click()
    page.get_by_role("button", name="Run the sweep").click()
    page.locator("#tempo-sweep .js-plotly-plot .hm").first.wait_for(timeout=60_000)
    page.locator("#tempo-analysis").screenshot(path=str(out / f"sweep-{width}.png"))
    page.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("shots"), help="where the PNGs go (default shots/)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with local_app() as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        for width, height in SIZES:
            shoot(browser, url, width, height, args.out)
        browser.close()
    print(f"wrote {len(SIZES) * 4} screenshots to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
