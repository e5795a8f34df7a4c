"""Readers of the committed records a page replays, so that no page parses a record's JSON by hand.

The records themselves are written and loaded by :mod:`sigprop.experiments` (``load_finite_size``,
``load_record``) and :mod:`sigprop.claims` (``load_record``); this module turns them into what a page shows:
the block maps stored with a finite-size record (:func:`record_maps`), the layer-mean shift that the exact
cross-overlap predicts (:func:`yp_shift`), one rung of a ladder (:func:`record_rung`) and the summary table of a
recorded training run (:func:`training_summary`). The claims ledger's tables are in :mod:`._ledger`.
"""
from __future__ import annotations

import numpy as np

from ._tables import pm

__all__: list[str] = []
__theory__: list[str] = []
__course__ = ["record_maps", "yp_shift", "record_rung", "training_summary", "first_step_below"]

_MAPS = ("map_inf", "map_1/T", "map_rem")


def _record_T(record: dict, T) -> str:
    T = record["params"]["T"] if T is None else T
    key = str(int(T))
    if key not in record["theory"]:
        raise ValueError(f"the record has block maps at T = {sorted(int(t) for t in record['theory'])}; got T = {T}")
    return key


def record_maps(record: dict, T=None) -> dict:
    r"""The block maps stored with a finite-size record of a depth curve, at length ``T`` (default: the record's).

    Returns float arrays ``(depth + 1,)``: ``"map_inf"`` (the paper's :math:`T\to\infty` map), ``"map_1/T"``
    (finite :math:`T`, :math:`Y_p = 1/T`), ``"map_rem"`` (finite :math:`T`, exact two-row-REM :math:`Y_p`) and,
    where the record has it, ``"chain"`` and ``"chain_se"`` (the :math:`d=\infty` Gram chain, mean and SE).
    """
    th = record["theory"][_record_T(record, T)]
    out = {k: np.asarray(th[k], dtype=float) for k in _MAPS}
    if "chain" in th:
        out["chain"] = np.asarray(th["chain"]["mean"], dtype=float)
        out["chain_se"] = np.asarray(th["chain"]["se"], dtype=float)
    return out


def yp_shift(record: dict, T=None) -> float:
    r"""Mean over blocks ``1..depth`` of the exact-:math:`Y_p` map minus the :math:`Y_p = 1/T` map: the layer-mean
    gap to the :math:`1/T` map that the exact cross-overlap predicts at :math:`d = \infty`."""
    maps = record_maps(record, T)
    return float(np.mean(maps["map_rem"][1:] - maps["map_1/T"][1:]))


def record_rung(record: dict, axis: str = "d", **where) -> dict:
    """The rung of a record's ``axis`` ladder (``"d"`` or ``"T"``) whose fields equal ``where`` (e.g. ``d=256``)."""
    found = [r for r in record["rungs"] if r["axis"] == axis and all(r.get(k) == v for k, v in where.items())]
    if len(found) != 1:
        have = [{k: r.get(k) for k in ("d", "T")} for r in record["rungs"] if r["axis"] == axis]
        raise ValueError(f"expected one {axis!r} rung with {where}; the record has {have}")
    return found[0]


def _mean_se(values: np.ndarray) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
    return float(values.mean()), float(se)


def training_summary(runs: dict):
    """One row per recorded initialisation: final loss and fraction of the gap closed (mean ± SE over seeds;
    the gap runs from the context-free floor, 0, to the Bayes floor, 1), attention entropy and top-layer
    cosine at the first and last evaluation (means over seeds). ``runs``: label -> training run, as
    :func:`sigprop.experiments.load_record` returns. A pandas DataFrame."""
    import pandas as pd

    rows = []
    for label, r in runs.items():
        loss, gap = _mean_se(r.eval_loss[-1]), _mean_se(r.gap_closed())
        rows.append({"initialisation": label, "seeds": r.eval_loss.shape[1],
                     "final loss (nats)": pm(*loss) if np.isfinite(loss[1]) else f"{loss[0]:.3f}",
                     "gap closed": pm(*gap) if np.isfinite(gap[1]) else f"{gap[0]:.3f}",
                     "entropy, start -> end": f"{r.attention_entropy[0].mean():.2f} -> {r.attention_entropy[-1].mean():.2f}",
                     "top cosine, start -> end": f"{r.top_cosine[0].mean():.4f} -> {r.top_cosine[-1].mean():.4f}"})
    return pd.DataFrame(rows)


def first_step_below(run, threshold: float, *, mean: bool = False):
    """The first evaluation step at which a recorded training run's masked-token loss is below ``threshold``:
    an array with one step per seed (``nan`` for a seed that never gets there), or, with ``mean=True``, the
    first step of the mean over seeds (a float, ``nan`` if never). How the pages define "leaving the plateau"."""
    loss = np.asarray(run.eval_loss, dtype=float)                      # (evaluations, seeds)
    steps = np.asarray(run.steps, dtype=float)
    if mean:
        below = loss.mean(1) < threshold
        return float(steps[np.argmax(below)]) if below.any() else float("nan")
    below = loss < threshold
    return np.where(below.any(0), steps[np.argmax(below, axis=0)], np.nan)
