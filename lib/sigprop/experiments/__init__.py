"""Experiments too long for a book build, with their recorded runs.

``python -m sigprop.experiments regimes [--size demo|quick|record|full] [--out FILE]`` runs the
training experiment of Giorlandino & Goldt 2025, Fig. 1(f) and Fig. 5, at a stated size
(:func:`run_regimes`) and writes its result with provenance (command, date, machine, torch
version, git commit). The book page runs a short demonstration live and shows the ``record`` size
from :func:`load_record`, a file written by that command and committed with the package;
``tests/test_training.py`` re-runs the first steps of the record and checks they agree.

``python -m sigprop.experiments finite-size [--case NAME ...] [--size quick|record|full]`` runs the
finite-size ladders of the chapter's theory-versus-Monte-Carlo comparisons (``._finite_size``: does each
gap close as ``d`` grows, and how does it depend on ``T``); :func:`load_finite_size` reads the committed
records, :func:`finite_size_ladder` turns one into a ladder with its ``a d^-gamma + b`` fits (``sigprop.stats._fits``),
and ``tests/test_finite_size.py`` replays the first batch of the smallest rung of each record.

``python -m sigprop.experiments noci-fig10 [--out FILE]`` measures how the gap between softmax attention and
Lemma 3.3 (Noci et al. 2022, Fig. 10) closes with the width (:mod:`noci_fig10`, about 5 CPU-minutes);
``noci_fig10.load()`` reads the committed record, ``tests/test_noci_fig10.py`` replays its smallest rung.

:mod:`aghajanyan_sec9` is the small training stand-in for Aghajanyan 2025, Section 9 (short enough to run
live on its chapter page), and :mod:`locater` the LocATER miniature of Bao et al. 2024, Sec. 7 (page
``chapters/bao2024/04``); both record their result over training seeds (``python -m sigprop.experiments
aghajanyan-sec9`` / ``locater``), which the claims ledger reads: a training result is a mean over seeds with its
standard error (:func:`seed_summary`), and a fresh seed is checked against the recorded spread
(:func:`seed_prediction`), never against the recorded bits.

Every record keeps its :func:`provenance`: command, date, git commit, machine, torch version, CPU capability and
threads.
"""
from . import _aghajanyan_sec9 as aghajanyan_sec9
from . import _locater as locater
from . import _noci_fig10 as noci_fig10
from ._finite_size import CASES as FINITE_SIZE_CASES
from ._finite_size import analyse as finite_size_ladder
from ._finite_size import load as load_finite_size
from ._finite_size import run_case as run_finite_size
from ._regimes import BLOCK, RECORD_SEEDS, REGIMES, SIZES, Regime, load_record, regime_config, run_regimes
from ._provenance import provenance
from ..stats._fits import extrapolate, fit_gap
from ._seeds import seed_prediction, seed_summary

__all__ = ["BLOCK", "REGIMES", "RECORD_SEEDS", "SIZES", "Regime", "load_record", "regime_config", "run_regimes",
           "FINITE_SIZE_CASES", "finite_size_ladder", "load_finite_size", "run_finite_size", "extrapolate", "fit_gap",
           "noci_fig10", "aghajanyan_sec9", "locater", "provenance", "seed_summary", "seed_prediction"]
