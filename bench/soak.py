"""Soak (not a test, not in CI): a real ``honestyd run`` under 100 agents writing 2,000 events/s for N minutes.

    python bench/soak.py [--minutes 10] [--rate 2000] [--agents 100] [--days-per-minute 0] [--out FILE]

The state is ``honestyd simulate`` (100 agents, the last day), so the daemon scores a realistic state from the
start. Then one writer thread appends to every agent's heartbeat log at ``--rate`` events/s in total (a quarter of
them decisions), and renames each log once a minute (staggered: agent i at i/N of every minute; the writer puts
one more line into the renamed file, as a real writer that has not reopened yet would). Every 5 s a sample:

* written / ingested / backlog, where ingested is ``honesty_ingest_records_total{source="heartbeats"}`` as
  /metrics shows it (it moves with each evaluation) and ``db backlog`` is the same from the database itself;
* append→metric latency: a probe agent appends one decision and the time until its
  ``honesty_window_decisions`` on /metrics counts it (polled every 20 ms; the last probe that completed);
* the daemon's RSS (and its peak), its CPU since the last sample (% of one core), and the WAL size.

With ``--days-per-minute D`` the daemon runs on a clock that moves D simulated days each real minute (its
``--clock-warp`` hook), and the writers stamp their events with the same clock: with D = 6, ten minutes are 60 days,
so the 30-day window fills after five and records leave it (and the daemon's memory: it lets go of records a day
behind the longest window) for the rest of the run. That is the steady state a daemon reaches after a month; at
real time a ten-minute soak only ever adds records to its windows.

At the end the writer stops and the soak waits until both backlogs are 0 (the drain time), stops the daemon with
SIGTERM, and checks that every line written is stored exactly once. It prints a table and writes the JSON.
Everything runs on loopback and stops by itself.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
SAMPLE_EVERY = 5.0
#: How often the probe polls /metrics while it waits (the latency figures are this coarse: it was 0.1 s, which
#: added ~50 ms to every figure; the performance harness polls every 5 ms, with one event at a time).
PROBE_POLL = 0.02
DECISION_KINDS = ("dm",)
OTHER_KINDS = ("progress", "note", "commit", "run_finished")


def _ts(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


Now = Callable[[], datetime]


def real_now() -> datetime:
    return datetime.now(UTC)


class SimClock:
    """A clock ``scale`` times faster than real time from now on, which the daemon computes the same way
    (``--clock-warp``): both are functions of the system's Unix time."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.origin = datetime.now(UTC)
        self.began = time.time()

    def now(self) -> datetime:
        return self.origin + timedelta(seconds=(time.time() - self.began) * self.scale)

    def argument(self) -> str:
        """The daemon's ``--clock-warp`` value."""
        return f"{_ts(self.origin)},{self.began!r},{self.scale!r}"


