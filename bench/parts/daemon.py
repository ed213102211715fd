"""latency, memory and audits: the real daemon (``python -m daemon.cli run``) as a subprocess.

One daemon run serves both parts: it starts on a copy of the cached ~1M-event, 200-agent store,
its peak RSS is read once its first evaluation is served (memory), then events are appended to a
live heartbeat file and /metrics is polled until each shows (latency); then the same daemon is measured idle
and under a crowd of audit clients (audits: bench/parts/audits.py). For memory's baseline a daemon on an empty
state is started first.

The daemon's clock is pinned to the simulated end (``--clock-file``, its test hook), so every
window holds the simulated data, as it would for a daemon running alongside live agents.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench import BENCH_DIR
from bench.core import PartResult, Settings, StepFailed, Target, die_with_parent, log, median, percentile
from bench.data import Dataset, SimArgs, probe_line, remove_db
from bench.parts.audits import audits_result, measure_audit_load
from bench.profiling import top

#: 200 agents, ~940k heartbeat events over 30 days (full) or ~31k over one day (quick).
FULL = SimArgs(200, 30, 175)
QUICK = SimArgs(200, 1, 175)

_COUNTER = re.compile(rb'^honesty_ingest_records_total\{source="heartbeats"\} (\S+)$', re.M)
_EVALUATED = re.compile(rb"^honesty_last_evaluation_timestamp_seconds ", re.M)


def free_port() -> int:
    """A port the kernel just handed out on loopback (released again for the daemon to bind)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _toml(data: dict[str, Any], prefix: str = "") -> str:
    """A minimal TOML writer for the nested tables of strings, numbers and lists a config needs."""
    scalars = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict)]
    out = ([f"[{prefix}]"] if prefix and scalars else []) + scalars
    text = "\n".join(out) + ("\n\n" if out else "")
    for k, v in data.items():
        if isinstance(v, dict):
            text += _toml(v, f"{prefix}.{json.dumps(k) if '.' in k else k}" if prefix else k)
    return text


def daemon_config(ds: Dataset | None, path: Path) -> Path:
    """The simulator's config plus the issue's daemon settings; no source verification (no network)."""
    config: dict[str, Any] = tomllib.loads(ds.config.read_text()) if ds is not None else {}
    config["daemon"] = {**config.get("daemon", {}), "rescore_interval": "1m"}  # debounce: the default, 0.05 s
    verify = config.setdefault("verify", {})
    verify["rates"] = {"url": 0.0, "path": 0.0, "run": 0.0, "issue": 0.0}
    path.write_text(_toml(config))
    return path


