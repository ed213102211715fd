"""audits: the daemon under a crowd of 30-day audits — does it still answer /healthz and /metrics, and ingest?

The latency part's daemon (the 200-agent store, ~940k events over 30 days) is measured twice in the same run:
first idle (the baseline), then while ``CLIENTS`` concurrent clients (a separate process: ``python -m
bench.parts.audits load``) each ask for one agent's 30-day audit after another, waiting out any ``Retry-After`` a
429 names, as a well-behaved client does. Both phases poll ``/healthz`` every 20 ms and ``/metrics`` every 100 ms
on kept-alive connections (each request timed), and append one event to a live heartbeat file every 200 ms,
noting when each reaches the store (read-only reads of the database: the ingest delay) and when ``/metrics``
counts it (ingest and an evaluation).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import random
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.core import PartResult, Target, log, percentile, ratio_target
from bench.data import Dataset, probe_line

#: Concurrent audit clients (the figure of the issue: 100 concurrent 30-day audits).
CLIENTS = 100
CLIENTS_QUICK = 20
#: A request that has not answered in this long is counted with this time (a lower bound).
REQUEST_TIMEOUT = 30.0
#: The longest Retry-After a load client waits (a client that was told more waits this).
MAX_RETRY_AFTER = 5.0


@dataclass
class Poller:
    """GET ``path`` every ``every`` seconds on one kept-alive connection; every request's time (and body)."""

    port: int
    path: str
    every: float
    stop: threading.Event
    on_body: Callable[[bytes, float], None] | None = None
    times: list[float] = field(default_factory=list)
    errors: int = 0

    def run(self) -> None:
        conn: http.client.HTTPConnection | None = None
        while not self.stop.is_set():
            started = time.perf_counter()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
                conn.request("GET", self.path)
                resp = conn.getresponse()
                body = resp.read()
                if resp.status != 200:
                    raise OSError(f"{self.path} answered {resp.status}")
            except (OSError, http.client.HTTPException):
                self.errors += 1
                self.times.append(time.perf_counter() - started)  # a failure counts with the time it took
                if conn is not None:
                    conn.close()
                conn = None
            else:
                done = time.perf_counter()
                self.times.append(done - started)
                if self.on_body is not None:
                    self.on_body(body, done)
            self.stop.wait(max(0.0, self.every - (time.perf_counter() - started)))
        if conn is not None:
            conn.close()


