"""What ``honestyd run`` hands the daemon besides the config file: the flags that override it, and the clocks of the
test and benchmark hooks (``--clock-file``, ``--clock-warp``; time is a parameter)."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from daemon.config import Config
from daemon.ingest import Clock


@dataclass(frozen=True)
class Overrides:
    """Command-line flags that win over the config file, on start and on every reload."""

    state: Path | None = None
    db: Path | None = None
    listen: str | None = None

    def apply(self, config: Config) -> Config:
        """The config with these flags applied."""
        if self.state is not None:
            config = replace(config, state_root=self.state)
        if self.db is not None:
            config = replace(config, db_path=self.db)
        if self.listen is not None:
            config = replace(config, daemon=replace(config.daemon, listen=self.listen))
        return config


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
