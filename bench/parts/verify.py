"""verify: URL checks across 50 loopback hosts, the per-host limit counted by the servers themselves.

The servers run in their own process (bench.verify_server), so they do not share the checker's
event loop or core; each repetition runs plain aiohttp GETs under the same limits (baseline) and
then UrlChecker.check (subject) over fresh URLs.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import BENCH_DIR, REPO_ROOT
from bench.core import (
    PartResult,
    Settings,
    StepFailed,
    Target,
    die_with_parent,
    log,
    median,
    paired_target,
    safety_timeout,
    worker,
)
from bench.profiling import top

HOSTS = 50
PER_HOST = 4
CONCURRENCY = 64


def _start_servers(settings: Settings) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    proc = subprocess.Popen([settings.python, "-m", "bench.verify_server", "--hosts", str(HOSTS)], cwd=REPO_ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the servers print their addresses once they listen
    if not line:
        proc.kill()
        raise StepFailed("the verify servers did not start (can 127.0.0.2-50 be bound here?)")
    info: dict[str, Any] = json.loads(line)
    return proc, info


def run_verify(settings: Settings) -> dict[str, PartResult]:
    started = time.monotonic()
    checks = 2_000 if settings.quick else 10_000
    profile = settings.data_dir / "tmp" / "verify.prof" if settings.profile == "verify" else None
    reps = 1 if profile else settings.reps
    try:
        proc, info = _start_servers(settings)
        try:
            out = worker(settings, "verify", {"hosts": info["hosts"], "stats_url": info["stats"], "checks": checks,
                                              "per_host": PER_HOST, "concurrency": CONCURRENCY, "reps": reps},
                         timeout=safety_timeout(settings), profile=profile)
        finally:
            assert proc.stdin is not None
            proc.stdin.close()  # the servers stop when their stdin closes
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    except (StepFailed, OSError, ValueError) as exc:
        log(f"verify failed: {exc}")
        return {"verify": PartResult("verify", error=str(exc))}
    samples = out["samples"]
    subject = [s["checker"]["seconds"] for s in samples]
    baseline = [s["baseline"]["seconds"] for s in samples]
    peak = max(max(s["checker_server"]["max_in_flight"].values(), default=0) for s in samples)
    peak_base = max(max(s["baseline_server"]["max_in_flight"].values(), default=0) for s in samples)
    served = [sum(s["checker_server"]["requests"].values()) for s in samples]
    ok = [s["checker"]["ok"] for s in samples]
    rate = checks / median(subject)
    per_rep = [{"checker_s": s["checker"]["seconds"], "baseline_s": s["baseline"]["seconds"],
                "checker_peak_per_host": max(s["checker_server"]["max_in_flight"].values(), default=0),
                "checker_ok": s["checker"]["ok"]} for s in samples]
    result = PartResult("verify", reps=len(samples), seconds=time.monotonic() - started, samples={"checks": per_rep})
    result.figures = {
        "checks": checks, "hosts": HOSTS, "per_host": PER_HOST, "concurrency": CONCURRENCY,
        "checks_per_s": rate, "baseline_checks_per_s": checks / median(baseline),
        "peak_in_flight_per_host": peak, "baseline_peak_in_flight_per_host": peak_base,
        "requests_served": served, "checks_ok": ok,
    }
    result.targets = [
        Target("URL checks per second", rate, "checks/s", ">=", 500,
               baseline=checks / median(baseline), baseline_name="plain aiohttp GETs (checks/s)"),
        Target("peak concurrent requests on one host", float(peak), "requests", "<=", PER_HOST,
               note=f"counted by the servers; {HOSTS} hosts, hosts Zipf-weighted so the busiest queue"),
        paired_target("check time ÷ plain aiohttp GET", subject, baseline, float("inf"), "plain aiohttp GETs",
                      note="informational: the checker's overhead (no target)"),
    ]
    if any(o != checks for o in ok):
        result.notes.append(f"not every check passed: {ok} of {checks}")
    if profile is not None:
        path = settings.profile_path("verify")
        path.write_text(top([(f"{checks} UrlChecker.check", Path(f"{profile}.checks-0.prof"))]))
        log(f"profile written to {path.relative_to(BENCH_DIR.parent)}")
    return {"verify": result}