@dataclass
class Arrivals:
    """When each appended event was first seen (in the store, in /metrics), as a count of new events at a time."""

    seen: dict[int, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def saw(self, count: int, at: float) -> None:
        with self.lock:
            for i in range(count):
                self.seen.setdefault(i, at)

    def delays(self, appended: list[float], finished: float) -> tuple[list[float], int]:
        """Per event: seen − appended (an event never seen counts with the time it waited); how many never."""
        with self.lock:
            out = [self.seen[i] - t if i in self.seen else finished - t for i, t in enumerate(appended)]
            return out, sum(i not in self.seen for i in range(len(appended)))


def _metrics_count(body: bytes) -> int:
    from bench.parts.daemon import counter

    return counter(body)


def _store_watch(db: Path, base: int, arrivals: Arrivals, stop: threading.Event) -> None:
    """Every 20 ms, how many events rows the probe added (rowids above ``base``), read on a read-only connection."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    try:
        while not stop.wait(0.02):
            try:
                (count,) = conn.execute("SELECT count(*) FROM events WHERE rowid > ?", (base,)).fetchone()
            except sqlite3.OperationalError:
                continue  # busy for a moment: the next look
            arrivals.saw(int(count), time.perf_counter())
    finally:
        conn.close()


def _top_rowid(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, isolation_level=None)
    try:
        return int(conn.execute("SELECT coalesce(max(rowid), 0) FROM events").fetchone()[0])
    finally:
        conn.close()


def _append_events(path: Path, agent: str, end: datetime, first: int, count: int, every: float,
                   appended: list[float]) -> None:
    with path.open("ab", buffering=0) as f:
        start = time.perf_counter()
        for i in range(count):
            delay = start + i * every - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            ts = (end - timedelta(hours=2) + timedelta(seconds=first + i)).strftime("%Y-%m-%dT%H:%M:%SZ")
            f.write(probe_line(agent, first + i, ts))
            appended.append(time.perf_counter())


def _summary(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_s": None, "p90_s": None, "p99_s": None, "max_s": None}
    return {"p50_s": percentile(values, 50), "p90_s": percentile(values, 90), "p99_s": percentile(values, 99),
            "max_s": max(values), "over_50ms": sum(v > 0.050 for v in values) / len(values)}


def measure_phase(port: int, db: Path, ds: Dataset, first: int, seconds: float, catch_up: float) -> dict[str, Any]:
    """One phase: poll /healthz and /metrics, append an event every 200 ms for ``seconds``, wait for them."""
    stop = threading.Event()
    in_store, in_metrics = Arrivals(), Arrivals()
    base_rowid = _top_rowid(db)
    base_count: list[int] = []

    def on_metrics(body: bytes, at: float) -> None:
        count = _metrics_count(body)
        if not base_count:
            base_count.append(count)
        in_metrics.saw(count - base_count[0], at)

    healthz = Poller(port, "/healthz", 0.02, stop)
    metrics = Poller(port, "/metrics", 0.1, stop, on_body=on_metrics)
    threads = [threading.Thread(target=p.run, name=f"bench-{p.path}", daemon=True) for p in (healthz, metrics)]
    threads.append(threading.Thread(target=_store_watch, args=(db, base_rowid, in_store, stop), daemon=True))
    for t in threads:
        t.start()
    deadline = time.perf_counter() + 30.0
    while not base_count and time.perf_counter() < deadline:  # the count before the first append
        time.sleep(0.01)
    appended: list[float] = []
    end = datetime.fromisoformat(ds.end.replace("Z", "+00:00"))
    count = round(seconds / 0.2)
    _append_events(ds.work / ds.live_rel, ds.live_agent, end, first, count, 0.2, appended)
    wait_until = time.perf_counter() + catch_up
    while time.perf_counter() < wait_until and len(in_metrics.seen) < count:
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join(REQUEST_TIMEOUT + 5)
    finished = time.perf_counter()
    store_delays, store_missing = in_store.delays(appended, finished)
    metrics_delays, metrics_missing = in_metrics.delays(appended, finished)
    return {
        "appended": len(appended),
        "healthz": {**_summary(healthz.times), "requests": len(healthz.times), "errors": healthz.errors},
        "metrics": {**_summary(metrics.times), "requests": len(metrics.times), "errors": metrics.errors},
        "ingest": {**_summary(store_delays), "never": store_missing},
        "event_to_metrics": {**_summary(metrics_delays), "never": metrics_missing},
    }


def start_load(python: str, port: int, agents: list[str], clients: int, seconds: float,
               out: Path) -> subprocess.Popen[bytes]:
    """The load clients, in a process of their own (their parsing must not slow the pollers)."""
    argv = [python, "-m", "bench.parts.audits", "load", "--port", str(port), "--clients", str(clients),
            "--seconds", str(seconds), "--out", str(out), "--agents", ",".join(agents)]
    return subprocess.Popen(argv, cwd=Path(__file__).resolve().parents[2])


def agents_of(port: int) -> list[str]:
    """Every agent the daemon lists (GET /v1/agents)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    try:
        conn.request("GET", "/v1/agents")
        return sorted(json.loads(conn.getresponse().read())["agents"])
    finally:
        conn.close()


def measure_audit_load(port: int, db: Path, ds: Dataset, tmp: Path, python: str, quick: bool) -> dict[str, Any]:
    """The idle phase, then the same under ``CLIENTS`` concurrent 30-day audit clients."""
    seconds = 8.0 if quick else 30.0
    catch_up = 10.0 if quick else 30.0
    clients = CLIENTS_QUICK if quick else CLIENTS
    log(f"  audits: idle phase ({seconds:.0f} s)")
    idle = measure_phase(port, db, ds, 100_000, seconds, catch_up)
    agents = [a for a in agents_of(port) if a != "ci"]
    out = tmp / "audit-load.json"
    out.unlink(missing_ok=True)
    warm_up = 3.0
    log(f"  audits: {clients} concurrent 30-day audit clients ({seconds:.0f} s after a {warm_up:.0f} s warm-up)")
    load = start_load(python, port, agents, clients, warm_up + seconds + catch_up + 5, out)
    try:
        time.sleep(warm_up)
        busy = measure_phase(port, db, ds, 200_000, seconds, catch_up)
    finally:
        load.terminate()  # SIGTERM: it writes what it counted and exits
        try:
            load.wait(REQUEST_TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            load.kill()
            load.wait(10)
    clients_out = json.loads(out.read_text()) if out.exists() else {}
    return {"clients": clients, "agents": len(agents), "idle": idle, "load": busy, "audit_clients": clients_out}


def audits_result(m: dict[str, Any], seconds: float, quick: bool, key: str) -> PartResult:
    """Targets: /healthz and /metrics p99 under load ≤ 50 ms; the rest beside them as ratios to the idle phase."""
    result = PartResult("audits", reps=1, seconds=seconds)
    idle, load = m["idle"], m["load"]
    result.figures = {"data_set": key, "clients": m["clients"], "agents": m["agents"], "idle": idle, "load": load,
                      "audit_clients": m["audit_clients"]}
    c = m["clients"]
    result.targets = [
        Target(f"/healthz p99, {c} audits running", load["healthz"]["p99_s"], "s", "<=", 0.050,
               baseline=idle["healthz"]["p99_s"], baseline_name="idle (s)"),
        Target(f"/metrics p99, {c} audits running", load["metrics"]["p99_s"], "s", "<=", 0.050,
               baseline=idle["metrics"]["p99_s"], baseline_name="idle (s)"),
        ratio_target(f"/healthz p50, {c} audits ÷ idle", load["healthz"]["p50_s"], idle["healthz"]["p50_s"],
                     float("inf"), "idle"),
        ratio_target(f"append → stored p99, {c} audits ÷ idle", load["ingest"]["p99_s"], idle["ingest"]["p99_s"],
                     float("inf"), "idle", note=f"p50 {load['ingest']['p50_s']} s under load"),
        ratio_target(f"append → /metrics p99, {c} audits ÷ idle", load["event_to_metrics"]["p99_s"],
                     idle["event_to_metrics"]["p99_s"], float("inf"), "idle"),
    ]
    result.at_quick_size(quick)
    done = m["audit_clients"]
    result.notes.append(f"audit clients: {done.get('ok', 0)} audits served, {done.get('refused', 0)} answered 429,"
                        f" {done.get('errors', 0)} errors; served audit p50 {done.get('p50_s')} s")
    return result


# --- the load clients (a process of their own)


async def _client(session: Any, base: str, agents: list[str], rng: random.Random, deadline: float,
                  tally: dict[str, Any]) -> None:
    import aiohttp

    while time.monotonic() < deadline:
        agent = rng.choice(agents)
        started = time.perf_counter()
        try:
            async with session.get(f"{base}/v1/agents/{agent}/audit", params={"window": "30d"}) as resp:
                await resp.read()
                status, retry = resp.status, resp.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError):
            tally["errors"] += 1
            await asyncio.sleep(0.1)
            continue
        if status == 200:
            tally["ok"] += 1
            tally["times"].append(time.perf_counter() - started)
        elif status == 429:
            tally["refused"] += 1
            await asyncio.sleep(min(float(retry or 1), MAX_RETRY_AFTER))
        else:
            tally["errors"] += 1
            await asyncio.sleep(0.1)


async def _load(port: int, agents: list[str], clients: int, seconds: float, out: Path) -> None:
    import signal

    import aiohttp

    tally: dict[str, Any] = {"ok": 0, "refused": 0, "errors": 0, "times": []}
    deadline = time.monotonic() + seconds
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as session:
        base = f"http://127.0.0.1:{port}"
        tasks = [asyncio.create_task(_client(session, base, agents, random.Random(i), deadline, tally))
                 for i in range(clients)]
        stop = asyncio.create_task(stopping.wait())
        await asyncio.wait([*tasks, stop], return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        stop.cancel()
    times = tally.pop("times")
    tally.update(_summary(times))
    out.write_text(json.dumps(tally))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.parts.audits")
    parser.add_argument("mode", choices=["load"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--agents", required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    asyncio.run(_load(args.port, args.agents.split(","), args.clients, args.seconds, args.out))


if __name__ == "__main__":
    main(sys.argv[1:])
