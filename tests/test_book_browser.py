"""The built book as a reader's browser shows it: every page opened in headless Chromium.

On every page of ``_build/html`` (``make book``; ``SIGPROP_BOOK_HTML`` points elsewhere), at 1280 px:

* no MathJax error (``mjx-merror``: "Math input error", an unknown macro) and no formula left as raw TeX;
  no raw Markdown or TeX printed as text (``|---|``, ``$W_{QK}$`` outside a formula);
* no JavaScript error: uncaught exceptions, ``console.error`` and the browser's error log (a file that
  does not load);
* every solution and every proof folded (sphinx-togglebutton ran to the end of the page);
* every figure numbered and captioned, and no image in a cell output outside a figure;
* no table whose columns are hidden: a table wider than the column scrolls inside its box, and the box
  shows the scroll hint of ``book/_static/sigprop.js``; no code line cut at the column edge; nothing
  wider than the window.

Skipped, with the reason, where no Chromium is installed (``apt-get install chromium``; ``.ci/run`` does)
or no site is built. The browser is driven through the DevTools protocol over a pipe (``tests/_cdp.py``):
nothing is fetched from the network (remote images, such as the Colab badges, fail to load and are
ignored: tests/test_book_offline.py rules on them). Pages load ``SIGPROP_BROWSER_TABS`` at a time (default:
the number of CPUs, at most 4). Measured: 44 pages in 209 s with 2 tabs on 2 cores beside a load average
of 14-17 (MathJax typesetting dominates); ``SIGPROP_BROWSER_REPORT=path.json`` writes the per-page
findings and times.
"""
from __future__ import annotations

import json
import os
import pathlib
import time

import pytest

from _cdp import Browser, BrowserError, find_chromium

ROOT = pathlib.Path(__file__).resolve().parents[1]
HTML = pathlib.Path(os.environ.get("SIGPROP_BOOK_HTML", ROOT / "_build" / "html"))
WIDTH = 1280
#: pages loaded at once (SIGPROP_BROWSER_TABS; one renderer process each)
TABS = int(os.environ.get("SIGPROP_BROWSER_TABS", min(4, os.cpu_count() or 1)))

# Wait until the page is what a reader sees: loaded, MathJax done (it loads asynchronously), two frames.
SETTLE_JS = r"""
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const t0 = performance.now();
  const wantsMath = !!document.querySelector('script[src*="mathjax"]') && !!document.querySelector('.math');
  while (wantsMath && !(window.MathJax && MathJax.startup && MathJax.startup.promise)
         && performance.now() - t0 < 30000) await sleep(50);
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) await MathJax.startup.promise;
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  await sleep(100);  // ResizeObservers (scroll hints) run after layout
  return true;
})()
"""

CHECK_JS = (pathlib.Path(__file__).with_name("book_browser_checks.js")).read_text(encoding="utf-8")


def _pages() -> list[pathlib.Path]:
    """The site's pages: not the theme's files, not a redirect (index.html forwards to the root page)."""
    skip = {"_static", "_sources", "_images", "_downloads"}
    pages = (p for p in HTML.rglob("*.html") if not skip & set(p.relative_to(HTML).parts))
    return sorted(p for p in pages if 'http-equiv="refresh"' not in p.read_text(errors="replace")[:2000].lower())


@pytest.fixture(scope="module")
def report():
    """Open every page once; {page: findings} with each page's console errors and time."""
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium (apt-get install chromium, or set SIGPROP_CHROMIUM): the built book is not "
                    "checked in a browser")
    if not (HTML / "index.html").is_file():
        pytest.skip(f"no built book at {HTML} (run `make book`): it is not checked in a browser")
    results, start, pages = {}, time.monotonic(), _pages()
    with Browser(chromium, width=WIDTH) as browser:
        # TABS pages load at once (each tab renders in its own process), then are checked in turn
        for first in range(0, len(pages), TABS):
            t0, batch = time.monotonic(), pages[first:first + TABS]
            tabs = [browser.start(page.as_uri()) for page in batch]
            for page, tab in zip(batch, tabs):
                try:
                    tab.settle(SETTLE_JS)
                    found = tab.evaluate(CHECK_JS)
                    found["console"] = tab.console_errors()
                except BrowserError as exc:
                    found = {"console": [f"the page could not be checked: {exc}"]}
                finally:
                    tab.close()
                found["seconds"] = round(time.monotonic() - t0, 2)  # since its batch started
                results[str(page.relative_to(HTML))] = found
    out = os.environ.get("SIGPROP_BROWSER_REPORT")
    if out:
        pathlib.Path(out).write_text(json.dumps({"browser": browser.version, "seconds": time.monotonic() - start,
                                                 "pages": results}, indent=1))
    return results


def _failures(report, key):
    return {page: found[key] for page, found in report.items() if found.get(key)}


def _message(what, failures):
    lines = [f"{page}: {item}" for page, items in sorted(failures.items()) for item in items[:8]]
    return f"{what} on {len(failures)} page(s):\n" + "\n".join(lines)


def test_every_page_was_opened(report):
    assert len(report) >= 20, f"only {len(report)} pages in {HTML}"
    assert "book/intro.html" in report, sorted(report)[:5]


def test_no_javascript_errors(report):
    bad = _failures(report, "console")
    assert not bad, _message("JavaScript errors", bad)


def test_no_math_errors(report):
    bad = _failures(report, "math_errors")
    assert not bad, _message("MathJax errors (a control character from \\a or \\b? an unknown macro?)", bad)


def test_no_raw_markup_shown_as_text(report):
    bad = _failures(report, "raw_markup")
    assert not bad, _message("TeX or Markdown printed as text (a Markdown output rendered as commonmark?)", bad)


def test_solutions_and_proofs_are_folded(report):
    bad = _failures(report, "unfolded")
    assert not bad, _message("solutions or proofs shown open", bad)
    assert sum(found.get("folded", 0) for found in report.values()) > 0, "no folded solution found anywhere"


def test_figures_are_numbered_and_captioned(report):
    bad = _failures(report, "figures")
    assert not bad, _message("figures without a number or a caption", bad)


def test_no_hidden_table_columns(report):
    bad = _failures(report, "tables")
    assert not bad, _message(f"tables with columns hidden at {WIDTH} px", bad)


def test_no_cut_code_lines_or_page_overflow(report):
    bad = _failures(report, "overflow")
    assert not bad, _message(f"content cut or wider than a {WIDTH} px window", bad)
