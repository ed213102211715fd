"""ingest, scaling and rescore: one rotation, so every ratio's baseline runs beside its subject.

Per repetition, in this order (only the steps the chosen parts need):

    json.loads (a) · sqlite-utils insert (b) · honestyd ingest of hb/          ← ingest
    honestyd ingest of an empty state · of S · of M · of L                     ← scaling
    rescore of S · of M · of L (+ one new event when rescore is chosen)        ← scaling, rescore

The rescore of L is shared by scaling and rescore; the ingest of each size leaves the store the
rescore of that size reads (see bench.data).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench import BENCH_DIR, REPO_ROOT
from bench.core import (
    PartResult,
    Sample,
    Settings,
    StepFailed,
    Target,
    interleave,
    log,
    median,
    paired_ratio,
    paired_target,
    run,
    safety_timeout,
    worker,
)
from bench.data import Dataset, SimArgs, probe_line, remove_db
from bench.plot import plot_scaling
from bench.profiling import top
from daemon import modelcache


@dataclass(frozen=True)
class Sizes:
    """The data sets of one mode."""

    ingest: SimArgs
    scaling: tuple[SimArgs, SimArgs, SimArgs]


#: Full: ~96k / ~287k / ~957k heartbeat events (50 agents at 700 a day for 3, 9 and 30 days).
FULL = Sizes(SimArgs(50, 30, 700), (SimArgs(50, 3, 700), SimArgs(50, 9, 700), SimArgs(50, 30, 700)))
#: Quick: ~4k / ~11k / ~38k (20 agents over 3 days, denser rather than longer). Fewer agents, because the
#: sqlite-utils baseline starts one process per heartbeat file and would alone take most of the 2 minutes.
QUICK = Sizes(SimArgs(20, 3, 700), (SimArgs(20, 3, 70), SimArgs(20, 3, 210), SimArgs(20, 3, 700)))

_HEARTBEATS = re.compile(r"heartbeats (\d+)")


def size_label(events: int) -> str:
    """957312 → "957k"; 1000000 → "1.0M"."""
    return f"{events / 1e6:.1f}M" if events >= 999_500 else f"{events / 1e3:.0f}k"


class Batch:
    """The shared rotation of the ingest, scaling and rescore parts."""

    def __init__(self, settings: Settings, parts: set[str]) -> None:
        self.settings = settings
        self.parts = parts
        sizes = QUICK if settings.quick else FULL
        self.tmp = settings.data_dir / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.profiling = settings.profile in parts
        self.profiles: list[tuple[str, Path]] = []
        needs_scaling = "scaling" in parts
        self.ingest_ds = Dataset(sizes.ingest, settings).ensure() if "ingest" in parts else None
        self.scaling_ds = [Dataset(a, settings).ensure() for a in sizes.scaling] if needs_scaling else []
        self.large = Dataset(sizes.scaling[-1], settings).ensure() if parts & {"scaling", "rescore"} else None
        self.empty = settings.data_dir / "empty-state"
        self.empty.mkdir(parents=True, exist_ok=True)

    # --- profiling

    def _prof(self, part: str, title: str) -> Path | None:
        if not self.profiling or self.settings.profile != part:
            return None
        path = self.tmp / f"{part}-{len(self.profiles)}.prof"
        path.unlink(missing_ok=True)
        self.profiles.append((title, path))
        return path

    def _ingest_argv(self, ds: Dataset, state: Path, db: Path, prof: Path | None) -> list[str]:
        argv = ds.ingest_cmd(db, state)
        if prof is None:
            return argv
        # Same command, under bench.profiling (cProfile in every thread), instead of daemon.cli directly.
        return [self.settings.python, "-m", "bench.profiling", str(prof), *argv[3:]]

    # --- steps

    def step_jsonl(self, ds: Dataset) -> Sample:
        files = [str(p) for p in ds.heartbeat_files()]
        result = worker(self.settings, "jsonl", {"files": files}, timeout=safety_timeout(self.settings))
        return {"seconds": float(result["seconds"]), "lines": float(result["lines"])}

    def step_sqlite_utils(self, ds: Dataset) -> Sample:
        exe = Path(self.settings.python).with_name("sqlite-utils")
        cmd = str(exe) if exe.exists() else (shutil.which("sqlite-utils") or "sqlite-utils")
        db = self.tmp / "sqlite-utils.db"
        remove_db(db)
        # One start-up alone, to say how much of the baseline is process starts rather than loading.
        startup, _ = run([cmd, "--version"], timeout=60)
        total = 0.0
        try:
            for beat in ds.heartbeat_files():
                argv = [cmd, "insert", str(db), "t", str(beat), "--nl"]
                seconds, _ = run(argv, timeout=safety_timeout(self.settings))
                total += seconds
        finally:
            remove_db(db)
        return {"seconds": total, "processes": float(len(ds.heartbeat_files())), "startup": startup}

    def step_ingest(self, ds: Dataset, state: Path, *, adopt: bool, prof: Path | None = None) -> Sample:
        db = self.tmp / f"ingest-{ds.args.key}.db"
        remove_db(db)
        ds.restore()
        try:
            seconds, out = run(self._ingest_argv(ds, state, db, prof), timeout=safety_timeout(self.settings))
            found = _HEARTBEATS.search(out)
            sample = {"seconds": seconds}
            if found:
                sample["heartbeats"] = float(found.group(1))
            if adopt and ds.adopt(db):
                log(f"    kept the store as the cached store of {ds.args.key}")
            if ds.args == (self.large.args if self.large else None) and state == ds.work:
                self.settings.shared["ingest_large_seconds"] = seconds
            return sample
        finally:
            remove_db(db)

    def step_empty(self) -> Sample:
        db = self.tmp / "ingest-empty.db"
        remove_db(db)
        assert self.large is not None
        try:
            seconds, _ = run(self.large.ingest_cmd(db, self.empty), timeout=safety_timeout(self.settings))
        finally:
            remove_db(db)
        return {"seconds": seconds}

    def step_rescore(self, ds: Dataset, *, one_event: bool, prof: Path | None = None) -> Sample:
        args: dict[str, Any] = {"config": str(ds.config), "at": ds.end}
        copy = self.tmp / "rescore.db"
        if one_event:
            end = datetime.fromisoformat(ds.end.replace("Z", "+00:00"))
            ts = (end - timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
            args["db"] = str(ds.copy_store(copy))
            args["one_event"] = {"root": str(ds.work), "rel": ds.live_rel,
                                 "line": probe_line(ds.live_agent, 1, ts).decode()}
        else:
            args["db"] = str(ds.store())
        try:
            result = worker(self.settings, "rescore", args, timeout=safety_timeout(self.settings), profile=prof)
            if one_event:  # a start from the cache the rescore worker left, in a fresh process as a restart is
                digest = result.pop("one_digest")
                restart = worker(self.settings, "restart", {"config": args["config"], "db": args["db"],
                                                            "at_us": result["one_at_us"]},
                                 timeout=safety_timeout(self.settings))
                result["restart_same"] = float(restart.pop("restart_digest") == digest)
                result.update(restart)
        finally:
            ds.restore()
            remove_db(copy)
            modelcache.path_for(copy).unlink(missing_ok=True)  # left by the rescore worker
        if prof is not None:
            # The worker wrote one file per profiled section; list them in place of the base name.
            self.profiles.remove(next(p for p in self.profiles if p[1] == prof))
            self.profiles += [(f"rescore of {size_label(ds.events)}: {section}", Path(f"{prof}.{section}.prof"))
                              for section in ("full", "one_event") if Path(f"{prof}.{section}.prof").exists()]
        if ds is self.large:
            self.settings.shared["rescore_large_seconds"] = float(result["full"])
        return {k: float(v) for k, v in result.items()}

    # --- the rotation

    def steps(self) -> list[tuple[str, Callable[[], Sample]]]:
        steps: list[tuple[str, Callable[[], Sample]]] = []
        if self.ingest_ds is not None:
            ds = self.ingest_ds
            steps += [
                ("json.loads (a)", lambda: self.step_jsonl(ds)),
                ("sqlite-utils insert (b)", lambda: self.step_sqlite_utils(ds)),
                ("honestyd ingest", lambda: self.step_ingest(
                    ds, ds.hb, adopt=False, prof=self._prof("ingest", "honestyd ingest (heartbeats only)"))),
            ]
        if self.scaling_ds:
            steps.append(("ingest of an empty state", self.step_empty))
            for i, sds in enumerate(self.scaling_ds):
                last = i == len(self.scaling_ds) - 1
                prof = self._prof("scaling", f"ingest of {size_label(sds.events)}") if last else None
                steps.append((f"ingest {sds.args.key}", self._ingest_step(sds, prof)))
            for sds in self.scaling_ds[:-1]:
                steps.append((f"rescore {sds.args.key}", self._rescore_step(sds, False, None)))
        if self.large is not None:
            title = "rescore"
            prof = self._prof("rescore", title) or self._prof("scaling", title)
            steps.append((f"rescore {self.large.args.key}", self._rescore_step(self.large, "rescore" in self.parts,
                                                                                prof)))
        return steps

    def _ingest_step(self, ds: Dataset, prof: Path | None) -> Callable[[], Sample]:
        return lambda: self.step_ingest(ds, ds.work, adopt=True, prof=prof)

    def _rescore_step(self, ds: Dataset, one_event: bool, prof: Path | None) -> Callable[[], Sample]:
        return lambda: self.step_rescore(ds, one_event=one_event, prof=prof)

    def run(self) -> dict[str, PartResult]:
        samples, reps = interleave(self.steps(), self.settings, reps=1 if self.profiling else None)
        results: dict[str, PartResult] = {}
        if self.ingest_ds is not None:
            results["ingest"] = self._ingest_result(samples, reps)
        if self.scaling_ds:
            results["scaling"] = self._scaling_result(samples, reps)
        if "rescore" in self.parts:
            results["rescore"] = self._rescore_result(samples, reps)
        if self.profiling and self.settings.profile:
            path = self.settings.profile_path(self.settings.profile)
            path.write_text(top(self.profiles))
            log(f"profile written to {path.relative_to(BENCH_DIR.parent)}")
        return results

    # --- results

    def _ingest_result(self, samples: dict[str, list[Sample]], reps: int) -> PartResult:
        ds = self.ingest_ds
        assert ds is not None
        subject = [s["seconds"] for s in samples["honestyd ingest"]]
        plain = [s["seconds"] for s in samples["json.loads (a)"]]
        loader = [s["seconds"] for s in samples["sqlite-utils insert (b)"]]
        rate = ds.events / median(subject)
        ingested = [s.get("heartbeats") for s in samples["honestyd ingest"]]
        result = PartResult("ingest", reps=reps, samples={k: samples[k] for k in (
            "json.loads (a)", "sqlite-utils insert (b)", "honestyd ingest")})
        result.figures = {
            "data_set": ds.args.key, "heartbeat_events": ds.events, "heartbeat_files": ds.meta["heartbeat_files"],
            "honestyd_ingest_s": median(subject), "json_loads_s": median(plain), "sqlite_utils_s": median(loader),
            "sqlite_utils_startup_s": median([s["startup"] for s in samples["sqlite-utils insert (b)"]]),
            "events_per_s": rate, "events_ingested": ingested[-1],
        }
        result.targets = [
            Target("ingest rate", rate, "ev/s", ">=", 100_000, subject=median(subject),
                   note=f"{ds.events} heartbeat events from an empty store, one process"),
            # Issue 25: twice the speed of the dependency's own loader (it was 1.0 ×).
            paired_target("ingest time ÷ sqlite-utils insert (b)", subject, loader, 0.5, "sqlite-utils insert --nl"),
            paired_target("ingest time ÷ json.loads (a)", subject, plain, 4.0, "json.loads only"),
        ]
        # At small sizes start-ups dominate both sides (one honestyd, one sqlite-utils per file): indicative only.
        result.at_quick_size(self.settings.quick)
        if any(n is not None and n != ds.events for n in ingested):
            result.notes.append(f"honestyd reported {ingested} heartbeat records for {ds.events} lines")
        files = ds.meta["heartbeat_files"]
        result.notes.append(
            "honestyd ingest reads a state holding only the heartbeat files (hb/), the same files the baselines read;"
            f" its time includes interpreter start-up, as does each of the {files} sqlite-utils processes"
            f" (one start-up alone: {result.figures['sqlite_utils_startup_s']:.2f} s, so about"
            f" {files * result.figures['sqlite_utils_startup_s']:.0f} s of the baseline); json.loads is timed"
            " in-process")
        return result

    def _scaling_result(self, samples: dict[str, list[Sample]], reps: int) -> PartResult:
        empty = [s["seconds"] for s in samples["ingest of an empty state"]]
        rows: list[dict[str, Any]] = []
        ingest_per_event: list[list[float]] = []
        rescore_per_event: list[list[float]] = []
        for ds in self.scaling_ds:
            ing = [s["seconds"] for s in samples[f"ingest {ds.args.key}"]]
            res = samples[f"rescore {ds.args.key}"]
            # Start-up and schema creation are a fixed cost, not a per-event one: the ingest of an empty
            # state, measured in the same repetition, is taken off before dividing.
            net = [max(i - e, 1e-9) for i, e in zip(ing, empty, strict=False)]
            ingest_per_event.append([n / ds.events for n in net])
            rescore_per_event.append([s["full"] / ds.events for s in res])
            rows.append({
                "data_set": ds.args.key, "events": ds.events, "label": size_label(ds.events),
                "ingest_s": median(ing), "ingest_net_s": median(net),
                "ingest_us_per_event": median(ingest_per_event[-1]) * 1e6,
                "rescore_s": median([s["full"] for s in res]), "load_s": median([s["load"] for s in res]),
                "eval_s": median([s["eval"] for s in res]),
                "rescore_us_per_event": median(rescore_per_event[-1]) * 1e6,
            })
        growth_ingest = paired_ratio(ingest_per_event[-1], ingest_per_event[0])
        growth_rescore = paired_ratio(rescore_per_event[-1], rescore_per_event[0])
        small, large = rows[0]["label"], rows[-1]["label"]
        result = PartResult("scaling", reps=reps, samples={k: v for k, v in samples.items() if "ingest " in k
                                                          or k.startswith("rescore")})
        result.figures = {"sizes": rows, "empty_state_ingest_s": median(empty)}
        result.targets = [
            Target(f"ingest cost/event {large} ÷ {small}", growth_ingest, "×", "<=", 1.5,
                   subject=rows[-1]["ingest_us_per_event"], baseline=rows[0]["ingest_us_per_event"],
                   baseline_name=f"µs/event at {small}"),
            Target(f"rescore cost/event {large} ÷ {small}", growth_rescore, "×", "<=", 1.5,
                   subject=rows[-1]["rescore_us_per_event"], baseline=rows[0]["rescore_us_per_event"],
                   baseline_name=f"µs/event at {small}"),
        ]
        result.at_quick_size(self.settings.quick)
        result.notes.append("ingest cost/event = (ingest − ingest of an empty state) ÷ events, per repetition;"
                            " rescore = load the daemon's model from the store + evaluate every decision (cold),"
                            " in-process")
        if not self.profiling:  # a profiled run's times are inflated: no curve from them
            png = self.settings.plot
            plot_scaling(png, [r["events"] for r in rows],
                         {"ingest": [r["ingest_us_per_event"] for r in rows],
                          "rescore": [r["rescore_us_per_event"] for r in rows]}, limit=1.5)
            result.figures["plot"] = str(png.relative_to(REPO_ROOT) if png.is_relative_to(REPO_ROOT) else png)
        return result

    def _rescore_result(self, samples: dict[str, list[Sample]], reps: int) -> PartResult:
        ds = self.large
        assert ds is not None
        key = f"rescore {ds.args.key}"
        rs = samples[key]
        full = median([s["full"] for s in rs])
        one = median([s["one_total"] for s in rs])
        result = PartResult("rescore", reps=reps, samples={key: rs})
        warm = median([s["warm"] for s in rs])
        result.figures = {
            "data_set": ds.args.key, "heartbeat_events": ds.events, "events_loaded": rs[-1]["events"],
            "decisions": rs[-1]["decisions"], "agents": rs[-1]["agents"],
            "windows": "every configured window (24h, 7d, 30d)",
            "cold_s": full, "load_s": median([s["load"] for s in rs]), "eval_s": median([s["eval"] for s in rs]),
            "warm_full_s": warm, "warm_sums": rs[-1]["warm_summed"],
            "one_event_total_s": one, "one_event_ingest_s": median([s["one_ingest"] for s in rs]),
            "one_event_sync_s": median([s["one_load"] for s in rs]),
            "one_event_eval_s": median([s["one_eval"] for s in rs]),
            "one_event_rule_runs": rs[-1]["one_evaluated"], "one_event_sums": rs[-1]["one_summed"],
            "one_event_seen": all(s["one_seen"] == 1.0 for s in rs),
            "restart_s": median([s["restart"] for s in rs]), "restart_load_s": median([s["restart_load"] for s in rs]),
            "cache_save_s": median([s["cache_save"] for s in rs]), "cache_mb": rs[-1]["cache_bytes"] / 1e6,
            "restart_same": all(s["restart_same"] == 1.0 for s in rs),
            "restart_hwm_mb": median([s["restart_hwm_mb"] for s in rs]),
            "reload_weights_s": median([s["reload"] for s in rs]), "reload_weights_sums": rs[-1]["reload_summed"],
            "day_later_s": median([s["day_later"] for s in rs]), "day_later_held": int(rs[-1]["day_later_held"]),
        }
        result.targets = [
            Target("full rescore, model loaded (every agent × window, T + 1 h)", warm, "s", "<=", 3.0,
                   note=f"{result.figures['warm_sums']} (agent, window) sums recomputed; a day on, the evaluation "
                        f"that also lets go of the records behind the windows (once a day): "
                        f"{result.figures['day_later_s'] * 1e3:.0f} ms, {result.figures['day_later_held']:,} held"),
            Target("cold start: load the model + evaluate every decision", full, "s", "<=", 15.0,  # issue 25
                   note=f"load {result.figures['load_s']:.2f} s + evaluate {result.figures['eval_s']:.2f} s; "
                        "paid at a start without a usable model cache, or a reload changing what the rules read, "
                        "while the previous snapshot is served; a reload changing only weights and the floor keeps "
                        f"the model: {result.figures['reload_weights_s'] * 1e3:.0f} ms "
                        f"({result.figures['reload_weights_sums']} sums)"),
            Target("start from the model cache (read + catch up + evaluate)", result.figures["restart_s"], "s", "<=",
                   3.0, subject=result.figures["restart_s"], baseline=full, baseline_name="cold start (s)",
                   note=f"the model a clean stop wrote ({result.figures['cache_mb']:.0f} MB in "
                        f"{result.figures['cache_save_s']:.1f} s), in a fresh process: read "
                        f"{result.figures['restart_load_s']:.2f} s, then catch up one event and evaluate; peak "
                        f"{result.figures['restart_hwm_mb']:.0f} MB. Not a rescore: no rule is re-run; the cold "
                        "start above is the rescore from the store"),
            Target("rescore after one new event", one, "s", "<=", 0.020, subject=one, baseline=warm,
                   baseline_name="warm full rescore (s)",
                   note=f"append + ingest_path + sync + evaluate; rules re-run for "
                        f"{result.figures['one_event_rule_runs']} decision(s), "
                        f"{result.figures['one_event_sums']} (agent, window) sum(s)"),
        ]
        result.at_quick_size(self.settings.quick)
        if not result.figures["one_event_seen"]:
            result.notes.append("the appended event was NOT among the reloaded records")
        if not result.figures["restart_same"]:
            result.notes.append("the model read from the cache did NOT give the windows of the model that wrote it")
        return result


def run_batch(settings: Settings, parts: set[str]) -> dict[str, PartResult]:
    """Run the chosen parts of the group; a failure marks every chosen part as errored."""
    try:
        return Batch(settings, parts).run()
    except (StepFailed, OSError, KeyError, ValueError) as exc:
        log(f"batch parts failed: {exc}")
        return {p: PartResult(p, error=str(exc)) for p in parts}