def vm_status(pid: int) -> dict[str, int]:
    """VmHWM, VmRSS, VmPeak… of a process in bytes (from /proc/PID/status)."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Vm") and line.endswith(" kB"):
            name, value = line.split(":", 1)
            out[name] = int(value.split()[0]) * 1024
    return out


@dataclass
class Daemon:
    """A ``honestyd run`` subprocess on loopback."""

    settings: Settings
    state: Path
    db: Path
    config: Path
    clock: str
    log_path: Path
    profile: Path | None = None
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    conn: http.client.HTTPConnection | None = None

    def start(self) -> None:
        clock_file = self.log_path.with_suffix(".clock")
        clock_file.write_text(self.clock + "\n")
        head = ["-m", "bench.profiling", str(self.profile)] if self.profile else ["-m", "daemon.cli"]
        argv = [self.settings.python, *head, "run", "--state", str(self.state), "--db", str(self.db),
                "--listen", f"127.0.0.1:{self.port}", "--config", str(self.config), "--clock-file", str(clock_file)]
        with self.log_path.open("wb") as logf:
            self.proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, cwd=BENCH_DIR.parent,
                                         preexec_fn=die_with_parent)

    def metrics(self, timeout: float = 10.0) -> bytes:
        """GET /metrics over one kept-alive connection (re-opened after an error)."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            self.conn.request("GET", "/metrics")
            resp = self.conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            raise
        if resp.status != 200:
            raise OSError(f"/metrics answered {resp.status}")
        return body

    def wait_ready(self, timeout: float) -> float:
        """Seconds until /metrics shows an evaluation (the daemon serves HTTP only after its first)."""
        assert self.proc is not None
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise StepFailed(f"the daemon exited ({self.proc.returncode}); see {self.log_path}")
            try:
                if _EVALUATED.search(self.metrics()):
                    return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.05)
        raise StepFailed(f"the daemon served no evaluation within {timeout:.0f} s; see {self.log_path}")

    def stop(self, grace: float) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds (an evaluation in a worker thread cannot be interrupted)."""
        if self.conn is not None:
            self.conn.close()
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            log(f"  the daemon did not stop within {grace:.0f} s of SIGTERM; killing it")
            self.proc.kill()
            self.proc.wait(10)


def counter(body: bytes) -> int:
    """honesty_ingest_records_total{source="heartbeats"} (absent before anything was ingested: 0)."""
    found = _COUNTER.search(body)
    return int(float(found.group(1))) if found else 0


@dataclass
class Probe:
    """Append one event every ``interval`` seconds; note when each write returned."""

    path: Path
    agent: str
    end: datetime
    count: int
    interval: float
    appended: list[float] = field(default_factory=list)

    def run(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            start = time.perf_counter()
            for i in range(self.count):
                delay = start + i * self.interval - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                # Timestamps inside every window and before the daemon's (pinned) clock.
                ts = (self.end - timedelta(hours=1) + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
                os.write(fd, probe_line(self.agent, i, ts))
                self.appended.append(time.perf_counter())
        finally:
            os.close(fd)


def measure_latency(daemon: Daemon, ds: Dataset, duration: float, catch_up: float) -> dict[str, Any]:
    """Append for ``duration`` seconds at 10/s; poll /metrics every 5 ms until all show or ``catch_up`` ends."""
    base = counter(daemon.metrics())
    end = datetime.fromisoformat(ds.end.replace("Z", "+00:00"))
    probe = Probe(daemon.state / ds.live_rel, ds.live_agent, end, round(duration / 0.1), 0.1)
    writer = threading.Thread(target=probe.run, name="bench-appender", daemon=True)
    latencies: dict[int, float] = {}
    polls: list[float] = []
    errors = 0
    writer.start()
    deadline = time.perf_counter() + duration + catch_up + 5  # bounded even if the writer stalls
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        try:
            shown = counter(daemon.metrics()) - base
        except OSError:
            errors += 1
            shown = 0
        now = time.perf_counter()
        polls.append(now - t0)
        appended = list(probe.appended)
        for i in range(min(shown, len(appended))):
            latencies.setdefault(i, now - appended[i])
        if not writer.is_alive():
            if len(latencies) == probe.count:
                break
            deadline = min(deadline, appended[-1] + catch_up if appended else now)
        time.sleep(0.005)
    writer.join(5)
    finished = time.perf_counter()
    # An event never shown counts with the time it had waited: a lower bound, so percentiles stay honest.
    censored = {i: finished - t for i, t in enumerate(probe.appended) if i not in latencies}
    values = [latencies.get(i, censored.get(i, 0.0)) for i in range(len(probe.appended))]
    p50 = percentile(values, 50) if values else None
    p99 = percentile(values, 99) if values else None
    return {
        "appended": len(probe.appended), "shown": len(latencies), "not_shown": len(censored),
        "p50_s": p50, "p99_s": p99,
        # A percentile is exact unless a censored event sits at or below it (then it is only a lower bound).
        "p50_lower_bound": p50 is not None and any(c <= p50 for c in censored.values()),
        "p99_lower_bound": p99 is not None and any(c <= p99 for c in censored.values()),
        "max_s": max(values) if values else None,
        "shown_p50_s": percentile(list(latencies.values()), 50) if latencies else None,
        "poll_median_s": median(polls) if polls else None, "poll_p99_s": percentile(polls, 99) if polls else None,
        "polls": len(polls), "poll_errors": errors,
        "latencies_s": [round(v, 4) for v in values],
    }


class DaemonParts:
    """Runs the daemon for the latency and/or memory parts."""

    def __init__(self, settings: Settings, parts: set[str]) -> None:
        self.settings = settings
        self.parts = parts
        self.ds = Dataset(QUICK if settings.quick else FULL, settings).ensure()
        self.tmp = settings.data_dir / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.profiles: list[tuple[str, Path]] = []

    def _profile(self, title: str) -> Path | None:
        if self.settings.profile not in self.parts:
            return None
        path = self.tmp / f"daemon-{len(self.profiles)}.prof"
        path.unlink(missing_ok=True)
        self.profiles.append((title, path))
        return path

    def _ready_timeout(self) -> float:
        # Sized from the batch group's 1M rescore when it ran (the daemon's first evaluation is one), capped.
        measured = self.settings.shared.get("rescore_large_seconds")
        guess = 3 * measured + 30 if measured else (120.0 if self.settings.quick else 600.0)
        return min(guess, 180.0 if self.settings.quick else 900.0)

    def empty_daemon(self) -> dict[str, Any]:
        """Memory's baseline: the same daemon on an empty state and store."""
        state = self.tmp / "empty-daemon-state"
        state.mkdir(parents=True, exist_ok=True)
        db = self.tmp / "empty-daemon.db"
        remove_db(db)
        d = Daemon(self.settings, state, db, daemon_config(None, self.tmp / "empty-daemon.toml"), self.ds.end,
                   self.tmp / "empty-daemon.log")
        d.start()
        try:
            ready = d.wait_ready(60)
            assert d.proc is not None
            return {"ready_s": ready, **vm_status(d.proc.pid)}
        finally:
            d.stop(20)
            remove_db(db)
            (state / "iris" / "honesty-changelog.md").unlink(missing_ok=True)

    def run(self) -> dict[str, PartResult]:
        started = time.monotonic()
        base = self.empty_daemon() if "memory" in self.parts else None
        db = self.ds.copy_store(self.tmp / "daemon.db")
        self.ds.restore()
        d = Daemon(self.settings, self.ds.work, db, daemon_config(self.ds, self.tmp / "daemon.toml"), self.ds.end,
                   self.tmp / "daemon.log", profile=self._profile("daemon (every thread)"))
        log(f"  starting the daemon on {self.ds.args.key} (first evaluation before it serves)")
        d.start()
        try:
            ready = d.wait_ready(self._ready_timeout())
            assert d.proc is not None
            first = vm_status(d.proc.pid)
            lat = load = None
            if "latency" in self.parts:
                duration = 10.0 if self.settings.quick else 60.0
                catch_up = 10.0 if self.settings.quick else 30.0
                log(f"  appending one event every 100 ms for {duration:.0f} s, polling /metrics every 5 ms")
                lat = measure_latency(d, self.ds, duration, catch_up)
            if "audits" in self.parts:
                audits_started = time.monotonic()
                load = measure_audit_load(d.port, db, self.ds, self.tmp, self.settings.python, self.settings.quick)
                audits_seconds = time.monotonic() - audits_started
            last = vm_status(d.proc.pid)
        finally:
            d.stop(120 if self.profiles else 20)
            self.ds.restore()
            remove_db(db)
        results: dict[str, PartResult] = {}
        seconds = time.monotonic() - started
        if lat is not None:
            results["latency"] = self._latency_result(lat, ready, seconds)
        if "memory" in self.parts:
            results["memory"] = self._memory_result(first, last, base, ready, seconds)
        if load is not None:
            results["audits"] = audits_result(load, audits_seconds, self.settings.quick, self.ds.args.key)
        if self.profiles and self.settings.profile:
            path = self.settings.profile_path(self.settings.profile)
            path.write_text(top(self.profiles))
            log(f"profile written to {path.relative_to(BENCH_DIR.parent)}")
        return results

    def _latency_result(self, lat: dict[str, Any], ready: float, seconds: float) -> PartResult:
        result = PartResult("latency", reps=1, seconds=seconds)
        result.figures = {"data_set": self.ds.args.key, "heartbeat_events": self.ds.events,
                          "agents": self.ds.args.agents, "first_evaluation_s": ready,
                          **{k: v for k, v in lat.items() if k != "latencies_s"}}
        result.samples = {"latency_s": [{"value": v} for v in lat["latencies_s"]]}
        note = (f"{lat['not_shown']} of {lat['appended']} events never showed; they count with the time they waited"
                " (a lower bound)") if lat["not_shown"] else ""
        result.targets = [
            Target("event → /metrics p50", lat["p50_s"], "s", "<=", 0.150, note=note,
                   lower_bound=lat["p50_lower_bound"]),
            Target("event → /metrics p99", lat["p99_s"], "s", "<=", 0.500, note=note,
                   lower_bound=lat["p99_lower_bound"]),
        ]
        result.at_quick_size(self.settings.quick)
        result.notes.append(
            f"one run of {lat['appended']} events (the distribution is the repetition); a /metrics poll took"
            f" {1000 * (lat['poll_median_s'] or 0):.1f} ms (median), which bounds the resolution")
        return result

    def _memory_result(self, first: dict[str, int], last: dict[str, int], base: dict[str, Any] | None,
                       ready: float, seconds: float) -> PartResult:
        mb = 1024 * 1024
        result = PartResult("memory", reps=1, seconds=seconds)
        hwm = first.get("VmHWM")
        result.figures = {
            "data_set": self.ds.args.key, "heartbeat_events": self.ds.events, "first_evaluation_s": ready,
            "vm_hwm_mb": hwm / mb if hwm else None, "vm_rss_mb": first.get("VmRSS", 0) / mb,
            "vm_hwm_end_mb": last.get("VmHWM", 0) / mb,
            "empty_state_vm_hwm_mb": base["VmHWM"] / mb if base and "VmHWM" in base else None,
        }
        result.targets = [Target(
            "daemon peak RSS (VmHWM)", hwm / mb if hwm else None, "MB", "<=", 150,  # issue 25 (it was 300)
            subject=hwm / mb if hwm else None,
            baseline=result.figures["empty_state_vm_hwm_mb"], baseline_name="daemon on an empty state (MB)",
            note="read from /proc/PID/status once the first evaluation is served")]
        result.at_quick_size(self.settings.quick)
        if "latency" in self.parts:
            result.notes.append("vm_hwm_end_mb: after the latency run's further evaluations")
        return result


def run_daemon(settings: Settings, parts: set[str]) -> dict[str, PartResult]:
    try:
        return DaemonParts(settings, parts).run()
    except (StepFailed, OSError, AssertionError) as exc:
        log(f"daemon parts failed: {exc}")
        return {p: PartResult(p, error=str(exc)) for p in parts}
