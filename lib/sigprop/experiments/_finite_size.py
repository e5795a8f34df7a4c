r"""Finite-size scaling: do the gaps between random transformers and their maps close as ``d`` and ``T`` grow?

Giorlandino & Goldt 2025 compare their theory with networks of width 600-1024 and sequences of up to 10^5
tokens; the book's pages run at ``d = 64-512``, ``T = 16-16384``. A gap between a page's Monte Carlo and
its map is either a finite-width effect that vanishes as ``d -> infinity`` at that ``T``, or a limit of the
map itself. This module measures which, for every comparison the chapter makes (the :data:`CASES`):

* **blocks** -- the mean token cosine through post-/pre-LN stacks (Figs. 1(d), 1(e); Algorithms 1-2, App.
  C.1 variances) against the finite-``T`` block map with the cross-overlap ``Y_p = 1/T`` (App. B.2.2's
  "sub-leading" ``Y_p`` dropped; ``sp.theory.iterate_block_map(..., T=T, cross_overlap="1/T")``), the
  finite-``T`` map with the exact two-row-REM ``Y_p`` (the library default), the ``T -> infinity`` map,
  and the ``d = infinity`` Gram-matrix chain (:func:`~._finite_size_mc.gram_chain`). Per network: the gap
  of the cosine averaged over blocks ``1..L`` and of the last block.
* **ipr** -- the IPR of attention rows against the exact finite-``T`` REM (Fig. 3, Result 1).
* **qgrad** -- the scaled query-gradient norm against the corrected Result 2 at finite ``T`` (Fig. 4), as a
  relative gap.

Each case has a ladder over ``d`` (at least four widths spanning 8x) and one over ``T`` at fixed ``d``,
at three sizes (``quick``: seconds, for tests; ``record``: the committed run; ``full``). A rung is a list of
batches of independent initialisations, each batch with its own seed (:func:`batch_seed`). The gap of
every rung is fitted by ``a d^-gamma + b`` (``sigprop.stats._fits``); ``b`` is the gap at ``d -> infinity``.

``python -m sigprop.experiments finite-size [--case NAME ...] [--size quick|record|full] [--out-dir DIR]``
writes ``finite_size_<case>_<size>.json`` with provenance; the ``record`` files are committed in
``sigprop/experiments/records`` and read by :func:`load` (the chapter's pages and its claims ledger).
"""
from __future__ import annotations

import dataclasses
import json
import time
from importlib import resources

import numpy as np

import sigprop as sp

from ._provenance import provenance
from ._finite_size_mc import block_curves, gram_chain, ipr_samples, qgrad_samples
from ..stats._fits import extrapolate

__all__ = ["CASES", "SIZES", "Case", "run_case", "load", "analyse", "batch_seed", "rung_values", "ledger_row"]

SIZES = ("quick", "record", "full")
PAPER = sp.presets.GG_APP_C1


@dataclasses.dataclass(frozen=True)
class Case:
    """One comparison of the chapter and its ladders. ``ladders[size]``: ``{"d": ((d, inits), ...), "T": ((T,
    inits), ...), "T_at_d": d}``; ``params`` as :func:`run_case` needs them; ``primary`` names the metric
    the claims ledger uses."""

    name: str
    kind: str
    source: str
    title: str
    params: dict
    ladders: dict
    primary: str
    batch: int
    seed: int


def _block(name, source, title, *, beta, alpha_sa, norm, depth, T, seed, ladders, chains):
    params = dict(beta=beta, alpha_sa=alpha_sa, norm=norm, depth=depth, T=T, rho0=0.1, seqs=4, chains=chains)
    return Case(name, "blocks", source, title, params, ladders, "mean", 4, seed)


