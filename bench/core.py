"""What every part shares: results and targets, statistics, the time budget, subprocesses, the machine."""

from __future__ import annotations

import json
import math
import os
import platform
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import BENCH_DIR, DATA_DIR, REPO_ROOT

Sample = dict[str, float]


def log(message: str) -> None:
    """Progress goes to stderr, so stdout keeps only the table."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- statistics


def median(values: Sequence[float]) -> float:
    """The median (mean of the middle two for an even count)."""
    if not values:
        raise ValueError("median of nothing")
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between closest ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of nothing")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def medians(samples: Sequence[Sample]) -> Sample:
    """Per key, the median over repetitions (a key missing from a repetition is left out for it)."""
    keys = sorted({k for s in samples for k in s})
    return {k: median([s[k] for s in samples if k in s]) for k in keys}


# --- results


@dataclass
class Target:
    """One of the issue's targets: the measured figure, how it compares, and optionally a baseline and ratio.

    ``figure`` is what is compared with ``limit``; for a ratio target it is the ratio itself, and
    ``subject``/``baseline`` hold the two medians it was computed from. ``figure`` None means the
    measurement did not produce a number (the target then fails and ``note`` says why).
    """

    name: str
    figure: float | None
    unit: str
    op: str
    limit: float
    subject: float | None = None
    baseline: float | None = None
    baseline_name: str = ""
    note: str = ""
    #: The true figure is at least this (e.g. a latency percentile with events that never showed).
    lower_bound: bool = False
    #: Measured at a smaller size than the target is set for (--quick): a FAIL holds, a pass may not.
    indicative: bool = False

    @property
    def informational(self) -> bool:
        """A figure shown beside the targets (a ratio worth watching) that the issue sets no target for."""
        return math.isinf(self.limit)

    @property
    def passed(self) -> bool:
        if self.figure is None or math.isnan(self.figure):
            return False
        return self.figure <= self.limit if self.op == "<=" else self.figure >= self.limit

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Target:
        limit = data["limit"]
        return cls(data["name"], data["figure"], data["unit"], data["op"], math.inf if limit is None else limit,
                   subject=data.get("subject"), baseline=data.get("baseline"),
                   baseline_name=data.get("baseline_name", ""), note=data.get("note", ""),
                   lower_bound=bool(data.get("lower_bound")), indicative=bool(data.get("indicative")))

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "figure": self.figure, "unit": self.unit, "op": self.op,
            "limit": None if self.informational else self.limit,
            "subject": self.subject, "baseline": self.baseline, "baseline_name": self.baseline_name,
            "pass": None if self.informational else self.passed, "lower_bound": self.lower_bound,
            "indicative": self.indicative, "note": self.note,
        }


def paired_ratio(subject: Sequence[float], baseline: Sequence[float]) -> float | None:
    """Median over repetitions of subject_i / baseline_i (each pair measured back to back)."""
    pairs = [s / b for s, b in zip(subject, baseline, strict=False) if b]
    return median(pairs) if pairs else None


def ratio_target(name: str, subject: float | None, baseline: float | None, limit: float, baseline_name: str,
                 unit: str = "s", note: str = "") -> Target:
    """A "subject ≤ limit × baseline" target (both medians of the same interleaved run)."""
    ratio = subject / baseline if subject is not None and baseline else None
    return Target(name, ratio, "×", "<=", limit, subject=subject, baseline=baseline,
                  baseline_name=f"{baseline_name} ({unit})", note=note)


def paired_target(name: str, subject: Sequence[float], baseline: Sequence[float], limit: float,
                  baseline_name: str, unit: str = "s", note: str = "") -> Target:
    """Like :func:`ratio_target`, but the ratio is the median of the per-repetition ratios."""
    target = ratio_target(name, median(subject) if subject else None, median(baseline) if baseline else None,
                          limit, baseline_name, unit, note)
    target.figure = paired_ratio(subject, baseline)
    return target


@dataclass
class PartResult:
    """One part's outcome: headline figures, targets, every repetition's raw samples, notes."""

    name: str
    figures: dict[str, Any] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    reps: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    def at_quick_size(self, quick: bool) -> None:
        """Mark every target indicative when measured at --quick sizes (the targets are set for ~1M events)."""
        for target in self.targets:
            target.indicative = quick

    def as_json(self) -> dict[str, Any]:
        return {
            "figures": self.figures, "targets": [t.as_json() for t in self.targets], "reps": self.reps,
            "seconds": round(self.seconds, 2), "notes": self.notes, "error": self.error, "samples": self.samples,
        }


# --- the time budget


@dataclass
class Budget:
    """Wall-clock budget of one invocation: repetitions beyond the first are run only while they fit.

    ``reserve`` is what the parts still to come are expected to need, so an early part does not eat
    their time; the first repetition of every part always runs, whatever the budget says.
    """

    total: float
    started: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining(self) -> float:
        return self.total - self.elapsed()

    def fits(self, seconds: float, reserve: float = 0.0) -> bool:
        return self.elapsed() + seconds + reserve <= self.total


@dataclass
class Settings:
    """What the command line chose, shared by every part."""

    quick: bool
    reps: int
    budget: Budget
    data_dir: Path = DATA_DIR
    profile: str | None = None
    plot: Path = BENCH_DIR / "scaling.png"
    python: str = sys.executable
    #: Seconds that the parts not yet run are expected to need (the runner sets it before each group;
    #: a function, because an estimate improves once the first figures are in).
    reserve: Callable[[], float] = lambda: 0.0
    load_at_start: tuple[float, float, float] = field(default_factory=os.getloadavg)
    #: Figures one group hands to a later one (e.g. the measured rescore time, to size the daemon's wait).
    shared: dict[str, float] = field(default_factory=dict)

    def profile_path(self, part: str) -> Path:
        return BENCH_DIR / f"profile-{part}.txt"


def interleave(steps: Sequence[tuple[str, Callable[[], Sample]]], settings: Settings,
               reps: int | None = None) -> tuple[dict[str, list[Sample]], int]:
    """Run ``steps`` in order, then again, up to ``settings.reps`` times while the budget allows.

    Every step runs once per repetition before any runs twice, so a baseline and its subject see
    the same machine state (page cache, thermal state, other load) within each repetition.
    """
    samples: dict[str, list[Sample]] = {name: [] for name, _ in steps}
    wanted = settings.reps if reps is None else reps
    done = 0
    for rep in range(wanted):
        started = time.monotonic()
        for name, step in steps:
            log(f"  rep {rep + 1}/{wanted}: {name}")
            samples[name].append(step())
        done += 1
        took = time.monotonic() - started
        if rep + 1 < wanted and not settings.budget.fits(took, settings.reserve()):
            log(f"  stopping after {done} repetition(s): another ({took:.0f} s) would overrun the time budget")
            break
    return samples, done


# --- subprocesses


class StepFailed(RuntimeError):
    """A measured subprocess failed; the message carries the tail of its output."""


def run(cmd: Sequence[str], *, timeout: float, cwd: Path = REPO_ROOT, env: Mapping[str, str] | None = None,
        capture: bool = True) -> tuple[float, str]:
    """Run ``cmd`` to completion; returns (wall seconds, stdout). Raises StepFailed on a non-zero exit."""
    started = time.perf_counter()
    try:
        proc = subprocess.run(list(cmd), cwd=cwd, env=dict(env) if env is not None else None, timeout=timeout,
                              capture_output=capture, text=True, check=False)
    except subprocess.TimeoutExpired as exc:
        raise StepFailed(f"{cmd[2:5]} did not finish within {timeout:.0f} s") from exc
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        tail = (proc.stderr or "")[-2000:]
        raise StepFailed(f"{' '.join(map(str, cmd[:6]))} … exited {proc.returncode}: {tail}")
    return seconds, proc.stdout or ""


def worker(settings: Settings, task: str, args: Mapping[str, Any], *, timeout: float,
           profile: Path | None = None) -> dict[str, Any]:
    """Run one in-process measurement in a fresh interpreter (``python -m bench.worker``); its JSON result.

    A fresh process per sample keeps one measurement's heap (a 1M-event load is gigabytes) and
    allocator state from skewing the next; the timing itself happens inside the worker, so
    interpreter start-up is not in the figure.
    """
    payload = dict(args)
    if profile is not None:
        payload["profile"] = str(profile)
    _, out = run([settings.python, "-m", "bench.worker", task, json.dumps(payload)], timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if not lines:
        raise StepFailed(f"worker {task} printed no result: {out[-500:]!r}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def die_with_parent() -> None:
    """``preexec_fn`` for long-lived children (the daemon, the servers): SIGTERM them if the harness dies.

    Without it, a harness killed with SIGKILL would leave a daemon running. Linux only; elsewhere a no-op.
    """
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def safety_timeout(settings: Settings) -> float:
    """The longest one step may take before it is killed (generous: a hang, not a slow run, is the concern)."""
    return 600.0 if settings.quick else 1800.0


# --- the machine


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_bytes() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def git_commit(root: Path = REPO_ROOT) -> str | None:
    """HEAD's commit, read from .git's files (the harness does not run git)."""
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        loose = git / ref
        if loose.exists():
            return loose.read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        pass
    return None


def _version(module: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """What the figures were measured on."""
    import daemon

    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    load = os.getloadavg()
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": usable,
        "ram_bytes": _ram_bytes(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "sqlite": sqlite3.sqlite_version,
        "honestyd": daemon.__version__,
        "git_commit": git_commit(),
        "sqlite_utils": _version("sqlite-utils"),
        "aiohttp": _version("aiohttp"),
        "prometheus_client": _version("prometheus-client"),
        # Other work on the machine shows here (interleaving evens it out between baseline and subject).
        "loadavg_at_end": [round(x, 2) for x in load],
    }
