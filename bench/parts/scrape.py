"""scrape: /metrics rendering with 1,000 agents, in a process that never opens a store."""

from __future__ import annotations

import time
from pathlib import Path

from bench import BENCH_DIR
from bench.core import PartResult, Settings, StepFailed, Target, log, median, percentile, safety_timeout, worker
from bench.data import Dataset, SimArgs
from bench.profiling import top

DATA = SimArgs(1000, 1, 10)
RENDERS = 200
#: Seconds one repetition may render for (at least 5 renders); fewer than RENDERS are reported as such.
TIME_CAP = 20.0
TIME_CAP_QUICK = 8.0


def run_scrape(settings: Settings) -> dict[str, PartResult]:
    started = time.monotonic()
    try:
        ds = Dataset(DATA, settings).ensure()
        profile = settings.data_dir / "tmp" / "scrape.prof" if settings.profile == "scrape" else None
        if profile is not None:
            profile.parent.mkdir(parents=True, exist_ok=True)
        reps = 1 if profile else settings.reps
        # One worker does every repetition: the snapshot is built once, as the daemon builds it once per
        # evaluation, and scrapes then only read it.
        out = worker(settings, "scrape", {"state": str(ds.state), "config": str(ds.config), "at": ds.end,
                                          "renders": RENDERS, "reps": reps,
                                          "time_cap": TIME_CAP_QUICK if settings.quick else TIME_CAP},
                     timeout=safety_timeout(settings), profile=profile)
    except (StepFailed, OSError) as exc:
        log(f"scrape failed: {exc}")
        return {"scrape": PartResult("scrape", error=str(exc))}
    per_rep = [{"p50": percentile(times, 50), "p99": percentile(times, 99), "max": max(times),
                "renders": float(len(times))} for times in out["reps"]]
    renders = [len(times) for times in out["reps"]]
    p99 = median([r["p99"] for r in per_rep])
    result = PartResult("scrape", reps=len(per_rep), seconds=time.monotonic() - started,
                        samples={"render_s": per_rep})
    result.figures = {
        "data_set": DATA.key, "agents": out["agents"], "events": out["events"], "renders_per_rep": renders,
        "p50_s": median([r["p50"] for r in per_rep]), "p99_s": p99, "max_s": max(r["max"] for r in per_rep),
        "body_bytes": out["body_bytes"], "series": out["series"], "sql_attempts": out["sql_attempts"],
        "store_module_loaded": out["store_module_loaded"], "first_render_s": out["first_render_s"],
        "generate_latest_s": out["generate_latest_s"], "identical_to_generate_latest": out["identical"] == 1.0,
    }
    result.targets = [
        Target("/metrics render p99 (1,000 agents, one changed per snapshot)", p99, "s", "<=", 0.050,
               subject=p99, baseline=out["generate_latest_s"], baseline_name="generate_latest of it all (s)",
               note=f"{out['series']} series, {out['body_bytes'] / 1e6:.1f} MB; SnapshotRenderer.exposition per new "
                    f"snapshot (scrapes of a snapshot are served its cached body); first render of all agents "
                    f"{out['first_render_s']:.2f} s"),
        Target("SQL during a scrape", float(out["sql_attempts"]), "calls", "<=", 0,
               note="no store open in the process; sqlite3.connect refused during the renders"),
    ]
    result.notes.append("p99 of each repetition's renders; the median of those over repetitions")
    if min(renders) < RENDERS:
        cap = TIME_CAP_QUICK if settings.quick else TIME_CAP
        result.notes.append(f"renders stopped at the {cap:.0f} s cap per repetition: {renders} instead of {RENDERS}")
    if profile is not None:
        path = settings.profile_path("scrape")
        label = "SnapshotRenderer.exposition, one agent changed, repeated"
        path.write_text(top([(label, Path(f"{profile}.scrape.prof"))]))
        log(f"profile written to {path.relative_to(BENCH_DIR.parent)}")
    return {"scrape": result}