_SMALL_BETA = {   # T = 32, 60 blocks
    "quick": dict(d=((32, 8), (64, 8), (128, 4), (256, 4)), T=((16, 4), (32, 4), (64, 4)), T_at_d=64),
    "record": dict(d=((64, 96), (128, 64), (256, 48), (512, 32)),
                   T=((16, 48), (32, 48), (64, 48), (128, 40), (256, 32)), T_at_d=128),
    "full": dict(d=((64, 200), (128, 128), (256, 96), (512, 64), (1024, 32)),
                 T=((16, 96), (32, 96), (64, 96), (128, 80), (256, 64), (512, 48)), T_at_d=256),
}
_LARGE_BETA = {   # T = 64, 12-24 blocks
    "quick": dict(d=((32, 8), (64, 8), (128, 4), (256, 4)), T=((16, 4), (64, 4), (256, 4)), T_at_d=64),
    "record": dict(d=((64, 96), (128, 64), (256, 48), (512, 32), (1024, 16)),
                   T=((16, 48), (32, 48), (64, 48), (128, 40), (256, 32)), T_at_d=256),
    "full": dict(d=((64, 200), (128, 128), (256, 96), (512, 64), (1024, 32), (2048, 16)),
                 T=((16, 96), (32, 96), (64, 96), (128, 80), (256, 64), (512, 48), (1024, 32)), T_at_d=512),
}
_CHAINS = {"quick": 8, "record": 96, "full": 256}

CASES = {c.name: c for c in (
    _block("fig1d-post", "Fig. 1(d); Algorithm 1", "post-LN, beta = 0.1, alpha_SA = 1.5, 60 blocks, T = 32",
           beta=0.1, alpha_sa=1.5, norm="post", depth=60, T=32, seed=11, ladders=_SMALL_BETA, chains=_CHAINS),
    _block("fig1d-pre", "Fig. 1(d), Fig. 2; Algorithm 2", "pre-LN, beta = 0.1, alpha_SA = 1, 60 blocks, T = 32",
           beta=0.1, alpha_sa=1.0, norm="pre", depth=60, T=32, seed=12, ladders=_SMALL_BETA, chains=_CHAINS),
    _block("fig1e-post", "Fig. 1(e); Algorithm 1", "post-LN, beta = 1.8, alpha_SA = 1, 12 blocks, T = 64",
           beta=1.8, alpha_sa=1.0, norm="post", depth=12, T=64, seed=13, ladders=_LARGE_BETA, chains=_CHAINS),
    _block("fig1e-pre", "Fig. 1(e) setting, pre-LN; Algorithm 2", "pre-LN, beta = 1.8, alpha_SA = 1, 12 blocks, T = 64",
           beta=1.8, alpha_sa=1.0, norm="pre", depth=12, T=64, seed=14, ladders=_LARGE_BETA, chains=_CHAINS),
    _block("stack-beta3", "Algorithm 1 above beta_c; App. B.2.2", "post-LN, beta = 3, alpha_SA = 1, 24 blocks, T = 64",
           beta=3.0, alpha_sa=1.0, norm="post", depth=24, T=64, seed=15, ladders=_LARGE_BETA, chains=_CHAINS),
    Case("fig3-ipr", "ipr", "Fig. 3; Result 1", "IPR of attention rows at beta = 1 ... 4, T = 16384",
         dict(betas=(1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0), T=16384, queries=32, beta=3.0),
         {"quick": dict(d=((32, 8), (64, 8), (128, 8), (256, 8)), T=((256, 8), (1024, 8), (4096, 8)), T_at_d=64),
          "record": dict(d=((32, 160), (64, 160), (128, 160), (256, 160), (512, 160)),
                         T=((256, 160), (1024, 160), (4096, 160), (16384, 160), (65536, 48)), T_at_d=128),
          "full": dict(d=((32, 400), (64, 400), (128, 400), (256, 400), (512, 400), (1024, 200)),
                       T=((256, 400), (1024, 400), (4096, 400), (16384, 400), (65536, 200)), T_at_d=256)},
         "beta=3", 8, 16),
    Case("fig4-qgrad", "qgrad", "Fig. 4; Result 2 (corrected)", "query-gradient norm at beta = 0.7 ... 4, T = 128",
         dict(betas=(0.7, 1.0, 1.4, 2.0, 2.8, 4.0), T=128, beta=1.4),
         {"quick": dict(d=((32, 40), (64, 40), (128, 20), (256, 20)), T=((32, 20), (64, 20), (128, 20)), T_at_d=64),
          "record": dict(d=((32, 800), (64, 600), (128, 400), (256, 300), (512, 200)),
                         T=((32, 600), (64, 500), (128, 400), (256, 300), (512, 150)), T_at_d=128),
          "full": dict(d=((32, 1600), (64, 1200), (128, 800), (256, 600), (512, 400), (1024, 200)),
                       T=((32, 1200), (64, 1000), (128, 800), (256, 600), (512, 300), (1024, 150)), T_at_d=256)},
         "beta=1.4", 20, 17),
)}


