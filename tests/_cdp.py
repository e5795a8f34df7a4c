"""A headless Chromium driven through the DevTools protocol over a pipe (for tests/test_book_browser.py).

``chromium --remote-debugging-pipe`` reads protocol commands from file descriptor 3 and writes replies and
events to descriptor 4, each message JSON followed by a NUL byte: no port, no websocket library, no
driver download. :class:`Browser` opens pages one tab at a time and records, per tab, what a reader's
console would show: uncaught exceptions (``Runtime.exceptionThrown``), ``console.error`` calls and the
browser's own error log (a file that does not load, a blocked script: ``Log.entryAdded``).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time

REMOTE = re.compile(r"^(https?:)?//", re.IGNORECASE)
#: executables tried in order (Debian's package is ``chromium``); SIGPROP_CHROMIUM overrides
CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


def find_chromium() -> str | None:
    explicit = os.environ.get("SIGPROP_CHROMIUM")
    if explicit:
        return explicit if shutil.which(explicit) else None
    return next((path for path in map(shutil.which, CANDIDATES) if path), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium; ``open(url)`` returns what the page's console recorded and ``evaluate``
    runs a script in it. Use as a context manager."""

    def __init__(self, executable: str, *, width: int = 1280, height: int = 900, timeout: float = 60.0,
                 localhost: bool = False):
        self.width, self.height, self.timeout = width, height, timeout
        self._profile = tempfile.TemporaryDirectory(prefix="sigprop-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def _fds():  # in the child: the protocol's descriptors 3 (commands in) and 4 (replies out)
            high_r = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10)  # out of the way of 3 and 4 first
            high_w = fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self._log = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--mute-audio", "--hide-scrollbars",
             # nothing from the network: a remote address does not resolve (the book must read offline); with
             # localhost=True, 127.0.0.1 does (a local JupyterLab server, tests/test_book_browser.py)
             "--host-resolver-rules=MAP * ~NOTFOUND" + (", EXCLUDE 127.0.0.1" if localhost else ""),
             # tabs loading side by side are not throttled as background tabs (no frames, slow timers)
             "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
             "--disable-backgrounding-occluded-windows",
             f"--window-size={width},{height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, preexec_fn=_fds,
            pass_fds=(3, 4))  # kept open after _fds (close_fds runs after preexec_fn)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        self.version = self.send("Browser.getVersion")["product"]

    # ------------------------------------------------------------------ protocol
    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float | None = None) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._receive(deadline, method)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def _receive(self, deadline: float, waiting_for: str) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or self._proc.poll() is not None:
                raise BrowserError(f"no reply to {waiting_for} (browser {'exited' if self._proc.poll() is not None else 'timed out'})"
                                   f"; its log: {self.log_tail()}")
            ready, _, _ = select.select([self._from_child], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise BrowserError(f"the browser closed its pipe; its log: {self.log_tail()}")
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def wait_event(self, method: str, session: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method and event.get("sessionId") == session:
                    return self._events.pop(i)
            self._events.append(self._receive(deadline, method))

    def log_tail(self, n: int = 2000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-n:]

    # ------------------------------------------------------------------ pages
    def start(self, url: str) -> "Tab":
        """A new tab navigating to ``url`` (returns at once; :meth:`Tab.settle` waits for it)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        tab = Tab(self, target, session, url)
        for method in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.send(method, session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False}, session=session)
        reply = self.send("Page.navigate", {"url": url}, session=session)
        if reply.get("errorText"):
            raise BrowserError(f"{url}: {reply['errorText']}")
        return tab

    def open(self, url: str, *, settle_js: str, timeout: float = 60.0) -> "Tab":
        tab = self.start(url)
        tab.settle(settle_js, timeout=timeout)
        return tab

    def close(self):
        try:
            self.send("Browser.close", timeout=10)
        except (BrowserError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()
        self._profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Tab:
    def __init__(self, browser: Browser, target: str, session: str, url: str = ""):
        self.browser, self.target, self.session, self.url = browser, target, session, url

    def settle(self, settle_js: str, timeout: float = 60.0):
        """Wait for the load event, then for ``settle_js`` (a promise: what else the page must finish)."""
        self.browser.wait_event("Page.loadEventFired", self.session, timeout)
        self.browser.send("Page.bringToFront", session=self.session)  # frames and observers run in front
        self.evaluate(settle_js, timeout=timeout)

    def evaluate(self, expression: str, timeout: float = 60.0):
        result = self.browser.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                        "returnByValue": True}, session=self.session,
                                   timeout=timeout)
        if "exceptionDetails" in result:
            raise BrowserError(f"script failed: {_describe(result['exceptionDetails'])}")
        return result["result"].get("value")

    def console_errors(self) -> list[str]:
        """Uncaught exceptions, console.error calls and error log entries recorded since the tab opened."""
        errors, keep = [], []
        for event in self.browser._events:
            if event.get("sessionId") != self.session:
                keep.append(event)
                continue
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                errors.append("uncaught " + _describe(params["exceptionDetails"]))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                errors.append(f"console.{params['type']}: {args}")
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                entry = params["entry"]
                if entry.get("source") == "network" and REMOTE.match(entry.get("url", "")):
                    continue  # a remote image (a Colab badge) offline: tests/test_book_offline.py's business
                errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())
        self.browser._events = keep
        return errors

    def screenshot(self) -> bytes:
        import base64
        data = self.browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                                 session=self.session)["data"]
        return base64.b64decode(data)

    def close(self):
        self.browser.send("Target.closeTarget", {"targetId": self.target})
        self.browser._events = [e for e in self.browser._events if e.get("sessionId") != self.session]


def _describe(details: dict) -> str:
    exc = details.get("exception") or {}
    where = f" at {details.get('url', '')}:{details.get('lineNumber', 0) + 1}" if details.get("url") else ""
    return (exc.get("description") or details.get("text") or "error").splitlines()[0] + where
