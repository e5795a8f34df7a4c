"""Print a built HTML page (the single-page build of the book) to PDF with headless Chromium, offline.

Why Chromium and not LaTeX: the book's pages are notebooks whose outputs are HTML (tables, the ledger's
rendered statuses, styled figures) and whose formulas are typeset by MathJax in the browser; printing the
single-page HTML build keeps all of it exactly as the site shows it, needs one Debian package (``chromium``)
instead of a TeX installation, and nothing is fetched (MathJax and the fonts are served from the build).

Chromium is driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: no port, no
websocket library) so that printing waits for what matters instead of a fixed delay:

1. the page loads from ``file://``; every ``<img>`` has finished loading (a broken image is an error; an
   image from the network -- the Colab badges -- is replaced by its alt text, inside its link);
2. MathJax's start-up promise resolves (every formula typeset); a formula that MathJax could not parse
   (``mjx-merror``) or a math element still holding TeX is an error, reported with its text;
3. what the web book folds is opened (solutions, proofs: paper cannot be clicked; code cells hidden with
   ``hide-input`` and the details in the ledger's table cells stay folded), print styles make long code lines and wide
   tables wrap instead of being cut (:data:`PRINT_CSS`), a displayed formula wider than the printed column is
   set smaller until it fits (:data:`FIT_FORMULAS`; the web book scrolls it), then the page is printed on A4
   with page numbers.

``check`` (what the page held when it was printed) is returned for the caller to report.
"""
from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import pathlib
import select
import shutil
import subprocess
import tempfile
import time

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

#: paper does not scroll: long code lines and wide tables wrap instead of being cut at the column's edge
#: (and the web book's "scroll sideways" hints go); code and tables may break across pages (the themes keep
#: them whole, which left blank half pages); a code cell hidden behind "Show code cell source" stays out
PRINT_CSS = """@media print {
  pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
  div.highlight, div.highlight pre, div.cell_output, div.output, .sp-table-scroll, .sp-scroll-box,
  .table-wrapper { overflow: visible !important; }
  table { max-width: 100% !important; }
  td, th { overflow-wrap: break-word; }
  table, div.highlight, div[class*=highlight-] { break-inside: auto !important; }
  .sp-scroll-hint, details.above-input { display: none !important; }
}"""

#: run in the page before printing: wait for images and MathJax, open what is folded, report
PREPARE = r"""
(async () => {
  const images = [...document.images];
  images.forEach(i => { i.loading = "eager"; });
  await Promise.all(images.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  // an image from the network (the Colab badges) cannot load offline: its alt text stands in, inside its link
  const remote = images.filter(i => !i.naturalWidth && /^https?:/.test(i.getAttribute("src") || ""));
  remote.forEach(i => { const s = document.createElement("span"); s.textContent = i.alt || "image";
                        i.replaceWith(s); });
  let mathjax = "absent";
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise; mathjax = "done";
  }
  document.head.append(Object.assign(document.createElement("style"), {textContent: PRINT_CSS}));
  // folded content a reader of paper cannot unfold (solutions, proofs), not myst-nb's hidden cells
  // (details.hide) nor the details inside a table's cells (the ledger's sizes and notes would crush the
  // table's other columns to a character's width)
  document.querySelectorAll("details:not(.hide)").forEach(d => { if (!d.closest("table")) d.open = true; });
  document.querySelectorAll(".toggle-hidden").forEach(e => e.classList.remove("toggle-hidden"));
  const rawTex = [...document.querySelectorAll(".math")]
    .filter(e => !e.querySelector("mjx-container") && /\\[a-zA-Z(\[]/.test(e.textContent))
    .map(e => e.textContent.trim().slice(0, 80));
  return {
    mathjax: mathjax,
    formulas: document.querySelectorAll("mjx-container").length,
    errors: [...document.querySelectorAll("mjx-merror")].map(e => e.textContent.slice(0, 80)),
    raw_tex: rawTex,
    images: images.length - remote.length,
    remote_images: remote.length,
    broken_images: images.filter(i => !i.naturalWidth && !remote.includes(i)).map(i => i.getAttribute("src")),
  };
})()
""".replace("PRINT_CSS", json.dumps(PRINT_CSS))

#: after PREPARE, laid out at the printed width: a displayed formula wider than the column (the web book
#: scrolls it) is set in a smaller size that fits, instead of being cut at the page's edge
FIT_FORMULAS = r"""
(() => {
  const shrunk = [];
  document.querySelectorAll('mjx-container[display="true"]').forEach(m => {
    const wide = m.scrollWidth, room = m.clientWidth;
    if (room > 0 && wide > room + 1) {   // MathJax sets the container's own size: scale what it computed
      m.style.fontSize = (parseFloat(getComputedStyle(m).fontSize) * room / wide).toFixed(2) + "px";
      shrunk.push(Math.round(100 * room / wide));
    }
  });
  return shrunk;
})()
"""

#: A4 with half-inch side margins; CSS pixels are 1/96 inch
PAPER = {"paperWidth": 8.27, "paperHeight": 11.69, "marginTop": 0.6, "marginBottom": 0.6, "marginLeft": 0.5,
         "marginRight": 0.5}

