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
   set smaller until it fits (:data:`FIT_FORMULAS`; the web book scrolls it);
4. a book is navigated by its contents (:data:`CONTENTS`): a numbered contents is put before the first page --
   the parts, each chapter and each of its pages, with the numbers the book gives them -- every chapter starts on a
   new page, and the PDF gets bookmarks from the same headings (Chromium's document outline: chapters, their pages
   and their sections, nested). The contents' page numbers come from the PDF itself: the page is printed once, the
   page of every contents entry is read from the PDF's named destinations (:func:`destination_pages`; Chromium
   names one after every id a link points to), the numbers are written in, and the page is printed again, until two
   prints agree (they do at the second: the numbers take room reserved in the first);
5. the page is printed on A4 with page numbers.

``check`` (what the page held when it was printed) is returned for the caller to report.
"""
from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import pathlib
import re
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
  /* the theme's print-only header repeats the title and lists the parts as headings: its bookmarks all pointed
     at the contents' page, and the numbered contents below replaces it */
  #jb-print-docs-body { display: none !important; }
  /* a book: the contents on pages of its own, every chapter (a document whose title is a second-level heading in
     the single page) on a new page, headings kept with what follows them */
  #sp-contents { break-after: page; }
  span[id^="document-"] + section:has(> h2) { break-before: page; }
  h1, h2, h3, h4 { break-after: avoid; }
  table.sp-claims { table-layout: fixed; width: 100% !important; }
  table.sp-claims td { overflow-wrap: anywhere; }
}
#sp-contents { font-size: 0.95em; }
#sp-contents .sp-toc-title { font-size: 1.6em; margin: 0 0 0.8em; }
#sp-contents .sp-toc-part { font-weight: bold; margin: 0.9em 0 0.2em; text-transform: uppercase; font-size: 0.85em;
                            letter-spacing: 0.04em; }
#sp-contents .sp-toc { display: flex; gap: 0.6em; break-inside: avoid; }
#sp-contents .sp-toc a { flex: 1; color: inherit; text-decoration: none; }
#sp-contents .sp-toc-h2 { margin-top: 0.35em; font-weight: 600; }
#sp-contents .sp-toc-h3 { padding-left: 1.6em; }
#sp-contents .sp-toc-page { min-width: 2.5em; text-align: right; font-variant-numeric: tabular-nums; }"""

#: run before printing: the contents (parts, chapters and their pages, in the order and with the numbers of the
#: single page) as a nav before the first heading; each entry names the id its page number is read from
CONTENTS = r"""
(() => {
  const wrappers = [...document.querySelectorAll("div.toctree-wrapper")]
    .filter(w => !w.parentElement.closest("div.toctree-wrapper"));
  const parts = [...document.querySelectorAll("nav.bd-docs-nav p.caption")].map(p => p.textContent.trim());
  const title = h => [...h.childNodes].filter(n => !(n.classList && n.classList.contains("headerlink")))
    .map(n => n.textContent).join("").trim();
  const entries = [];
  // the page's own title, not the theme's print-only header (#jb-print-docs-body), which comes first in the page
  const first = document.querySelector("article h1") || document.querySelector("h1");
  const root = first && first.closest("section");
  if (root && root.id) entries.push({level: "h2", id: root.id, title: title(first)});   // the introduction
  wrappers.forEach((w, k) => {
    if (parts.length === wrappers.length) entries.push({part: parts[k]});
    w.querySelectorAll('span[id^="document-"] + section').forEach(s => {
      const h = s.querySelector(":scope > h2, :scope > h3");
      if (h && s.id) entries.push({level: h.tagName.toLowerCase(), id: s.id, title: title(h)});
    });
  });
  if (!entries.length) return 0;
  const nav = document.createElement("nav");
  nav.id = "sp-contents";
  nav.innerHTML = '<p class="sp-toc-title">Contents</p>';
  for (const e of entries) {
    const div = document.createElement("div");
    if (e.part) { div.className = "sp-toc-part"; div.textContent = e.part; nav.append(div); continue; }
    div.className = "sp-toc sp-toc-" + e.level;
    const a = Object.assign(document.createElement("a"), {href: "#" + e.id, textContent: e.title});
    const page = Object.assign(document.createElement("span"), {className: "sp-toc-page", textContent: "000"});
    page.dataset.id = e.id;
    div.append(a, page);
    nav.append(div);
  }
  const anchor = root || first;
  anchor.parentElement.insertBefore(nav, anchor);
  return entries.filter(e => !e.part).length;
})()
"""

#: the ids whose pages the contents shows
CONTENTS_IDS = "[...document.querySelectorAll('#sp-contents .sp-toc-page')].map(s => s.dataset.id)"

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


