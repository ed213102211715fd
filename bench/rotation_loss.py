"""Rotation faster than the pass: lines written, stored, lost, and what honestyd counted as lost (docs/reliability.md).

One log, ``--lines`` lines at ``--rate`` lines/s, renamed to ``a.jsonl.1`` (over the previous one) every
``--every`` seconds, under ``honestyd run`` with its default debounce; prints one line of figures.

    python -m bench.rotation_loss --every 0.02
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path

from tests.daemon_harness import daemon, stop, write_config


def _line(i: int) -> bytes:
    obj = {"id": f"e{i}", "ts": "2026-01-01T00:00:00Z", "agent": "ada", "kind": "dm", "thread": "t", "text": "x"}
    return (json.dumps(obj) + "\n").encode()


def _stored(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


def run(lines: int, rate: float, every: float) -> str:
    """Write and rotate under a daemon; the figures as one line."""
    tmp = Path(tempfile.mkdtemp(prefix="rotation-loss-"))
    root = tmp / "state"
    (root / "heartbeats").mkdir(parents=True)
    log = root / "heartbeats" / "a.jsonl"
    log.write_bytes(b"")
    with daemon(tmp, root, config=write_config(tmp / "config.toml")) as d:
        start = last = time.monotonic()
        written = 0
        f = log.open("ab")
        while written < lines:
            now = time.monotonic()
            while written < min(int((now - start) * rate), lines):
                f.write(_line(written))
                written += 1
            f.flush()
            if now - last >= every:
                f.close()
                os.replace(log, log.with_name("a.jsonl.1"))
                f = log.open("ab")
                last = now
            time.sleep(0.002)
        f.close()
        time.sleep(4)  # two rescans with nothing new: what is not stored by then is lost
        stored = _stored(tmp / "honestyd.db")
        counted_lines = d.metric("honesty_ingest_lost_lines_total") or 0
        counted_bytes = d.metric("honesty_ingest_lost_bytes_total") or 0
        stop(d)
    return (f"rotation every {every:g} s: {lines} lines written, {stored} stored, {lines - stored} lost;"
            f" counted lost: {counted_lines:.0f} lines, {counted_bytes:.0f} bytes")


def main() -> None:
    """Parse the arguments and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=2_000.0, help="lines a second")
    parser.add_argument("--every", type=float, default=0.02, help="seconds between two rotations")
    args = parser.parse_args()
    print(run(args.lines, args.rate, args.every))


if __name__ == "__main__":
    main()