class Writer(threading.Thread):
    """All agents' appends at ``rate`` events/s; rename rotation of every log once a minute, staggered."""

    def __init__(self, logs: dict[str, Path], rate: int, rotate_every: float = 60.0, seed: int = 1,
                 now: Now = real_now) -> None:
        super().__init__(daemon=True)
        self.now = now
        self.logs = logs
        self.agents = sorted(logs)
        self.rate = rate
        self.rotate_every = rotate_every
        self.rng = random.Random(seed)
        self.written = 0
        self.rotations = 0
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def _line(self, agent: str, seq: int) -> bytes:
        n = self.rng.random()
        kind = DECISION_KINDS[0] if n < 0.25 else OTHER_KINDS[int(n * 100) % len(OTHER_KINDS)]
        text = f"soak {seq}: see https://docs.example.org/soak/{seq % 50}" if n < 0.2 else f"soak {seq} working"
        body = {"id": f"soak-{agent}-{seq}", "ts": _ts(self.now()), "agent": agent, "kind": kind,
                "thread": f"soak-{seq % 37}", "text": text}
        return (json.dumps(body) + "\n").encode()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:
            self.error = exc
            raise

    def _run(self) -> None:
        fds = {a: os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) for a, p in self.logs.items()}
        seq = dict.fromkeys(self.agents, 0)
        start = time.monotonic()
        n = len(self.agents)
        # agent i is rotated at i/n of every period
        next_rotation = {a: start + self.rotate_every * (i + 1) / n for i, a in enumerate(self.agents)}
        sent = 0
        while not self.stop_event.is_set():
            due = int((time.monotonic() - start) * self.rate) - sent
            batch: dict[str, list[bytes]] = {}
            for k in range(max(due, 0)):
                agent = self.agents[(sent + k) % n]
                batch.setdefault(agent, []).append(self._line(agent, seq[agent]))
                seq[agent] += 1
            for agent, lines in batch.items():
                os.write(fds[agent], b"".join(lines))
                self.written += len(lines)
            sent += max(due, 0)
            now = time.monotonic()
            for agent in self.agents:
                if now >= next_rotation[agent]:
                    next_rotation[agent] += self.rotate_every
                    self.rotations += 1
                    live = self.logs[agent]
                    os.rename(live, live.with_name(f"{live.name}.{self.rotations}"))
                    os.write(fds[agent], self._line(agent, seq[agent]))  # one more into the renamed file
                    seq[agent] += 1
                    self.written += 1
                    os.close(fds[agent])
                    fds[agent] = os.open(live, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            time.sleep(0.02)
        for fd in fds.values():
            os.close(fd)


class Probe(threading.Thread):
    """Appends one decision per interval; measures until /metrics counts it.

    At real time the decisions are all agent ``soak-probe``'s and the probe waits for its 24h window to count them
    all. On a fast clock the 24h window holds only the last few, so they go round ``agents`` agents
    (``soak-probe-K``), each one's previous decision two days behind its next: a decision is counted when its
    agent's 24h window shows one.
    """

    def __init__(self, path: Path, base: str, interval: float, now: Now = real_now, agents: int = 1) -> None:
        super().__init__(daemon=True)
        self.now = now
        self.path = path
        self.base = base
        self.interval = interval
        self.agents = agents
        self.sent = 0
        self.latencies: list[tuple[float, float]] = []  # (when written, seconds to /metrics)
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            began = time.monotonic()
            agent = "soak-probe" if self.agents == 1 else f"soak-probe-{self.sent % self.agents}"
            line = {"id": f"probe-{self.sent}", "ts": _ts(self.now()), "agent": agent, "kind": "dm", "text": "probe"}
            with self.path.open("a") as f:
                f.write(json.dumps(line) + "\n")
            self.sent += 1
            expected = self.sent if self.agents == 1 else 1
            while not self.stop_event.is_set():
                decisions = metric(self.base, f'honesty_window_decisions{{agent="{agent}",window="24h"}}')
                if decisions is not None and decisions >= expected:
                    self.latencies.append((began, time.monotonic() - began))
                    break
                time.sleep(PROBE_POLL)
            self.stop_event.wait(max(0.0, self.interval - (time.monotonic() - began)))


def metrics_text(base: str) -> str:
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as resp:
        return str(resp.read().decode("utf-8"))


def metric(base: str, series: str) -> float | None:
    """One sample's value by its exact exposition prefix (``name{labels}``), else None."""
    try:
        text = metrics_text(base)
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def db_count(db: Path, where: str = "") -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute(f"SELECT count(*) FROM events {where}").fetchone()[0])
    finally:
        conn.close()


@dataclass
class Sample:
    t: float
    written: int
    ingested_metric: int
    backlog_metric: int
    backlog_db: int
    latency_s: float | None
    rss_mb: float
    cpu_pct: float
    wal_mb: float
    speed_ms: float


@dataclass
class Result:
    minutes: float
    rate: int
    agents: int
    days_per_minute: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait(predicate: Any, timeout: float, what: str) -> float:
    start = time.monotonic()
    while True:
        try:
            if predicate():
                return time.monotonic() - start
        except (OSError, sqlite3.OperationalError):
            pass
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


HEADER = (f"{'t(s)':>6} {'written':>9} {'ingested':>9} {'backlog':>8} {'db-backlog':>10} {'latency(s)':>10}"
          f" {'RSS(MB)':>8} {'CPU%':>5} {'WAL(MB)':>7} {'speed(ms)':>9}")
#: The fixed work whose CPU time each sample takes as the machine's speed (see machine_speed_ms).
SPEED_LOOP = 300_000


def machine_speed_ms() -> float:
    """The CPU time, in ms, of a fixed pure-Python loop: the machine's speed at this moment.

    On this project's 2-core VM the same loop takes from ~9 to ~21 ms of CPU from one moment to the next with
    nothing else running (the host's load, invisible as steal time), and the daemon's CPU per event, its share of a
    core and its latency move with it. Each sample records it, so runs are compared at the speed they ran at. Thread
    CPU time: waiting for the GIL (the writer's and the probe's threads) does not count.
    """
    start = time.thread_time()
    total = 0
    for i in range(SPEED_LOOP):
        total += i
    return round((time.thread_time() - start) * 1000, 1)


