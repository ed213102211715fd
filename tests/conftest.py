"""Shared fixtures: a runner for the real ``honestyd`` console script."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HONESTYD = [sys.executable, "-m", "daemon.cli"]

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def honestyd() -> Run:
    """Run ``honestyd ARGS`` as a real subprocess; returns the completed process (text mode)."""

    def run(
        *args: str | os.PathLike[str], check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [*HONESTYD, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"honestyd {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stderr}")
        return proc

    return run