def _objects(pdf: bytes) -> dict[int, bytes]:
    """The indirect objects of a PDF as Chromium (Skia) writes them: ``N 0 obj ... endobj``, uncompressed
    dictionaries (streams are skipped over by their ``/Length``, never parsed)."""
    objects, pos = {}, 0
    pattern = re.compile(rb"(?:^|[\r\n])(\d+) 0 obj\b")
    while True:
        m = pattern.search(pdf, pos)
        if not m:
            return objects
        start = m.end()
        stream = pdf.find(b"stream", start)
        end = pdf.find(b"endobj", start)
        if 0 <= stream < end:                                  # skip the stream by its length: it may hold "endobj"
            length = re.search(rb"/Length (\d+)", pdf[start:stream])
            if length:
                end = pdf.find(b"endobj", stream + int(length.group(1)))
        objects[int(m.group(1))] = pdf[start:end]
        pos = end + len(b"endobj")


def _name(raw: bytes) -> str:
    return re.sub(rb"#([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), raw).decode("utf-8", "replace")


def destination_pages(pdf: bytes) -> dict[str, int]:
    """``{named destination: page number (1-based)}`` of a PDF printed by Chromium, and ``""``: the number of pages.
    Read from the catalog's ``/Dests`` dictionary (name -> ``[page 0 R /XYZ x y z]``) and the page tree's order. Raises :class:`PrintError` when the
    PDF has none of it (another writer, or no link in the page)."""
    objs = _objects(pdf)
    catalog = next((o for o in objs.values() if re.search(rb"/Type\s*/Catalog\b", o)), None)
    dests = catalog and re.search(rb"/Dests (\d+) 0 R", catalog)
    pages = catalog and re.search(rb"/Pages (\d+) 0 R", catalog)
    if not (dests and pages):
        raise PrintError("the printed PDF has no named destinations or no page tree: no page numbers for the contents")

    def leaves(n: int) -> list[int]:
        kids = re.search(rb"/Kids\s*\[([^\]]*)\]", objs.get(n, b""))
        if not kids:
            return [n]
        return [leaf for k in re.findall(rb"(\d+) 0 R", kids.group(1)) for leaf in leaves(int(k))]

    order = {obj: k + 1 for k, obj in enumerate(leaves(int(pages.group(1))))}
    if not order:
        raise PrintError("the printed PDF's page tree is empty")
    table = objs[int(dests.group(1))]
    found = re.findall(rb"/((?:[^\s/\[\]<>()#%]|#[0-9A-Fa-f]{2})+)\s*\[\s*(\d+) 0 R", table)
    out = {_name(name): order[int(obj)] for name, obj in found if int(obj) in order}
    out[""] = len(order)                                    # the page count, under a name no id can have
    return out


def _print(tab: Page, header: str) -> bytes:
    pdf = tab.send("Page.printToPDF", {**PAPER, "printBackground": True, "displayHeaderFooter": True,
                                       "headerTemplate": header, "footerTemplate": FOOTER,
                                       "generateDocumentOutline": True, "generateTaggedPDF": True})
    return base64.b64decode(pdf["data"])


def print_pdf(page: pathlib.Path, out: pathlib.Path, *, title: str = "", timeout: float = 600,
              exe: str | None = None) -> dict:
    """Print ``page`` (an HTML file) to ``out``; returns what the page held (formulas, images) when printed, and
    ``contents``: the number of contents entries, each with its page.

    Raises :class:`PrintError` when an image is broken, MathJax reports an error, a formula stayed TeX, or the
    contents' page numbers do not settle.
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
        check["contents"] = tab.evaluate(CONTENTS)
        ids = tab.evaluate(CONTENTS_IDS)
        pdf, shown = _print(tab, header), None
        for _ in range(3 if ids else 0):        # until the numbers written in are the pages the print gives
            pages = destination_pages(pdf)
            missing = [i for i in ids if i not in pages]
            if missing:
                raise PrintError(f"{page}: no destination in the PDF for contents entries {missing[:10]}")
            now = {i: pages[i] for i in ids}
            if now == shown:
                break
            tab.evaluate("(pages => document.querySelectorAll('#sp-contents .sp-toc-page').forEach("
                         "s => { s.textContent = pages[s.dataset.id]; }))(" + json.dumps(now) + ")")
            pdf, shown = _print(tab, header), now
        else:
            if ids:
                raise PrintError(f"{page}: the contents' page numbers did not settle in three prints")
        check["pages"] = len(re.findall(rb"/Type\s*/Page\b", pdf))
    pathlib.Path(out).write_bytes(pdf)
    return check
