"""scale: the real daemon on ~1M and ~3M decisions of 1,000 agents: what one host holds, and what a restart costs.

For each size, on a private copy of the cached store (``honestyd simulate`` of 1,000 agents over 30 days, ingested
once per code version), one daemon life after another on the same copy:

1. a cold start (no model cache): ready time (until /metrics shows an evaluation), VmHWM and VmRSS then, the records
   the model holds (``honesty_model_records``), and the pause of the cache write after the start's catch-up (the
   model held for the fork: the daemon logs it);
2. one event appended every 100 ms for 20 s (quick 5 s) to a live heartbeat file, /metrics polled every 5 ms until
   each shows (append → metric), each poll's time kept (the scrape time: a scrape of the last snapshot, no SQL);
3. SIGTERM (the stop writes the cache), then a start: ready after SIGTERM, on the state root as the stop left it
   (the live file keeps the lines appended in 2., which the store has: what a restart meets; cutting it back, as
   ``Dataset.restore`` does after a measurement, would make the start re-read it as a truncated log);
4. the cache written after that start's catch-up, two events appended, SIGKILL, then a start: ready after SIGKILL
   (the log must say it loaded the cache; the events appended after the write are caught up from the store and the
   files), and VmHWM and VmRSS then (information: what a host needs after a crash).

Bytes per held decision are (VmRSS − the same daemon's on an empty state) ÷ records held; the projection to 20M
decisions is the straight line through the two sizes (memory, cold start, ready after SIGKILL).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench import BENCH_DIR
from bench.core import PartResult, Settings, StepFailed, Target, die_with_parent, log, median, percentile
from bench.data import Dataset, SimArgs, probe_line, remove_db
from bench.parts.daemon import Daemon, daemon_config, measure_latency, vm_status

#: ~0.97M and ~3.0M decisions (1,000 agents, 30 days); quick: ~30k and ~90k over one day.
FULL = (SimArgs(1000, 30, 35), SimArgs(1000, 30, 108))
QUICK = (SimArgs(1000, 1, 35), SimArgs(1000, 1, 105))
#: The fleet the issue sizes for: 1,000 agents × 700 decisions a day × 30 days.
PROJECT_TO = 20_000_000
#: Per decision, a tenth of the ~580 bytes the model held before issue 25.
BYTES_TARGET = 58.0

_HELD = re.compile(rb"^honesty_model_records (\S+)$", re.M)
_PAUSE = re.compile(r"written: ([\d.]+) MB in ([\d.]+) s by a forked writer \(the model held ([\d.]+) ms\)")
_LOADED = re.compile(r"model cache \S+ loaded in ([\d.]+) s")
_INGESTED = re.compile(r"ingested (\d+) records")


def _config(ds: Dataset, path: Path) -> Path:
    """The daemon's bench config, its model cache on (the default) and written after each start's catch-up."""
    daemon_config(ds, path)
    text = path.read_text()
    return path if "cache_every" in text else _with_daemon_key(path, text, 'cache_every = "10m"')


def _with_daemon_key(path: Path, text: str, line: str) -> Path:
    path.write_text(text.replace("[daemon]\n", f"[daemon]\n{line}\n", 1))
    return path


def _wait_log(d: Daemon, pattern: re.Pattern[str], after: int, timeout: float) -> re.Match[str]:
    """The first match of ``pattern`` in the daemon's log past offset ``after``, waited for (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pattern.search(d.log_path.read_text(errors="replace"), after)
        if found:
            return found
        if d.proc is not None and d.proc.poll() is not None:
            break
        time.sleep(0.1)
    raise StepFailed(f"no {pattern.pattern!r} in {d.log_path} within {timeout:.0f} s")


