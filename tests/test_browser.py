"""The playground in a real headless Chromium (Debian's, which the README's test command installs):
failed and typed model picks, Stop mid-run, the first screen after Run, a full run, its hover
cards, tree view, replay and copied results. Screenshots go to out/artifacts/. Without Chromium
these tests fail: a missing browser must not pass as a skip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import NO_NETWORK, PICKER, load_presets
from tests.test_ui import ROOT, launched_app

pytestmark = pytest.mark.slow  # a browser and the embedded pair
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "out" / "artifacts"
STATUS = "(() => document.querySelector('#status textarea').value)"
SPANS = "(pane => document.querySelectorAll(`#${pane}-pane pre span.tk`).length)"
RACE_PLOT = "document.querySelector('#race-plot .js-plotly-plot')"
CYCLE_BOX = "#tree-cycle input, #tree-cycle textarea"


@pytest.fixture(scope="module")
def browser_url(tmp_path_factory):
    if not CHROMIUM.exists():
        pytest.fail(f"the browser tests need Chromium at {CHROMIUM}: apt-get install -y chromium", pytrace=False)
    from playwright.sync_api import sync_playwright

    with launched_app(tmp_path_factory.mktemp("browser")) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                    args=["--no-sandbox", "--disable-dev-shm-usage"])
        yield browser, url
        browser.close()


def open_page(browser, url, width=1400, height=1000):
    context = browser.new_context(viewport={"width": width, "height": height},
                                  permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.goto(url, wait_until="load")  # never "networkidle": a session's heartbeat stays open
    page.wait_for_selector("#run-btn")
    return page


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def wait_status(page, *prefixes: str, timeout: int = 240_000) -> str:
    starts = " || ".join(f"{STATUS}().startsWith({json.dumps(p)})" for p in prefixes)
    page.wait_for_function(f"() => {starts}", timeout=timeout)
    return page.evaluate(f"{STATUS}()")


def click_run(page) -> None:
    for _ in range(3):  # right after a Stop the first click can land before Gradio is ready again
        page.click("#run-btn")
        try:
            page.wait_for_function(f"() => !{STATUS}().startsWith('■')", timeout=10_000)
            return
        except Exception:
            continue


def test_failed_and_typed_picks(browser_url):
    page = open_page(*browser_url)
    embedded = page.input_value("#model input")
    # a Hub pair without network (the app runs with HF_HUB_OFFLINE): one load, one toast, a message
    # that names the pair and says what to do, and the picker back on the pair still loaded
    for hub in [label for label in PICKER if "(Hub)" in label][:2]:
        page.click("#model input")
        page.click(f"ul[role=listbox] li:has-text({json.dumps(hub)})")
        said = f"{' + '.join(PICKER[hub])} did not load: {NO_NETWORK}"
        page.wait_for_function(f"() => {STATUS}() === {json.dumps('⚠ ' + said)}", timeout=60_000)
        page.wait_for_function(f"() => document.querySelector('#model input').value === {json.dumps(embedded)}")
        page.wait_for_timeout(2000)  # a second load of the same pick would have toasted by now
        # one toast, the newest: an older warning is replaced, not piled up
        assert page.locator(".toast-message-item:visible").all_inner_texts() == [said]
    # an id typed into the picker is the custom target: it is used, or a message names it
    page.fill("#model input", "org/Unknown-Model-1B")
    page.press("#model input", "Enter")
    page.wait_for_function(f"() => {STATUS}().includes('No DFlash drafter is known for org/Unknown-Model-1B')")
    assert page.input_value("#custom-target textarea, #custom-target input") == "org/Unknown-Model-1B"


def test_first_screen_and_stop_mid_run(browser_url):
    # a laptop's screen: after Run the status and the panes' first lines show without scrolling
    page = open_page(*browser_url, width=1280, height=800)
    assert page.input_value(CYCLE_BOX) == ""  # no "0" before any run
    set_number(page, "max-tokens", 1000)
    page.click("#run-btn")
    wait_status(page, "▶ Running", timeout=120_000)
    for elem in ("#status", "#target-pane", "#dflash-pane"):
        box = page.locator(elem).bounding_box()
        assert box and 0 <= box["y"] < 800 - (box["height"] if elem == "#status" else 40), (elem, box)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "playground-first-screen.png"))
    # Stop by a plain click while tokens stream: the page must not be too busy rendering to take it
    page.wait_for_function(f"() => {SPANS}('target') > 3", timeout=120_000)
    page.click("#stop-btn", timeout=60_000)
    wait_status(page, "■ Stopped", timeout=60_000)
    head = page.inner_text("#target-pane .pane-head")
    assert "stopped" in head and "generating" not in head and "not run" in page.inner_text("#dflash-pane .pane-head")
    assert "Stopped before" in page.inner_text("#verdict") and "tok/s" in page.inner_text("#metrics")
    page.screenshot(path=str(ARTIFACTS / "playground-stopped.png"), full_page=True)


def test_run_replay_and_copy(browser_url):
    page = open_page(*browser_url)
    page.click("#preset-code")
    page.wait_for_function(f"() => document.querySelector('#prompt textarea').value === "
                           f"{json.dumps(load_presets()['code'])}")
    set_number(page, "max-tokens", 16)
    page.click("#more-settings button")  # the folded settings
    set_number(page, "block-size", 8)
    click_run(page)
    assert wait_status(page, "✓", "⚠").startswith("✓ Done"), page.evaluate(f"{STATUS}()")
    check_live_views(page)
    # the default verifies trees: the drafted tree of the most telling cycle is drawn
    page.wait_for_function("() => document.querySelector('#tree-plot .js-plotly-plot')?.data"
                           "?.some(t => t.name === 'accepted draft' || t.name === 'rejected draft')")
    page.screenshot(path=str(ARTIFACTS / "playground.png"), full_page=True)
    # a cycle that does not exist is said to, not drawn blank
    page.fill(CYCLE_BOX, "9999")
    page.click("#tree-btn")
    page.wait_for_function("() => document.querySelector('#tree-plot .js-plotly-plot')?.layout?.annotations"
                           "?.some(a => a.text.startsWith('There is no cycle 9999'))")

    live = {pane: page.inner_html(f"#{pane}-pane .pane") for pane in ("target", "dflash")}
    final = {pane: page.evaluate(f"{SPANS}('{pane}')") for pane in live}
    # the recorded runs (the race chart's lines: seconds, tokens): when each held part of its text
    lines = page.evaluate(f"() => {RACE_PLOT}.data.filter(t => t.mode === 'lines').map(t => [t.x, t.y])")
    partial = [(next(x for x, y in zip(xs, ys) if y > 1), xs[-1]) for xs, ys in lines]
    (t_from, t_end), (d_from, d_end) = partial

    page.get_by_label("0.25×").check()
    # sample both panes through the replay (every 10 ms, in the page): what a viewer saw
    page.evaluate(f"() => {{ window.seen = []; window.sampler = setInterval(() => "
                  f"window.seen.push([{SPANS}('target'), {SPANS}('dflash')]), 10); }}")
    page.click("#replay-btn")
    page.wait_for_function(" || ".join(f"({SPANS}('{p}') > 1 && {SPANS}('{p}') < {n})" for p, n in final.items()))
    page.screenshot(path=str(ARTIFACTS / "playground-replay.png"), full_page=True)
    assert page.evaluate(f"() => {RACE_PLOT}.layout.shapes.length") == 1  # the clock's cursor
    status = wait_status(page, "✓ Replayed", "⚠", "■", timeout=60_000)
    seen = page.evaluate("() => { clearInterval(window.sampler); return window.seen; }")
    seen = seen[next(i for i, s in enumerate(seen) if s != [final["target"], final["dflash"]]):]  # from its start
    why = f"{status}; recorded partial windows {partial}; seen {seen[::10]}"
    assert status.startswith("✓ Replayed"), why
    assert {pane: page.inner_html(f"#{pane}-pane .pane") for pane in live} == live, why  # the live run's end
    for i, pane in enumerate(live):  # each pane grows, never shrinks, and ends where the run did
        counts = [s[i] for s in seen]
        assert counts == sorted(counts) and counts[-1] == final[pane], why
        assert any(1 < n < final[pane] for n in counts), why
    # one clock: where the runs were partial at the same recorded time, the panes were together
    if max(t_from, d_from) + 0.05 < min(t_end, d_end):
        assert any(1 < t < final["target"] and 1 < d < final["dflash"] for t, d in seen), why
    if d_end + 0.1 < t_end:  # DFlash finished first in the live run, so it does in the replay
        assert any(d == final["dflash"] and t < final["target"] for t, d in seen), why

    page.click("#copy-btn")
    page.wait_for_function("() => document.querySelector('#results-md textarea')?.value.includes('| DFlash |')")
    markdown = page.input_value("#results-md textarea")
    assert "tok/s" in markdown and "Settings: max_tokens 16" in markdown and "tree auto" in markdown
    page.wait_for_function("async () => (await navigator.clipboard.readText()).includes('| DFlash |')")


def check_live_views(page) -> None:
    """A finished 16-token run: coloured tokens, hover text at corrections, the verdict, four charts."""
    kinds = page.evaluate("""() => [...document.querySelectorAll('#dflash-pane pre span.tk')]
                             .map(s => s.className.split('tk-')[1])""")
    assert len(kinds) == 16 and set(kinds) <= {"first", "draft", "correction", "bonus"} and "first" in kinds
    colours = page.evaluate("""() => [...document.querySelectorAll('#dflash-pane pre span.tk')]
                               .map(s => getComputedStyle(s).backgroundColor)""")
    assert all(c not in ("rgba(0, 0, 0, 0)", "transparent") for c in colours)
    if "correction" in kinds:  # a hover card (CSS), also on focus for touch screens, without Python quotes
        card = "(() => getComputedStyle(document.querySelector('#dflash-pane pre .tk-correction'), '::after'))"
        assert page.evaluate(f"() => {card}().content") in ("none", "normal", "")
        page.hover("#dflash-pane pre .tk-correction")
        text = page.evaluate(f"() => {card}().content")
        assert text.startswith('"drafter proposed “') and "'" not in text and "target chose" in text
        assert page.evaluate(f"() => {card}().display") != "none"
        page.screenshot(path=str(ARTIFACTS / "playground-hover-card.png"))
        page.mouse.move(0, 0)
        page.focus("#dflash-pane pre .tk-correction")
        assert page.evaluate(f"() => {card}().content") == text
    assert "Outputs identical" in page.inner_text("#verdict")
    for plot in ("race-plot", "cycles-plot", "hist-plot", "pos-plot"):
        assert page.evaluate(f"() => document.querySelectorAll('#{plot} .js-plotly-plot svg.main-svg').length") > 0
    assert page.evaluate("() => document.querySelectorAll('#race-plot .scatterlayer .trace').length") >= 2
