"""``python -m bench [PART ...] [--quick] [--out bench/results.json] [--profile PART]``.

Runs the chosen parts (all by default), prints a table of every target (figure, baseline,
ratio, limit, PASS/FAIL), and writes the results with the machine they were measured on.
A missed target is reported, never raised: the exit status is 0 unless the harness itself failed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import BENCH_DIR, DATA_DIR, PARTS, REPO_ROOT
from bench.core import Budget, PartResult, Settings, log, machine_info

# Every part is imported up front, so one run uses one version of the harness even if its files change meanwhile.
from bench.data import code_hash
from bench.parts.batch import run_batch
from bench.parts.daemon import FULL as DAEMON_FULL
from bench.parts.daemon import QUICK as DAEMON_QUICK
from bench.parts.daemon import run_daemon
from bench.parts.scale import estimate as scale_estimate
from bench.parts.scale import run_scale
from bench.parts.scrape import TIME_CAP, TIME_CAP_QUICK, run_scrape
from bench.parts.verify import run_verify
from bench.report import table

GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("batch", ("ingest", "scaling", "rescore")),
    ("scrape", ("scrape",)),
    ("verify", ("verify",)),
    ("daemon", ("latency", "memory", "audits")),
    ("scale", ("scale",)),
)
#: Default wall-clock budgets: the full run must end within 15 minutes on 2 cores, the quick one within 2.
BUDGET_FULL = 14 * 60.0
BUDGET_QUICK = 110.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", metavar="PART", help=f"any of {', '.join(PARTS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="small sizes, one repetition: the suite in < 2 min")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "results.json", help="results file (JSON)")
    parser.add_argument("--plot", type=Path, default=BENCH_DIR / "scaling.png", help="scaling curve (PNG)")
    parser.add_argument("--profile", metavar="PART", choices=PARTS,
                        help="run PART once under cProfile; top 30 by cumulative time to bench/profile-PART.txt")
    parser.add_argument("--reps", type=int, help="repetitions per measurement (default 3, 1 with --quick)")
    parser.add_argument("--budget", type=float, help="wall-clock seconds; repetitions stop when it would overrun")
    parser.add_argument("--data", type=Path, default=DATA_DIR, help="data set cache (default bench/.data)")
    args = parser.parse_args(argv)
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if args.profile and args.parts and args.profile not in args.parts:
        parser.error("--profile PART runs that part only; leave PART out of the list or name it alone")
    if args.reps is not None and not 1 <= args.reps <= 20:
        parser.error("--reps must be between 1 and 20")
    return args


def estimate(part: str, settings: Settings) -> float:
    """Seconds a part is expected to need, so earlier parts leave it room (rough; only repetitions flex)."""
    quick = settings.quick
    if part == "scrape":
        return 10 + (TIME_CAP_QUICK if quick else TIME_CAP * settings.reps)
    if part == "verify":
        return 15.0 if quick else 60.0
    if part == "scale":
        return scale_estimate(settings)
    if part == "audits":  # its two phases, on the daemon the latency part started
        return 50.0 if quick else 140.0
    if part in ("latency", "memory"):
        rescore = settings.shared.get("rescore_large_seconds")
        startup = 1.3 * rescore + 10 if rescore else (20.0 if quick else 120.0)
        # Its store is ingested first when the ingest code changed since it was cached.
        key = (DAEMON_QUICK if quick else DAEMON_FULL).key
        cached = (settings.data_dir / key / f"store-{code_hash()}.db").exists()
        ingest = 0.0 if cached else settings.shared.get("ingest_large_seconds", 10.0 if quick else 90.0)
        return ingest + startup + (25.0 if quick else 100.0)
    return 0.0


def run_group(name: str, parts: set[str], settings: Settings) -> dict[str, PartResult]:
    if name == "batch":
        return run_batch(settings, parts)
    if name == "scrape":
        return run_scrape(settings)
    if name == "verify":
        return run_verify(settings)
    if name == "scale":
        return run_scale(settings)
    return run_daemon(settings, parts)


def run_all(chosen: list[str], settings: Settings) -> dict[str, PartResult]:
    results: dict[str, PartResult] = {}
    groups = [(g, {p for p in members if p in chosen}) for g, members in GROUPS]
    groups = [(g, parts) for g, parts in groups if parts]
    for i, (group, parts) in enumerate(groups):
        later = [g for g, _ in groups[i + 1:]]

        def reserve(later: list[str] = later) -> float:
            # latency, memory and audits share one daemon run: its start is counted once.
            return sum(estimate("latency" if g == "daemon" else g, settings)
                       + (estimate("audits", settings) if g == "daemon" and "audits" in chosen else 0.0)
                       for g in later)

        # replace() keeps the same `shared` dict: later groups read what earlier ones measured.
        group_settings = replace(settings, reserve=reserve)
        if group in ("scrape", "verify") and not settings.budget.fits(estimate(group, settings), reserve()):
            group_settings.reps = 1  # repetitions run inside one worker here: decide before it starts
        log(f"{group}: {', '.join(sorted(parts))} ({settings.budget.elapsed():.0f} s into the run)")
        started = time.monotonic()
        try:
            out = run_group(group, parts, group_settings)
        except Exception as exc:  # one broken part must not cost the others' results
            log(f"{group} failed: {exc!r}")
            out = {p: PartResult(p, error=f"{type(exc).__name__}: {exc}") for p in parts}
        for part in parts:
            result = out.get(part) or PartResult(part, error="no result")
            if not result.seconds:
                result.seconds = time.monotonic() - started
            results[part] = result
    return results


def _clean(value: Any) -> Any:
    """JSON without NaN or infinities (they are not JSON); floats rounded to what a benchmark can claim."""
    if isinstance(value, float):
        return None if not math.isfinite(value) else float(f"{value:.6g}")
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_results(path: Path, results: dict[str, PartResult], settings: Settings, argv: list[str],
                  started: datetime) -> None:
    judged = [t for r in results.values() for t in r.targets if not t.informational]
    machine = machine_info()
    machine["loadavg_at_start"] = [round(x, 2) for x in settings.load_at_start]
    doc = {
        "generated_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "command": "python -m bench " + " ".join(argv),
        "mode": "quick" if settings.quick else "full",
        "duration_s": settings.budget.elapsed(),
        "budget_s": settings.budget.total,
        "reps_requested": settings.reps,
        "method": "interleaved repetitions (baseline, subject, baseline, subject, …); medians; ratios are the"
                  " median of per-repetition ratios",
        "machine": machine,
        "summary": {"targets": len(judged), "passed": sum(t.passed for t in judged),
                    "failed": sum(not t.passed for t in judged),
                    "passed_at_quick_size_only": sum(t.passed and t.indicative for t in judged),
                    "errors": [p for p, r in results.items() if r.error]},
        "parts": {p: results[p].as_json() for p in PARTS if p in results},
    }
    path.write_text(json.dumps(_clean(doc), indent=2, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    chosen = [args.profile] if args.profile else (args.parts or list(PARTS))
    budget = Budget(args.budget or (BUDGET_QUICK if args.quick else BUDGET_FULL))
    settings = Settings(quick=args.quick, reps=args.reps or (1 if args.quick else 3), budget=budget,
                        data_dir=args.data, profile=args.profile, plot=args.plot)
    started = datetime.now(UTC)
    log(f"{'quick' if args.quick else 'full'} run of {', '.join(chosen)}; budget {budget.total:.0f} s,"
        f" up to {settings.reps} repetition(s)")
    results = run_all(chosen, settings)
    print(table(results))
    print(f"\n{settings.budget.elapsed():.0f} s in all")
    if args.profile:
        # Profiled timings are inflated by the profiler: they must not replace real results.
        log(f"profiled run: results not written; see {settings.profile_path(args.profile).relative_to(REPO_ROOT)}")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_results(args.out, results, settings, argv, started)
    log(f"results written to {args.out}")
    return 1 if any(r.error for r in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