def _start(d: Daemon, timeout: float) -> tuple[float, int]:
    """Start ``d`` (its log appended to); seconds until it serves an evaluation, and where its log started."""
    offset = d.log_path.stat().st_size if d.log_path.exists() else 0
    clock_file = d.log_path.with_suffix(".clock")
    clock_file.write_text(d.clock + "\n")
    # Daemon.start truncates its log: this one appends, one log per size for its four lives.
    argv = [d.settings.python, "-m", "daemon.cli", "run", "--state", str(d.state), "--db", str(d.db),
            "--listen", f"127.0.0.1:{d.port}", "--config", str(d.config), "--clock-file", str(clock_file)]
    started = time.monotonic()
    with d.log_path.open("ab") as logf:
        d.proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, cwd=BENCH_DIR.parent,
                                  preexec_fn=die_with_parent)
    d.wait_ready(timeout)
    return time.monotonic() - started, offset


def _idle_scrapes(d: Daemon, seconds: float) -> tuple[float, float]:
    """/metrics asked every 20 ms for ``seconds`` with nothing appended (the snapshot's bytes, cached once rendered):
    (p99, median) of the request times."""
    times: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        d.metrics()
        times.append(time.perf_counter() - t0)
        time.sleep(0.02)
    return percentile(times, 99), median(times)


def _fresh_connection(d: Daemon) -> None:
    if d.conn is not None:
        d.conn.close()
        d.conn = None


def _held(d: Daemon) -> int:
    found = _HELD.search(d.metrics())
    return int(float(found.group(1))) if found else 0


def _ingested_at_start(logf: Path, at: int) -> int:
    """The lines a start's catch-up ingested (its log from offset ``at`` up to "serving"): what it read again."""
    text = logf.read_text(errors="replace")[at:]
    catch_up = text.split("honestyd serving on", 1)[0]
    return sum(int(n) for n in _INGESTED.findall(catch_up))


def _kill(d: Daemon) -> None:
    assert d.proc is not None
    _fresh_connection(d)
    d.proc.send_signal(signal.SIGKILL)
    d.proc.wait(30)


