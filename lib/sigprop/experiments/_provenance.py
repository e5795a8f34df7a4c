"""Where and how a committed record was made: command, date, machine, torch, threads, git commit."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess

import torch

__all__ = ["provenance"]


def provenance(command: str, **extra) -> dict:
    """Provenance of a record written by ``command`` (``extra`` entries are appended, e.g. seeds)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(__file__), timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return dict(command=command, date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                machine=platform.machine(), processor=platform.processor() or None, cpus=os.cpu_count(),
                torch=torch.__version__, threads=torch.get_num_threads(), git_commit=commit, **extra)
