"""Book-page benchmark: execute every page with nbclient, time it, and check what it writes."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from typing import Callable

from ._speed import _repo_root, _row

# ----------------------------------------------------------------------------- 5. book pages

def _notebooks(root):
    """The book's pages (as the Makefile's NOTEBOOKS): every notebook under chapters/ and book/, except the
    assignment masters in book/assignments (otter-grader sources, graded by tests/test_assignments.py)."""
    found = []
    for top in ("chapters", "book"):
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "_"))
                                 and os.path.join(dirpath, d) != os.path.join(root, "book", "assignments"))
            found += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".ipynb")]
    return found


def _snapshot(root):
    snap = {}
    for dirpath, dirnames, files in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", ".venv", "_build", "__pycache__", ".ipynb_checkpoints",
                                                        ".hypothesis", ".pytest_cache")]
        for f in files:
            p = os.path.join(dirpath, f)
            try:
                st = os.stat(p)
            except OSError:
                continue
            snap[p] = (st.st_mtime_ns, st.st_size)
    return snap


def bound_kernel_waits(step: float = 1.0) -> None:
    """Make jupyter_client's asyncio channels wait for a kernel message in slices of at most ``step`` seconds.

    nbclient (the executor of ``make book`` and of :func:`bench_pages`) waits for a cell's reply with one
    ``await socket.poll(timeout)`` over the whole cell timeout. On a busy machine the asyncio socket can miss
    the edge-triggered wake-up of a message that has already arrived (the pyzmq behaviour of
    zeromq/pyzmq#1558): the message is then read only when the poll times out, and the page stalls for the
    full timeout (900 s) before going on without an error -- seen here under load, about once in twenty page
    executions. Polling in short slices bounds such a stall to ``step``; the method returns a message or
    raises ``Empty`` after ``timeout`` exactly as before. Idempotent.
    """
    import math
    from queue import Empty
    from time import monotonic

    from jupyter_client.channels import AsyncZMQSocketChannel

    if getattr(AsyncZMQSocketChannel.get_msg, "_sigprop_step", None) == step:
        return
    if not (isinstance(step, (int, float)) and math.isfinite(step) and step > 0):
        raise ValueError(f"step must be a positive number of seconds; got {step!r}")

    async def get_msg(self, timeout: float | None = None):
        assert self.socket is not None
        deadline = None if timeout is None else monotonic() + timeout
        while True:
            left = step if deadline is None else min(step, max(0.0, deadline - monotonic()))
            if await self.socket.poll(int(left * 1000)):
                return await self._recv()
            if deadline is not None and monotonic() >= deadline:
                raise Empty

    get_msg._sigprop_step = step
    AsyncZMQSocketChannel.get_msg = get_msg


#: The competing load of ``bench_pages(load=True)``: a CPU-bound process on two threads (dense matmuls in a loop),
#: what another build, a test run or a browser puts on a reader's machine.
_BURNER = ("import os, numpy as np\n"
           "a = np.random.default_rng(0).random((600, 600))\n"
           "while True:\n    a = np.tanh(a @ a / 600.0)\n")


@contextlib.contextmanager
def _competing_load(enabled: bool):
    if not enabled:
        yield None
        return
    env = dict(os.environ, OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2", MKL_NUM_THREADS="2")
    proc = subprocess.Popen([sys.executable, "-c", _BURNER], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def bench_pages(notebooks=None, *, twice: bool = False, load: bool = False, timeout: int = 900,
                progress: Callable[[str], None] | None = None):
    """Execute book pages with nbclient (quick profile, CPU); one row per page plus the total.

    Each row records the wall time, whether the page ran without error (its hidden ``assert``
    cells included) and any file it created or changed outside ``_build`` and the system temp
    folder. ``twice=True`` runs the pages in reverse order, then in order again. ``load=True`` runs a
    CPU-bound process on two threads beside the pages (the build must survive a busy machine; the goal,
    under two minutes a page, holds under that load).
    """
    import nbformat
    from nbclient import NotebookClient

    bound_kernel_waits()
    root = _repo_root()
    paths = list(notebooks) if notebooks is not None else _notebooks(root)
    order = (paths[::-1] + paths) if twice else paths
    env_backup = dict(os.environ)
    os.environ.setdefault("SIGPROP_PROFILE", "quick")
    os.environ.setdefault("SIGPROP_DEVICE", "cpu")
    rows, total = [], 0.0
    try:
        with _competing_load(load):
            for k, path in enumerate(order):
                before = _snapshot(root)
                nb = nbformat.read(path, as_version=4)
                client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                        resources={"metadata": {"path": os.path.dirname(path)}})
                t = time.perf_counter()
                error = None
                try:
                    client.execute()
                except Exception as exc:  # noqa: BLE001 -- reported, not raised
                    error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
                dt = time.perf_counter() - t
                total += dt
                after = _snapshot(root)
                written = sorted(os.path.relpath(p, root) for p in after if before.get(p) != after[p])
                run = 2 if twice and k >= len(paths) else 1
                rows.append(_row("pages", os.path.relpath(path, root) + (f" (run {run})" if twice else ""), "seconds", dt,
                                 goal="< 120", meets=dt < 120 and error is None, error=error, wrote_outside_build=written,
                                 under_load=load))
                if progress:
                    progress(f"{rows[-1]['setting']}: {dt:.1f} s{'' if error is None else ', ' + error}"
                             f"{'' if not written else ', wrote ' + ', '.join(written[:3])}")
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
    rows.append(_row("pages", "total", "seconds", total))
    return rows


