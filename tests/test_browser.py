"""The playground in a real headless Chromium (Debian's: `apt-get install -y chromium`): Stop, then a
full run with coloured tokens and rendered charts; a screenshot goes to out/artifacts/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import load_presets
from tests.test_ui import ROOT, launched_app

CHROMIUM = Path("/usr/bin/chromium")
SHOT = ROOT / "out" / "artifacts" / "playground.png"
STATUS = "() => document.querySelector('#status textarea').value"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian chromium: apt-get install -y chromium")


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def test_playground_in_browser(tmp_path):
    from playwright.sync_api import sync_playwright

    with launched_app(tmp_path) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url, wait_until="networkidle")

        # Stop: a long run stops (the button is clicked by position: UI-NOTES) and the next run works
        set_number(page, "max-tokens", 1000)
        page.click("#run-btn")
        page.wait_for_function("() => document.querySelectorAll('#target-pane pre span.tk').length > 3",
                               timeout=120_000)
        box = page.locator("#stop-btn").bounding_box()
        page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        page.wait_for_function(f"() => ({STATUS})().startsWith('■')", timeout=30_000)

        page.click("#preset-code")
        page.wait_for_function(f"() => document.querySelector('#prompt textarea').value === {json.dumps(load_presets()['code'])}")
        set_number(page, "max-tokens", 16)
        set_number(page, "block-size", 8)
        for _ in range(3):  # right after a Stop the first click can land before Gradio is ready again
            page.click("#run-btn")
            try:
                page.wait_for_function(f"() => !({STATUS})().startsWith('■')", timeout=10_000)
                break
            except Exception:
                continue
        page.wait_for_function(f"() => ({STATUS})().startsWith('✓') || ({STATUS})().startsWith('⚠')",
                               timeout=240_000)
        assert page.evaluate(STATUS).startswith("✓ Done"), page.evaluate(STATUS)

        kinds = page.evaluate("""() => [...document.querySelectorAll('#dflash-pane pre span.tk')]
                                 .map(s => s.className.split('tk-')[1])""")
        assert len(kinds) == 16 and set(kinds) <= {"first", "draft", "correction", "bonus"} and "first" in kinds
        colours = page.evaluate("""() => [...document.querySelectorAll('#dflash-pane pre span.tk')]
                                   .map(s => getComputedStyle(s).backgroundColor)""")
        assert all(c not in ("rgba(0, 0, 0, 0)", "transparent") for c in colours)
        if "correction" in kinds:
            assert "drafter proposed" in page.get_attribute("#dflash-pane pre span.tk-correction", "title")
        assert "Outputs identical" in page.inner_text("#verdict")
        for plot in ("race-plot", "cycles-plot", "hist-plot", "pos-plot"):
            assert page.evaluate(f"() => document.querySelectorAll('#{plot} .js-plotly-plot svg.main-svg').length") > 0
        assert page.evaluate("() => document.querySelectorAll('#race-plot .scatterlayer .trace').length") >= 2

        SHOT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOT), full_page=True)
        browser.close()
