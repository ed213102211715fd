"""Shared fixtures: a runner for the real ``honestyd`` console script; hypothesis' draws made reproducible."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis.internal.conjecture import providers

ROOT = Path(__file__).resolve().parent.parent
HONESTYD = [sys.executable, "-m", "daemon.cli"]

Run = Callable[..., subprocess.CompletedProcess[str]]


def _no_local_constants() -> None:
    """Derandomized examples depend on the test's own strategies only.

    Hypothesis (6.131 on) also draws literals read from every project module already in ``sys.modules`` (those
    outside site-packages, the stdlib and files named like tests), so what earlier tests imported, and whether the
    checkout's path has a folder named ``tests``, changed the sequences of tests/daemon/ingest/test_model.py
    and tests/collectors/test_fuzz.py. There is no setting for it: the pool is emptied here (hypothesis' own
    constants stay), and ``test_the_draws_do_not_depend_on_the_modules_imported_before`` fails if this stops working.
    """
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty  # hypothesis internals (pinned < 7 in pyproject.toml)
    providers.CONSTANTS_CACHE.cache.clear()


_no_local_constants()


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