def batch_seed(case: Case, axis: str, value: int, batch: int) -> int:
    """The seed of batch ``batch`` of the rung ``value`` of ``axis`` ("d" or "T") of ``case``."""
    return ((case.seed * 7 + (0 if axis == "d" else 1)) * 100_003 + int(value)) * 1009 + batch


def _config(case: Case, d: int, T: int) -> sp.BlockConfig:
    p = case.params
    return sp.BlockConfig.from_beta(p["beta"], T=T, d=d, norm=p["norm"], alpha_sa=p["alpha_sa"], **PAPER)


def theory(case: Case, T: int, size: str = "record") -> dict:
    """The theory curves of ``case`` at length ``T``: for blocks, ``{"map_1/T", "map_rem", "map_inf"}`` cosines
    (depth + 1,) and the ``d = infinity`` chain's per-chain curves; for ipr / qgrad, values per beta."""
    p = case.params
    if case.kind == "blocks":
        cfg = _config(case, 128, T)          # the map depends on d only through beta, which is fixed
        out = {}
        for key, kw in (("map_1/T", dict(T=T, cross_overlap="1/T")), ("map_rem", dict(T=T)),
                        ("map_inf", dict(T=T, limit=True))):
            q, pp = sp.theory.iterate_block_map(1.0, p["rho0"], p["depth"], cfg, **kw)
            out[key] = np.asarray(pp / q)
        out["chain"] = gram_chain(cfg, p["depth"], T=T, chains=p["chains"][size], rho0=p["rho0"],
                                  seed=case.seed * 1000 + T)
        return out
    if case.kind == "ipr":
        return {"rem": np.asarray(sp.theory.ipr_finite(np.asarray(p["betas"]), T)),
                "limit": np.asarray(sp.theory.ipr(np.asarray(p["betas"])))}
    return {"theory": np.asarray(sp.theory.rem_query_grad_sq_norm(np.asarray(p["betas"]), T=T)),
            "limit": np.asarray(sp.theory.rem_query_grad_sq_norm(np.asarray(p["betas"])))}


def run_batch(case: Case, axis: str, d: int, T: int, inits: int, batch: int) -> np.ndarray:
    """Per-initialisation raw values of one batch: cosine curves (blocks), IPRs or gradient norms per beta."""
    seed = batch_seed(case, axis, d if axis == "d" else T, batch)
    p = case.params
    if case.kind == "blocks":
        return block_curves(_config(case, d, T), p["depth"], T=T, inits=inits, seqs=p["seqs"], rho0=p["rho0"],
                            seed=seed)
    if case.kind == "ipr":
        return ipr_samples(p["betas"], T=T, d=d, inits=inits, seed=seed, queries=p["queries"])
    return qgrad_samples(p["betas"], T=T, d=d, n=inits, seed=seed)


