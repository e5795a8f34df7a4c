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

Two built notebooks (``_build/html/_notebooks``, book/notebooks.py: what Colab, Binder and the download button
serve) are opened in JupyterLab (installed in the environment, the test extra; served on 127.0.0.1), every cell
rendered: every formula typeset without error, no TeX and no MyST printed as text (a role, a directive block,
``:::``, ``(label)=``), every solution folded in a closed ``<details>``, theorem and proof boxes quoted, every link
absolute (into the published HTML). ``SIGPROP_BROWSER_SHOTS=folder`` saves a screenshot of each.

Skipped, with the reason, where no Chromium is installed (``apt-get install chromium``; ``.ci/run`` does; the
workflows install it with an action), no site is built, or no JupyterLab is installed. The browser is driven through the DevTools protocol over a pipe (``tests/_cdp.py``):
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
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

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


# ----------------------------------------------------------------------------- built notebooks in JupyterLab

#: two built notebooks (reader's edition): the primer (exercises with solutions, a definition list, a code block)
#: and a chapter page (lemmas and proofs, figures, citations, glued numbers, ledger quotes)
NOTEBOOKS = ("book/primer.ipynb", "chapters/noci2022/01_uniform_attention.ipynb")
LAB_SETTINGS = {
    # every cell rendered, not only those in view (JupyterLab 4 renders a long notebook lazily by default)
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # no "Would you like to get notified about official Jupyter news?" over the notebook (and no network)
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
}
# Wait until the notebook's cells are there and MathJax has stopped adding formulas (stable for 1.5 s).
LAB_SETTLE_JS = r"""
(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const t0 = performance.now();
  let last = "", stable = 0;
  while (performance.now() - t0 < 90000) {
    const cells = document.querySelectorAll('.jp-Notebook .jp-Cell').length;
    const now = cells + '/' + document.querySelectorAll('.jp-RenderedMarkdown mjx-container').length;
    if (cells > 0 && now === last) { if (++stable >= 6) return now; } else { stable = 0; last = now; }
    await sleep(250);
  }
  return 'timeout ' + last;
})()
"""
LAB_CHECK_JS = (pathlib.Path(__file__).with_name("jupyterlab_checks.js")).read_text(encoding="utf-8")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab serving the two built notebooks; yields {notebook: findings}."""
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("no Chromium (apt-get install chromium, or set SIGPROP_CHROMIUM): the notebooks are not opened")
    pytest.importorskip("jupyterlab", reason="JupyterLab (the test extra) serves the notebooks")
    built = HTML / "_notebooks" / "reader"
    if not all((built / nb).is_file() for nb in NOTEBOOKS):
        pytest.skip(f"no built notebooks in {built} (run `make book`)")
    tmp = tmp_path_factory.mktemp("lab")
    root, settings = tmp / "root", tmp / "settings"
    for nb in NOTEBOOKS:
        (root / nb).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built / nb, root / nb)
    for name, value in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(value))
    token, port = secrets.token_hex(16), _free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp / "config")}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--ServerApp.port_retries=0"]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        env=env, stdout=subprocess.DEVNULL, stderr=open(tmp / "server.log", "w"))
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start: {(tmp / 'server.log').read_text()[-2000:]}")
                time.sleep(0.5)
        shots = os.environ.get("SIGPROP_BROWSER_SHOTS")
        results = {}
        with Browser(chromium, width=WIDTH, height=900, timeout=120, localhost=True) as browser:
            for nb in NOTEBOOKS:
                # ?reset: a fresh workspace, without the previous notebook's tab restored beside this one
                tab = browser.start(f"http://127.0.0.1:{port}/lab/tree/{nb}?reset&token={token}")
                try:
                    browser.wait_event("Page.loadEventFired", tab.session, 120)
                    found = {"settled": tab.evaluate(LAB_SETTLE_JS, timeout=120)} | tab.evaluate(LAB_CHECK_JS)
                    if shots:
                        pathlib.Path(shots).mkdir(parents=True, exist_ok=True)
                        stem = pathlib.Path(shots) / nb.replace("/", "_").replace(".ipynb", "")
                        pathlib.Path(f"{stem}.png").write_bytes(tab.screenshot())
                        tab.evaluate("(document.querySelector('.jp-RenderedMarkdown details') || document.querySelector("
                                     "'.jp-RenderedMarkdown blockquote') || document.body).scrollIntoView()")
                        time.sleep(1)
                        pathlib.Path(f"{stem}-box.png").write_bytes(tab.screenshot())
                finally:
                    tab.close()
                source = json.loads((built / nb).read_text())
                found["expected"] = {"cells": len(source["cells"]),
                                     "markdown": sum(c["cell_type"] == "markdown" for c in source["cells"]),
                                     "details": sum("".join(c["source"]).count("<details>") for c in source["cells"])}
                results[nb] = found
        yield results
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


def test_notebooks_open_in_jupyterlab_with_every_cell_rendered(lab):
    for nb, found in lab.items():
        assert not str(found["settled"]).startswith("timeout"), (nb, found["settled"])
        assert (found["cells"], found["markdown"]) == (found["expected"]["cells"], found["expected"]["markdown"]), nb


def test_notebooks_math_renders_in_jupyterlab(lab):
    for nb, found in lab.items():
        assert found["formulas"] > 20, (nb, found["formulas"])                 # each page has dozens
        assert not found["math_errors"] and not found["raw_tex"], (nb, found["math_errors"], found["raw_tex"][:5])


def test_notebooks_show_no_raw_markup_in_jupyterlab(lab):
    for nb, found in lab.items():
        assert not found["raw_myst"], (nb, found["raw_myst"][:5])
        assert not found["local_links"], (nb, found["local_links"][:5])       # every link into the published HTML
        assert not found["empty_links"], (nb, found["empty_links"][:5])       # every link has its text


def test_notebooks_fold_solutions_and_quote_boxes_in_jupyterlab(lab):
    primer, chapter = (lab[nb] for nb in NOTEBOOKS)
    assert primer["details"] == primer["expected"]["details"] > 0 and primer["open_details"] == 0, primer
    assert chapter["boxes"] > 0, "lemma and proof boxes are quoted, headed in bold"
