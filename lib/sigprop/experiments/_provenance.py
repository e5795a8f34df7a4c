"""Where and how a committed record was made: command, date, git commit (and whether the package's code had
uncommitted changes), machine, torch, CPU capability, threads.

The CPU capability is the instruction set PyTorch's CPU kernels dispatch to (``DEFAULT``, ``AVX2``, ``AVX512``;
``ATEN_CPU_CAPABILITY`` lowers it); with the thread count and the torch version it is what makes a run on one CPU
differ from a run on another in the last bits, so a record says which it was.
"""
from __future__ import annotations

import datetime
import os
import platform
import subprocess

import torch

__all__ = ["provenance"]


def provenance(command: str, **extra) -> dict:
    """Provenance of a record written by ``command`` (``extra`` entries are appended, e.g. seeds)."""
    lib = os.path.dirname(os.path.dirname(__file__))          # the sigprop package: its code made the record
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=lib, timeout=10).stdout.strip() or None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "*.py"], capture_output=True, text=True,
                                    cwd=lib, timeout=10).stdout.strip()) if commit else None
    except (OSError, subprocess.SubprocessError):
        commit = dirty = None
    return dict(command=command, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                machine=platform.machine(), processor=platform.processor() or None, cpus=os.cpu_count(),
                torch=torch.__version__, cpu_capability=torch.backends.cpu.get_cpu_capability(),
                threads=torch.get_num_threads(), python=platform.python_version(), git_commit=commit,
                git_dirty=dirty, **extra)
