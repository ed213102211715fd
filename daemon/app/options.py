"""What ``honestyd run`` hands the daemon besides the config file: the flags that override it (defined with the config,
which ``honestyd run`` reads before it imports the daemon), and the clocks of the test and benchmark hooks
(``--clock-file``, ``--clock-warp``; time is a parameter)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path

from daemon.config import Overrides
from daemon.ingest import Clock

__all__ = ["Overrides", "file_clock", "warped_clock"]


def warped_clock(origin: datetime, since: float, rate: float) -> Clock:
    """A clock ``rate`` times faster than the system's that read ``origin`` at the Unix time ``since`` (benchmark
    hook: ``bench/soak.py --days-per-minute`` runs weeks in minutes, its writers on the same function). Computed,
    not read from a file: the daemon looks at its clock for each log of each ingest pass, and a file read each time
    is a cost no daemon on the system clock pays (docs/performance.md)."""

    def now() -> datetime:
        return origin + timedelta(seconds=(time.time() - since) * rate)

    return now


def file_clock(path: Path) -> Clock:
    """A clock read from a file holding one RFC 3339 time (test hook: time is a parameter)."""
    from collectors.rfc3339 import parse_ts

    def now() -> datetime:
        return parse_ts(path.read_text(encoding="utf-8").strip())

    return now
