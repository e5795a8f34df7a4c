"""Training experiments too long for a book build, with their recorded runs.

``python -m sigprop.experiments regimes [--profile quick|record|full] [--out FILE]`` runs the
training experiment of Giorlandino & Goldt 2025, Fig. 1(f) and Fig. 5, at a stated size
(:func:`run_regimes`) and writes its result with provenance (command, date, machine, torch
version, git commit). The book page runs the ``quick`` size live and shows the ``record`` size
from :func:`load_record`, a file written by that command and committed with the package;
``tests/test_training.py`` re-runs the first steps of the record and checks they agree.
"""
from ._regimes import BLOCK, REGIMES, SIZES, Regime, load_record, regime_config, run_regimes

__all__ = ["BLOCK", "REGIMES", "SIZES", "Regime", "load_record", "regime_config", "run_regimes"]