def row(s: Sample) -> str:
    latency = f"{s.latency_s:.2f}" if s.latency_s is not None else "-"
    return (f"{s.t:6.0f} {s.written:9d} {s.ingested_metric:9d} {s.backlog_metric:8d} {s.backlog_db:10d}"
            f" {latency:>10} {s.rss_mb:8.0f} {s.cpu_pct:5.0f} {s.wal_mb:7.1f} {s.speed_ms:9.1f}")


def soak(minutes: float, rate: int, agents: int, work: Path, days_per_minute: float = 0.0) -> Result:
    state, db = work / "state", work / "honestyd.db"
    start_at = datetime.now(UTC) - timedelta(days=1)
    subprocess.run([PYTHON, "-m", "daemon.cli", "simulate", "--seed", "7", "--out", str(state), "--agents",
                    str(agents), "--days", "1", "--start", _ts(start_at)], cwd=ROOT, check=True,
                   capture_output=True)
    names = list(json.loads((state / ".sim" / "agents.json").read_text()))[:agents]
    logs = {a: state / "heartbeats" / f"{a}.jsonl" for a in names}
    config = work / "config.toml"
    config.write_text((state / ".sim" / "config.toml").read_text())  # production [daemon] defaults
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = work / "daemon.log"
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    command = [PYTHON, "-m", "daemon.cli", "run", "--config", str(config), "--state", str(state), "--db", str(db),
               "--listen", f"127.0.0.1:{port}"]
    clock = SimClock(days_per_minute * 24 * 60) if days_per_minute else None
    now: Now = real_now
    if clock is not None:
        command += ["--clock-warp", clock.argument()]
        now = clock.now
    with log_path.open("w") as log_fh:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log_fh, stderr=subprocess.STDOUT, env=env)
    result = Result(minutes, rate, agents, days_per_minute)
    writer = Writer(logs, rate, now=now)
    # On a fast clock: enough probe agents that each one's previous decision is two days behind its next.
    probe_agents = 1 if clock is None else math.ceil(2 * 86400 / (SAMPLE_EVERY * clock.scale)) + 1
    probe = Probe(state / "heartbeats" / "soak-probe.jsonl", base, SAMPLE_EVERY, now=now, agents=probe_agents)
    try:
        started = wait(lambda: urllib.request.urlopen(f"{base}/readyz", timeout=5).status == 200, 120, "readiness")
        baseline_metric = int(metric(base, 'honesty_ingest_records_total{source="heartbeats"}') or 0)
        baseline_db = db_count(db)
        print(f"daemon ready in {started:.1f} s on the simulated state ({baseline_db} events);"
              f" soaking {minutes:g} min at {rate} events/s over {agents} agents")
        print(HEADER, flush=True)
        t0 = time.monotonic()
        writer.start()
        probe.start()
        last_cpu, last_t = cpu_seconds(proc.pid), t0
        while time.monotonic() - t0 < minutes * 60:
            time.sleep(SAMPLE_EVERY - (time.monotonic() - t0) % SAMPLE_EVERY)
            if proc.poll() is not None:
                raise SystemExit(f"the daemon exited with {proc.returncode}; see {log_path}")
            result.samples.append(take_sample(proc.pid, base, db, t0, writer, probe, baseline_metric, baseline_db,
                                              (last_cpu, last_t)))
            last_cpu, last_t = cpu_seconds(proc.pid), time.monotonic()
            print(row(result.samples[-1]), flush=True)
        writer.stop_event.set()
        probe.stop_event.set()
        writer.join(10)
        probe.join(60)
        if writer.error is not None:
            raise SystemExit(f"writer failed: {writer.error!r}")
        expected = writer.written + probe.sent
        stopped_at = time.monotonic()
        drain_db = wait(lambda: db_count(db) - baseline_db >= expected, 600, "the database to catch up")
        wait(lambda: (metric(base, 'honesty_ingest_records_total{source="heartbeats"}') or 0) - baseline_metric
             >= expected, 600, "/metrics to catch up")
        drain_metric = time.monotonic() - stopped_at
        result.samples.append(take_sample(proc.pid, base, db, t0, writer, probe, baseline_metric, baseline_db,
                                          (last_cpu, last_t)))
        print(row(result.samples[-1]), flush=True)
        peak_mb = proc_status(proc.pid).get("VmHWM", 0) / 1024
        term = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(120)
        took_to_stop = time.monotonic() - term
        stored = db_count(db, "WHERE id LIKE 'soak-%' OR id LIKE 'probe-%'")
        distinct = sqlite3.connect(f"file:{db}?mode=ro", uri=True).execute(
            "SELECT count(DISTINCT id) FROM events WHERE id LIKE 'soak-%' OR id LIKE 'probe-%'").fetchone()[0]
        latencies = sorted(s for _, s in probe.latencies)
        rss = [s.rss_mb for s in result.samples]
        speeds = sorted(s.speed_ms for s in result.samples)
        second_half = [s.rss_mb for s in result.samples if s.t >= minutes * 30]
        result.summary = {
            "events_written": expected, "rotations": writer.rotations, "stored": stored,
            "lost": max(expected - distinct, 0), "doubled": stored - distinct,
            "drain_after_stop_s": {"database": round(drain_db, 2), "metrics": round(drain_metric, 2)},
            "latency_s": {"probes": len(latencies),
                          "p50": _pct(latencies, 50), "p95": _pct(latencies, 95), "p99": _pct(latencies, 99),
                          "max": latencies[-1] if latencies else None},
            "daemon_cpu_pct_mean": round(sum(s.cpu_pct for s in result.samples) / len(result.samples), 1),
            "machine_speed_ms": {"min": min(speeds), "median": speeds[len(speeds) // 2], "max": max(speeds)},
            "backlog_max": {"metric": max(s.backlog_metric for s in result.samples),
                            "db": max(s.backlog_db for s in result.samples)},
            "rss_mb": {"first_sample": rss[0], "last_sample": rss[-1], "max_sampled": max(rss),
                       "second_half": [min(second_half, default=None), max(second_half, default=None)],
                       "peak_hwm": round(peak_mb, 1), **_thirds(rss)},
            "simulated_days": round(minutes * days_per_minute, 1),
            "sigterm": {"exit_code": code, "seconds": round(took_to_stop, 2)},
            "errors_in_log": sum("ERROR" in line or "Traceback" in line
                                 for line in log_path.read_text(errors="replace").splitlines()),
        }
    finally:
        writer.stop_event.set()
        probe.stop_event.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return result


def take_sample(pid: int, base: str, db: Path, t0: float, writer: Writer, probe: Probe, baseline_metric: int,
                baseline_db: int, last: tuple[float, float]) -> Sample:
    # Ingested first, written after: a line written in between counts as backlog, never as a negative one.
    ingested = int((metric(base, 'honesty_ingest_records_total{source="heartbeats"}') or 0) - baseline_metric)
    in_db = db_count(db) - baseline_db
    written = writer.written + probe.sent
    status = proc_status(pid)
    now = time.monotonic()
    cpu = (cpu_seconds(pid) - last[0]) / max(now - last[1], 1e-9) * 100
    wal = Path(f"{db}-wal")
    return Sample(
        t=round(now - t0, 1), written=written, ingested_metric=ingested, backlog_metric=written - ingested,
        backlog_db=written - in_db, latency_s=round(probe.latencies[-1][1], 3) if probe.latencies else None,
        rss_mb=round(status.get("VmRSS", 0) / 1024, 1), cpu_pct=round(cpu, 1),
        wal_mb=round(wal.stat().st_size / 1e6, 2) if wal.exists() else 0.0, speed_ms=machine_speed_ms(),
    )


def _pct(values: list[float], pct: int) -> float | None:
    if not values:
        return None
    return round(values[min(len(values) - 1, int(len(values) * pct / 100))], 3)


def _thirds(rss: list[float]) -> dict[str, float | None]:
    """Mean RSS of the middle and the last third of the samples, and their ratio (issue 25: memory follows the window,
    so once it has filled, the last third stays within 5 % of the middle one)."""
    n = len(rss)
    middle, last = rss[n // 3:2 * n // 3], rss[2 * n // 3:]
    if not middle or not last:
        return {"middle_third_mean": None, "last_third_mean": None, "last_over_middle": None}
    m, lst = sum(middle) / len(middle), sum(last) / len(last)
    return {"middle_third_mean": round(m, 1), "last_third_mean": round(lst, 1), "last_over_middle": round(lst / m, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the writers run (default 10)")
    parser.add_argument("--rate", type=int, default=2000, help="events per second, all agents together")
    parser.add_argument("--agents", type=int, default=100)
    parser.add_argument("--days-per-minute", type=float, default=0.0,
                        help="run the daemon and the writers on a clock this many days ahead each minute (0: real)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "soak-results.json")
    parser.add_argument("--keep", action="store_true", help="keep the state, database and daemon log")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="honestyd-soak-"))
    try:
        result = soak(args.minutes, args.rate, args.agents, work, args.days_per_minute)
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result.summary, indent=2))
    args.out.write_text(json.dumps(asdict(result), indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