FOOTER = ('<div style="font-size:8px;width:100%;text-align:center;color:#555">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


class PrintError(RuntimeError):
    """The page could not be printed as a reader would see it (broken image, untypeset formula)."""


def chromium() -> str | None:
    """Path of a Chromium (or Chrome), ``$SIGPROP_CHROMIUM`` first (as tests/_cdp.py); None without one."""
    for name in filter(None, (os.environ.get("SIGPROP_CHROMIUM"),) + CHROMIUM_NAMES):
        found = shutil.which(name)
        if found:
            return found
    return None


class _Pipe:
    """The DevTools protocol over Chromium's pipe: JSON messages ended by NUL, fd 3 in, fd 4 out."""

    def __init__(self, exe: str, profile: str):
        self._to_chrome_r, self._to_chrome_w = os.pipe()
        self._from_chrome_r, self._from_chrome_w = os.pipe()
        # the child's ends above fd 9, so that moving them to fds 3 and 4 cannot overwrite one another
        r, w = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (self._to_chrome_r, self._from_chrome_w))
        os.close(self._to_chrome_r)
        os.close(self._from_chrome_w)
        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-extensions", "--no-first-run", "--no-default-browser-check", "--mute-audio",
                 "--allow-file-access-from-files", f"--user-data-dir={profile}", "--remote-debugging-pipe",
                 "about:blank"]
        # the protocol wants fd 3 (commands) and fd 4 (replies) in the child: bash moves them there
        self.proc = subprocess.Popen(["bash", "-c", f'exec "$@" 3<&{r} 4>&{w} {r}<&- {w}>&-', "bash", exe, *flags],
                                     pass_fds=(r, w), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(r)
        os.close(w)
        self._buf = b""
        self._id = 0

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout: float = 60):
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise PrintError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise PrintError("Chromium did not answer in time" if left <= 0 else
                                 f"Chromium exited: {self.proc.stderr.read().decode(errors='replace')[-2000:]}")
            ready, _, _ = select.select([self._from_chrome_r], [], [], min(left, 1.0))
            if ready:
                self._buf += os.read(self._from_chrome_r, 1 << 20)
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except (PrintError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome_w, self._from_chrome_r):
            os.close(fd)


class Page:
    """An HTML file open in headless Chromium, loaded: ``evaluate`` runs script in it (awaiting promises)."""

    def __init__(self, cdp: _Pipe, session: str, timeout: float):
        self._cdp, self._session, self.timeout = cdp, session, timeout

    def evaluate(self, expression: str):
        reply = self._cdp.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                    "returnByValue": True}, session=self._session,
                               timeout=self.timeout)
        if "exceptionDetails" in reply:
            raise PrintError(f"script failed: {reply['exceptionDetails'].get('text')} "
                             f"{reply['exceptionDetails'].get('exception', {}).get('description', '')}")
        return reply["result"].get("value")

    def send(self, method: str, params: dict | None = None):
        return self._cdp.send(method, params, session=self._session, timeout=self.timeout)


@contextlib.contextmanager
def open_page(page: pathlib.Path, *, timeout: float = 600, exe: str | None = None):
    """``with open_page(path) as p: p.evaluate(...)``: ``path`` loaded from ``file://`` in headless Chromium."""
    exe = exe or chromium()
    if exe is None:
        raise FileNotFoundError("no Chromium: apt-get install chromium (or set $SIGPROP_CHROMIUM)")
    page = pathlib.Path(page).resolve()
    with tempfile.TemporaryDirectory(prefix="sigprop-chromium-") as profile:
        cdp = _Pipe(exe, profile)
        try:
            target = cdp.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            tab = Page(cdp, session, timeout)
            tab.send("Page.enable")
            tab.send("Page.navigate", {"url": page.as_uri()})
            deadline = time.monotonic() + timeout
            # about:blank is "complete" too: wait until the file itself has loaded
            while not tab.evaluate('location.protocol === "file:" && document.readyState === "complete"'):
                if time.monotonic() > deadline:
                    raise PrintError(f"{page} did not finish loading in {timeout:.0f} s")
                time.sleep(0.5)
            yield tab
        finally:
            cdp.close()


def print_pdf(page: pathlib.Path, out: pathlib.Path, *, title: str = "", timeout: float = 600,
              exe: str | None = None) -> dict:
    """Print ``page`` (an HTML file) to ``out``; returns what the page held (formulas, images) when printed.

    Raises :class:`PrintError` when an image is broken, MathJax reports an error or a formula stayed TeX.
    """
    with open_page(page, timeout=timeout, exe=exe) as tab:
        # lay the page out as it will be printed (print styles, the column's printed width) to measure it
        width = round(96 * (PAPER["paperWidth"] - PAPER["marginLeft"] - PAPER["marginRight"]))
        tab.send("Emulation.setEmulatedMedia", {"media": "print"})
        tab.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": 1100, "deviceScaleFactor": 1,
                                                         "mobile": False})
        check = tab.evaluate(PREPARE)
        check["shrunk_formulas"] = tab.evaluate(FIT_FORMULAS)
        problems = ([f"broken image: {s}" for s in check["broken_images"]]
                    + [f"MathJax error: {e}" for e in check["errors"]]
                    + [f"formula left as TeX: {t}" for t in check["raw_tex"]])
        if problems:
            raise PrintError(f"{page}: " + "; ".join(problems[:20]) + (" ..." if len(problems) > 20 else ""))
        header = (f'<div style="font-size:8px;width:100%;text-align:center;color:#555">{title}</div>'
                  if title else "<span></span>")
        pdf = tab.send("Page.printToPDF", {**PAPER, "printBackground": True, "displayHeaderFooter": True,
                                           "headerTemplate": header, "footerTemplate": FOOTER})
    pathlib.Path(out).write_bytes(base64.b64decode(pdf["data"]))
    return check