def rung_values(case: Case, axis: str, d: int, T: int, inits: int, *, batches=None) -> np.ndarray:
    """Raw per-initialisation values of a rung (all batches, or the listed ones), concatenated."""
    n_batches = -(-inits // case.batch)
    picked = range(n_batches) if batches is None else batches
    return np.concatenate([run_batch(case, axis, d, T, min(case.batch, inits - b * case.batch), b) for b in picked])


def metrics(case: Case, raw: np.ndarray, th: dict) -> dict:
    """Per-initialisation gaps from raw values and the theory at the rung's ``T``."""
    if case.kind == "blocks":
        out = {}
        for key in ("map_1/T", "map_rem", "map_inf"):
            gap = raw - th[key][None]
            out[f"{key}/mean"], out[f"{key}/last"] = gap[:, 1:].mean(1), gap[:, -1]
        chain = th["chain"].mean(0)
        out["chain/mean"], out["chain/last"] = (raw - chain)[:, 1:].mean(1), (raw - chain)[:, -1]
        return out
    betas = list(case.params["betas"])
    ref = th["rem"] if case.kind == "ipr" else th["theory"]
    gap = raw - ref[None] if case.kind == "ipr" else raw / ref[None] - 1.0
    return {f"beta={b:g}": gap[:, j] for j, b in enumerate(betas)}


def run_case(case: Case | str, size: str = "record", *, progress=print) -> dict:
    """Run both ladders of ``case`` at ``size``; returns the record (plain JSON types)."""
    case = CASES[case] if isinstance(case, str) else case
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}; got {size!r}")
    lad = case.ladders[size]
    base_T = case.params["T"]
    theories = {}
    rungs = []
    for axis, values in (("d", lad["d"]), ("T", lad["T"])):
        for value, inits in values:
            d, T = (value, base_T) if axis == "d" else (lad["T_at_d"], value)
            if T not in theories:
                theories[T] = theory(case, T, size)
            t0, c0 = time.perf_counter(), time.process_time()
            raw = rung_values(case, axis, d, T, inits)
            m = metrics(case, raw, theories[T])
            rung = dict(axis=axis, d=d, T=T, inits=inits, batches=-(-inits // case.batch),
                        seeds=[batch_seed(case, axis, value, b) for b in range(-(-inits // case.batch))],
                        metrics={k: v.tolist() for k, v in m.items()},
                        raw_first_batch=raw[:case.batch].tolist(),
                        raw_mean=raw.mean(0).tolist(), raw_se=(raw.std(0, ddof=1) / np.sqrt(len(raw))).tolist(),
                        wall_s=round(time.perf_counter() - t0, 2), cpu_s=round(time.process_time() - c0, 2))
            rungs.append(rung)
            if progress:
                k = _primary_key(case)
                g = np.asarray(m[k])
                progress(f"{case.name} {axis}-ladder d={d} T={T} inits={inits}: {k} gap {g.mean():+.4g} ± "
                         f"{g.std(ddof=1) / np.sqrt(len(g)):.2g} ({rung['cpu_s']:.1f} s CPU)")
    th = {str(T): {k: np.asarray(v).tolist() if k != "chain" else
                   dict(mean=np.asarray(v).mean(0).tolist(), se=(np.asarray(v).std(0, ddof=1) /
                                                                  np.sqrt(len(v))).tolist(), chains=len(v))
                   for k, v in t.items()} for T, t in theories.items()}
    return dict(case=case.name, kind=case.kind, source=case.source, title=case.title, size=size,
                params={k: (v[size] if isinstance(v, dict) else v) for k, v in case.params.items()},
                ladder={k: v for k, v in lad.items()}, batch=case.batch, primary=case.primary, theory=th, rungs=rungs)


def _primary_key(case: Case) -> str:
    return "map_1/T/mean" if case.kind == "blocks" else case.primary


# ----------------------------------------------------------------------------- records


@dataclasses.dataclass(frozen=True)
class Ladder:
    """One ladder of one metric: rung values ``x``, mean gaps, standard errors, and the fits."""

    axis: str
    x: np.ndarray
    gap: np.ndarray
    se: np.ndarray
    n: np.ndarray

    @property
    def fit(self):
        return extrapolate(self.x, self.gap, self.se)


def analyse(record: dict, metric: str, axis: str = "d") -> Ladder:
    """The ``axis`` ladder ("d" or "T") of ``metric`` (e.g. ``"map_1/T/mean"``, ``"beta=3"``) of a record."""
    rungs = [r for r in record["rungs"] if r["axis"] == axis]
    if not rungs:
        raise ValueError(f"the record has no {axis!r} ladder")
    if metric not in rungs[0]["metrics"]:
        raise ValueError(f"metric must be one of {sorted(rungs[0]['metrics'])}; got {metric!r}")
    vals = [np.asarray(r["metrics"][metric]) for r in rungs]
    return Ladder(axis, np.array([r[axis] for r in rungs], dtype=float), np.array([v.mean() for v in vals]),
                  np.array([v.std(ddof=1) / np.sqrt(len(v)) for v in vals]), np.array([len(v) for v in vals]))


def record_name(case: str, size: str = "record") -> str:
    return f"finite_size_{case}_{size}"


def load(case: str, size: str = "record") -> tuple[dict, dict]:
    """``(record, provenance)`` of the committed finite-size run of ``case`` (see :data:`CASES`)."""
    if case not in CASES:
        raise ValueError(f"case must be one of {sorted(CASES)}; got {case!r}")
    path = resources.files(__package__) / "records" / f"{record_name(case, size)}.json"
    if not path.is_file():
        raise FileNotFoundError(f"no committed record {path.name}: run `python -m sigprop.experiments finite-size "
                                f"--case {case} --size {size} --out-dir <sigprop/experiments/records>`")
    data = json.loads(path.read_text())
    return data["record"], data["provenance"]


def save(record: dict, path, *, command: str, seconds: float) -> None:
    prov = dict(provenance(command), cpu_seconds=round(seconds, 1),
                seeds="batch_seed(case, axis, rung, batch): listed per rung under 'seeds'")
    with open(path, "w") as fh:
        json.dump({"provenance": prov, "record": _rounded(record)}, fh, separators=(",", ":"))
        fh.write("\n")


#: Significant digits kept in a record (float32 Monte Carlo carries ~7).
DIGITS = 8


def _rounded(v):
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_rounded(x) for x in v]
    if isinstance(v, float):
        return float(f"{v:.{DIGITS}g}")
    return v


# ----------------------------------------------------------------------------- the claims ledger's rows


def ledger_row(case: str, z: float = 4.0) -> dict:
    """The claims ledger's reading of a committed record: the gap of the case's primary metric extrapolated to
    ``d -> infinity`` (``measured`` = ``b`` of the chosen fit, ``stderr`` its SE, ``stated`` 0, ``tolerance``
    ``z`` SE). For blocks the metric is the layer-mean gap to the finite-T map with ``Y_p = 1/T`` and
    ``corrected`` the same gap predicted by the exact two-row-REM ``Y_p`` (the layer mean of the two maps'
    difference). Keyword arguments of :class:`sigprop.claims.Measured`."""
    record, _ = load(case)
    c = CASES[case]
    ladder = analyse(record, _primary_key(c))
    fit = ladder.fit
    best = fit.best
    alt = "; ".join(f"{k}: b = {f.b:+.2g} +- {f.b_se:.2g}" + (f" (gamma = {f.gamma:.2f} +- {f.gamma_se:.2f})"
                                                                 if k == "free" else "")
                    for k, f in fit.fits.items() if k != fit.primary)
    rungs = ", ".join(f"{int(x)}: {g:+.4f} +- {s:.4f}" for x, g, s in zip(ladder.x, ladder.gap, ladder.se))
    model = ("a/d + b" if fit.primary == "gamma=1" else
             f"a d^-gamma + b with free gamma = {best.gamma:.2f} +- {best.gamma_se:.2f} (the 1/d model does not fit: "
             f"p = {fit.fits['gamma=1'].p:.1g})" if fit.primary == "free" else fit.primary)
    corrected, extra = None, ""
    if c.kind == "blocks":
        th = record["theory"][str(record["params"]["T"])]
        corrected = float(np.mean(np.asarray(th["map_rem"])[1:] - np.asarray(th["map_1/T"])[1:]))
        chain = float(np.mean(np.asarray(th["chain"]["mean"])[1:] - np.asarray(th["map_rem"])[1:]))
        rem = analyse(record, "map_rem/mean").fit.best
        extra = (f"; corrected = the same gap predicted by the exact two-row-REM Y_p (finite-T map with exact Y_p "
                 f"minus with 1/T, layer mean); MC minus that map extrapolates to {rem.b:+.4f} +- {rem.b_se:.4f}, the "
                 f"d = infinity Gram chain minus it is {chain:+.4f}")
    note = (f"{record['title']}; gap ({_primary_key(c)}) per width d, mean +- SE over {int(ladder.n.min())}-"
            f"{int(ladder.n.max())} networks each: {rungs}; weighted fit {model} (chi2/dof = {best.chi2_dof:.2f}, "
            f"p = {best.p:.2g}); {alt}{extra}. Committed record of python -m sigprop.experiments finite-size "
            f"--case {case}; tolerance {z:g} SE of b")
    return dict(stated=0.0, measured=best.b, stderr=best.b_se, tolerance=z * best.b_se, corrected=corrected, note=note)

