r"""Monte Carlo a page needs at more initialisations than it can run in its time: recorded once, replayed, checked.

A curve test at the minimum of 13 initialisations has little power against small offsets
(:mod:`sigprop.course._power`); four times as many detect an offset of half the spread between initialisations about
half the time, but cost a page minutes. :func:`replayed` keeps the page's own code as the one definition of the
measurement and the page's budget of two minutes:

* the page passes ``compute(inits) -> Estimate`` (its own ``sp.mc_model_cosine(..., inits=inits, ...)``), the
  number of initialisations it wants and the parameters that define the measurement (sizes, seeds, the model's
  name): a JSON-able dict;
* recording (``SIGPROP_RECORD=<record>`` or ``all`` in the environment, e.g. while executing the page with
  ``SIGPROP_RECORD=real-transformers-05 python -m pytest --nbval-lax --nbval-current-env page.ipynb``) runs
  ``compute(inits)`` and stores its per-initialisation rows with the parameters and the provenance (command, date,
  commit, machine, torch) in ``records/<record>.json`` under ``key``;
* replaying (the default) loads the rows whose parameters are equal to the page's and checks them against the code:
  it computes the first :data:`CHECK_INITS` initialisations again (each initialisation is drawn from its own seed,
  so they are the record's first rows) and requires every value to agree within 1 % of the recorded curve's standard
  error at that point plus 1e-9 (float32 kernels on another CPU differ in the last bits; a change of 1 % of an SE
  cannot move a verdict or a printed digit). A record that the code no longer reproduces, or none with the
  page's parameters, is a ``ValueError`` that says how to record it again;
* in the ``full`` profile (no time budget) a measurement without a record is computed live.

The record is a page's own: ``records/<record>.json`` holds ``{"provenance": ..., "entries": {key: {"params":
..., "inits": n, "samples": [[...], ...]}}}``; samples are stored with 17 significant digits, so the replayed
:class:`~sigprop.Estimate` is the computed one.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import pathlib
import platform
from typing import Callable, Mapping

import numpy as np
import torch

from ..stats._estimate import Estimate, estimate
from ..stats._config import profile
from ..stats._calibration import _commit

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["replayed", "CHECK_INITS"]

#: Initialisations a replay computes again to prove the record is the code's
CHECK_INITS = 2
#: Agreement required of the recomputed rows: a fraction of the recorded SE at each point, plus an absolute floor
CHECK_SE_FRACTION, CHECK_FLOOR = 0.01, 1e-9
RECORDS = pathlib.Path(__file__).with_name("records")


def _normalised(params: Mapping) -> dict:
    try:
        return json.loads(json.dumps(dict(params), sort_keys=True))
    except TypeError as err:
        raise TypeError(f"params must be JSON-able (numbers, strings, lists, dicts); {err}") from None


def _path(record: str) -> pathlib.Path:
    if not record or not all(c.isalnum() or c in "-_" for c in record):
        raise ValueError(f"record must be a file stem of letters, digits, '-' and '_'; got {record!r}")
    return RECORDS / f"{record}.json"


def _load(record: str) -> dict:
    path = _path(record)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"entries": {}}


def _how(record: str) -> str:
    return (f"record it with SIGPROP_RECORD={record} while executing the page (python -m pytest --nbval-lax "
            f"--nbval-current-env <page>.ipynb), then commit {_path(record).relative_to(RECORDS.parent.parent.parent)}")


def _provenance(record: str) -> dict:
    """Command, date, commit, machine, torch, CPU kernels and threads of a recording (what makes a run on one CPU
    differ from one on another in the last bits)."""
    return dict(command=f"SIGPROP_RECORD={record}, the page executed (module docstring)",
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                git_commit=_commit()["git_commit"], machine=platform.machine(), torch=torch.__version__,
                cpu_capability=torch.backends.cpu.get_cpu_capability(), threads=torch.get_num_threads(),
                python=platform.python_version())


def replayed(record: str, key: str, compute: Callable[[int], Estimate], *, inits: int, params: Mapping) -> Estimate:
    """``compute(inits)`` as recorded in ``records/<record>.json`` under ``key`` (module docstring): the recorded
    rows, after the first :data:`CHECK_INITS` initialisations are computed again and found equal; computed and stored
    when ``SIGPROP_RECORD`` names ``record`` (or is ``all``)."""
    if not isinstance(inits, int) or inits <= CHECK_INITS:
        raise ValueError(f"inits must be an integer > {CHECK_INITS}; got {inits!r}")
    if not isinstance(key, str) or not key:
        raise ValueError(f"key must be a non-empty string; got {key!r}")
    params = _normalised(params)
    if os.environ.get("SIGPROP_RECORD") in (record, "all"):
        est = compute(inits)
        data = _load(record)
        data["entries"][key] = {"params": params, "inits": inits,
                                "samples": np.asarray(est.samples, dtype=float).tolist()}
        data["provenance"] = _provenance(record)
        _path(record).parent.mkdir(parents=True, exist_ok=True)
        _path(record).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return est
    entry = _load(record)["entries"].get(key)
    if entry is None or entry["params"] != params or entry["inits"] != inits:
        if profile() == "full":
            return compute(inits)
        got = "no entry" if entry is None else f"params {entry['params']} at {entry['inits']} initialisations"
        raise ValueError(f"{_path(record).name}[{key!r}]: expected params {params} at {inits} initialisations, "
                         f"got {got}; {_how(record)}")
    recorded = estimate(torch.tensor(entry["samples"], dtype=torch.float64))
    live = np.asarray(compute(CHECK_INITS).samples, dtype=float)
    first = np.asarray(entry["samples"][:CHECK_INITS], dtype=float)
    allowed = CHECK_SE_FRACTION * np.asarray(recorded.stderr, dtype=float) + CHECK_FLOOR
    if live.shape != first.shape or not np.all(np.abs(live - first) <= allowed):
        worst = float(np.max(np.abs(live - first))) if live.shape == first.shape else math.nan
        raise ValueError(f"{_path(record).name}[{key!r}]: the code no longer computes the recorded rows (first "
                         f"{CHECK_INITS} initialisations: largest difference {worst:.3g}, allowed 1 % of the SE); "
                         f"{_how(record)}")
    return recorded