def measure_size(settings: Settings, args: SimArgs, tmp: Path, empty_rss: int) -> dict[str, Any]:
    """One size: the four daemon lives of the module's docstring."""
    ds = Dataset(args, settings).ensure()
    db = ds.copy_store(tmp / "scale.db")
    Path(f"{db}.model").unlink(missing_ok=True)
    ds.restore()
    logf = tmp / f"scale-{args.key}.log"
    logf.unlink(missing_ok=True)
    d = Daemon(settings, ds.work, db, _config(ds, tmp / "scale.toml"), ds.end, logf)
    ready_limit = 900.0 if not settings.quick else 180.0
    out: dict[str, Any] = {"data_set": args.key, "heartbeat_events": ds.events, "agents": args.agents}
    try:
        log(f"  {args.key}: cold start (no model cache)")
        out["ready_cold_s"], at = _start(d, ready_limit)
        assert d.proc is not None
        status = vm_status(d.proc.pid)
        out["vm_hwm_mb"] = status["VmHWM"] / 2**20
        out["vm_rss_mb"] = status["VmRSS"] / 2**20
        out["held"] = held = _held(d)
        out["bytes_per_held"] = (status["VmRSS"] - empty_rss) / held if held else None
        pause = _wait_log(d, _PAUSE, at, ready_limit)
        out["cache_mb"], out["cache_write_s"], out["cache_pause_ms"] = map(float, pause.groups())
        _fresh_connection(d)  # the server closes a kept-alive connection left idle while the cache was written
        duration = 5.0 if settings.quick else 20.0
        lat = measure_latency(d, ds, duration, 10.0)
        out.update({f"latency_{k}": v for k, v in lat.items() if k != "latencies_s"})
        out["scrape_under_appends_p99_s"] = lat["poll_p99_s"]
        out["scrape_p99_s"], out["scrape_median_s"] = _idle_scrapes(d, 5.0 if settings.quick else 10.0)
        log(f"  {args.key}: SIGTERM (the stop writes the model cache), then a start from it")
        stop_started = time.monotonic()
        d.stop(300)
        out["stop_s"] = time.monotonic() - stop_started
        # No ds.restore() here: the next life starts from the files and the store as this one left them.
        out["ready_after_sigterm_s"], at = _start(d, ready_limit)
        out["sigterm_start_ingested"] = _ingested_at_start(logf, at)
        _wait_log(d, _PAUSE, at, ready_limit)  # the cache written after the start's catch-up
        end = datetime.fromisoformat(ds.end.replace("Z", "+00:00"))
        ts = (end - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        with (d.state / ds.live_rel).open("ab") as f:  # after the write: the next start catches them up
            for i in range(2):
                f.write(probe_line(ds.live_agent, 90_000 + i, ts))
        _kill(d)
        log(f"  {args.key}: SIGKILL after the periodic write, then a start")
        out["ready_after_sigkill_s"], at = _start(d, ready_limit)
        status = vm_status(d.proc.pid)  # the cache read's peak: what a host needs after a crash
        out["vm_hwm_after_sigkill_mb"] = status["VmHWM"] / 2**20
        out["vm_rss_after_sigkill_mb"] = status["VmRSS"] / 2**20
        loaded = _LOADED.search(logf.read_text(errors="replace"), at)
        out["sigkill_start_used_cache"] = loaded is not None
        out["cache_load_s"] = float(loaded.group(1)) if loaded else None
    finally:
        d.stop(300)
        ds.restore()
        remove_db(db)
        Path(f"{db}.lock").unlink(missing_ok=True)
    return out


def _line(xs: list[float], ys: list[float], x: float) -> float | None:
    """The straight line through two points, at ``x``."""
    if len(xs) != 2 or xs[0] == xs[1]:
        return None
    slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
    return ys[0] + slope * (x - xs[0])


def estimate(settings: Settings, args: SimArgs | None = None) -> float:
    """Seconds the part (or one size of it) is expected to take: per event, a fresh machine's simulate and ingest
    (when the store is not cached), the cold start, the stop's cache write and two starts from it; then the appends."""
    if args is None:
        return sum(estimate(settings, a) for a in (QUICK if settings.quick else FULL)) + 10.0
    events = args.agents * args.days * args.events_per_day * 0.94
    cached = any((settings.data_dir / args.key).glob("store-*.db"))
    return events * ((0 if cached else 55e-6) + 70e-6) + (20.0 if settings.quick else 45.0)


def run_scale(settings: Settings, empty_rss: int | None = None) -> dict[str, PartResult]:
    """The scale part (see the module)."""
    started = time.monotonic()
    tmp = settings.data_dir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    result = PartResult("scale", reps=1)
    sizes: list[dict[str, Any]] = []
    try:
        if empty_rss is None:
            empty_rss = _empty_rss(settings, tmp)
        for i, args in enumerate(QUICK if settings.quick else FULL):
            if i and not settings.budget.fits(estimate(settings, args), settings.reserve()):
                result.notes.append(f"{args.key} not run: it would overrun the time budget (run `python -m bench"
                                    " scale` alone, or again now that the first size's data is cached)")
                continue
            sizes.append(measure_size(settings, args, tmp, empty_rss))
    except (StepFailed, OSError, AssertionError) as exc:
        log(f"scale failed: {exc}")
        return {"scale": PartResult("scale", error=str(exc))}
    result.seconds = time.monotonic() - started
    held = [float(s["held"]) for s in sizes]
    projection = {name: _line(held, [float(s[name] or 0) for s in sizes], PROJECT_TO)
                  for name in ("vm_rss_mb", "ready_cold_s", "ready_after_sigterm_s", "ready_after_sigkill_s")}
    result.figures = {"sizes": sizes, "empty_daemon_rss_mb": empty_rss / 2**20,
                      "projected_to": PROJECT_TO, "projection": projection}
    first = sizes[0]
    for s in sizes:
        tag = f"{s['held'] / 1e6:.2f}M held"
        sigterm, sigkill = s["ready_after_sigterm_s"], s["ready_after_sigkill_s"]
        result.targets += [
            Target(f"bytes per held decision ({tag})", s["bytes_per_held"], "B", "<=", BYTES_TARGET,
                   note="(VmRSS − the empty daemon's) ÷ honesty_model_records"),
            Target(f"ready after SIGKILL ({tag})", sigkill, "s", "<=", 5.0, subject=sigkill,
                   baseline=s["ready_cold_s"], baseline_name="cold start (s)",
                   note="" if s["sigkill_start_used_cache"] else "the start did not use the model cache"),
            Target(f"ready after SIGKILL ÷ after SIGTERM ({tag})", sigkill / sigterm if sigterm else None, "×",
                   "<=", 1.5, subject=sigkill, baseline=sigterm, baseline_name="ready after SIGTERM (s)",
                   note=f"the start after SIGTERM ingested {s['sigterm_start_ingested']} lines"
                   if s["sigterm_start_ingested"] else ""),
            Target(f"cache write pause ({tag})", s["cache_pause_ms"] / 1e3, "s", "<=", 0.050,
                   note="the model held for the fork of the writer"),
            Target(f"append → metric p99 ({tag})", s["latency_p99_s"], "s", "<=", 0.500,
                   lower_bound=bool(s["latency_p99_lower_bound"])),
            Target(f"scrape p99 ({tag})", s["scrape_p99_s"], "s", "<=", 0.050,
                   note="GET /metrics every 20 ms, nothing appended (the last snapshot's bytes)"),
            Target(f"scrape p99 while 10 events a second arrive ({tag})", s["scrape_under_appends_p99_s"], "s",
                   "<=", float("inf"), note="each new snapshot rendered by the scrape that first asks for it"),
            Target(f"daemon peak (VmHWM) after the start from the cache ({tag})", s["vm_hwm_after_sigkill_mb"], "MB",
                   "<=", float("inf"),
                   note=f"the start after SIGKILL; VmRSS then {s['vm_rss_after_sigkill_mb']:.0f} MB"),
        ]
    result.targets.append(Target(
        "daemon peak (VmHWM), ~1M decisions", first["vm_hwm_mb"], "MB", "<=", 150.0,
        baseline=empty_rss / 2**20, baseline_name="daemon on an empty state (MB, VmRSS)"))
    result.targets.append(Target("cold start, ~1M decisions", first["ready_cold_s"], "s", "<=", 15.0))
    if projection["vm_rss_mb"] is not None:
        result.notes.append(
            f"projected to {PROJECT_TO / 1e6:.0f}M decisions (a straight line through the two sizes):"
            f" {projection['vm_rss_mb'] / 1024:.1f} GB resident, cold start {projection['ready_cold_s']:.0f} s,"
            f" ready after SIGTERM {projection['ready_after_sigterm_s']:.0f} s,"
            f" after SIGKILL {projection['ready_after_sigkill_s']:.0f} s")
    result.at_quick_size(settings.quick)
    return {"scale": result}


def _empty_rss(settings: Settings, tmp: Path) -> int:
    """VmRSS of the daemon on an empty state, once it serves (the baseline of bytes per decision)."""
    state = tmp / "scale-empty-state"
    state.mkdir(parents=True, exist_ok=True)
    db = tmp / "scale-empty.db"
    remove_db(db)
    d = Daemon(settings, state, db, daemon_config(None, tmp / "scale-empty.toml"), "2026-05-31T00:00:00Z",
               tmp / "scale-empty.log")
    d.start()
    try:
        d.wait_ready(60)
        assert d.proc is not None
        return vm_status(d.proc.pid)["VmRSS"]
    finally:
        d.stop(20)
        remove_db(db)
        Path(f"{db}.model").unlink(missing_ok=True)
