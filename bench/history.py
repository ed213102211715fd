"""History (not a test, not in CI): what a start costs on a store holding more than the windows.

    python bench/history.py [--agents 40] [--days 90] [--events-per-day 175] [--out bench/history-results.json]

cos-state grows without end; the daemon's model should follow the windows, not the history. One store of
``--days`` simulated days (``honestyd simulate``, fixed seed, ingested by ``honestyd ingest``), then three cold
starts of the daemon's model, each in a process of its own, evaluated at the simulated end:

* ``keep-all``: the model holding every record (what the daemon did before it let records go: the baseline);
* ``evict``: every record read, then let go at the first evaluation (a model built before the store grew);
* ``lean``: the daemon's start (``LiveFeed.load(store, at)``): only what it keeps is read.

Each prints its load and first-evaluation times, the records it holds, its peak and current RSS, and a hash of
every window's ``score --json``: the three hashes must be equal (the same scores). Ratios are against keep-all,
measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2026, 5, 1, tzinfo=UTC)

_PROBE = r"""
import hashlib, json, sys, time
sys.path.insert(0, {root!r})
from collectors.rfc3339 import parse_ts
from daemon.config import Config
from daemon.modelkeeper import LiveFeed
from daemon.store import Store
from scorers.score import to_json
db, at, mode = sys.argv[1], parse_ts(sys.argv[2]), sys.argv[3]
store = Store.open(db, readonly=True)
feed = LiveFeed(Config())
feed.model.evicts = mode != "keep-all"
t0 = time.perf_counter()
feed.load(store, at if mode == "lean" else None)
t1 = time.perf_counter()
windows = feed.evaluate(at)
t2 = time.perf_counter()
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({{
    "mode": mode, "load_s": t1 - t0, "evaluate_s": t2 - t1, "records": len(feed.model.records()),
    "hwm_mb": int(status["VmHWM"].split()[0]) / 1024, "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
    "evicted_to": str(feed.model.evicted_to),
    "windows": hashlib.sha256(json.dumps({{k: to_json(v) for k, v in windows.items()}}, sort_keys=True)
                              .encode()).hexdigest()[:16],
}}))
"""


def _honestyd(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "daemon.cli", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True)
    return done.stdout.strip().splitlines()[-1]


def run(agents: int, days: int, per_day: int, work: Path) -> dict[str, Any]:
    """Simulate, ingest, and start the model three ways; the figures as one JSON object."""
    state, db = work / "state", work / "h.db"
    simulated = _honestyd("simulate", "--seed", "1", "--out", str(state), "--agents", str(agents), "--days",
                          str(days), "--events-per-day", str(per_day), "--start", START.isoformat())
    ingested = _honestyd("ingest", "--state", str(state), "--db", str(db))
    end = (START + timedelta(days=days)).isoformat()
    probe = _PROBE.format(root=str(ROOT))
    rows = []
    for mode in ("keep-all", "evict", "lean"):
        out = subprocess.run([sys.executable, "-c", probe, str(db), end, mode], check=True, capture_output=True,
                             text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    base = rows[0]
    for r in rows:
        r["start_s"] = r["load_s"] + r["evaluate_s"]
        r["start_vs_keep_all"] = r["start_s"] / (base["load_s"] + base["evaluate_s"])
        r["hwm_vs_keep_all"] = r["hwm_mb"] / base["hwm_mb"]
    return {"agents": agents, "days": days, "events_per_day": per_day, "simulated": simulated, "ingested": ingested,
            "evaluated_at": end, "same_scores": len({r["windows"] for r in rows}) == 1, "starts": rows,
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "platform": platform.platform()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=40)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--events-per-day", type=int, default=175, help="decisions per agent per day")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "history-results.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="honestyd-history-"))
    try:
        result = run(args.agents, args.days, args.events_per_day, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{'start':9} {'load':>7} {'evaluate':>9} {'records':>9} {'peak RSS':>9} {'vs keep-all':>12}  windows")
    for r in result["starts"]:
        print(f"{r['mode']:9} {r['load_s']:6.1f}s {r['evaluate_s']:8.1f}s {r['records']:9,} {r['hwm_mb']:7.0f}MB"
              f" {r['start_vs_keep_all']:5.2f}× time {r['hwm_vs_keep_all']:4.2f}× RSS  {r['windows']}")
    print("same scores:", result["same_scores"])
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
