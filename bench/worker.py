"""In-process measurements, each run in a fresh interpreter: ``python -m bench.worker TASK JSON``.

Prints one JSON object (the figures) as its last line. Timing happens here, around exactly the
calls the issue names, so interpreter start-up and imports are outside every figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.profiling import AllThreads

Args = dict[str, Any]


@contextlib.contextmanager
def _maybe_profile(args: Args, section: str) -> Iterator[None]:
    """Profile the block into ``<profile>.<section>.prof`` when the parent asked for a profile."""
    if not args.get("profile"):
        yield
        return
    profiler = AllThreads()
    with profiler:
        yield
    profiler.dump(Path(f"{args['profile']}.{section}.prof"))


def task_jsonl(args: Args) -> Args:
    """Baseline (a): ``json.loads`` of every line of the given files, reading included; nothing else."""
    loads = json.loads
    count = 0
    with _maybe_profile(args, "jsonl"):
        started = time.perf_counter()
        for name in args["files"]:
            with open(name, "rb") as f:
                for line in f:
                    loads(line)
                    count += 1
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "lines": count}


def task_rescore(args: Args) -> Args:
    """The daemon's scoring path: load the model and evaluate (cold), evaluate an hour later with every window
    sliding (warm full rescore), then optionally append one event, ingest it, sync and evaluate again.
    """
    from datetime import timedelta

    from collectors.rfc3339 import parse_ts
    from daemon.config import load_config
    from daemon.modelkeeper import LiveFeed
    from daemon.store import Store

    config = load_config(Path(args["config"]))
    at = parse_ts(args["at"])
    one = args.get("one_event")
    out: Args = {}
    gc.collect()
    store = Store.open(Path(args["db"]), readonly=one is None)
    try:
        feed = LiveFeed(config)
        with _maybe_profile(args, "full"):
            t0 = time.perf_counter()
            feed.load(store, at)  # as the daemon does: what it would let go at ``at`` stays in the store
            t1 = time.perf_counter()
            windows = feed.evaluate(at)
            t2 = time.perf_counter()
            evaluated = feed.model.evaluated
            later = at + timedelta(hours=1)
            feed.evaluate(later)
            t3 = time.perf_counter()
        out.update(load=t1 - t0, eval=t2 - t1, full=t2 - t0, warm=t3 - t2, warm_summed=feed.model.summed,
                   decisions=evaluated, agents=max((len(w.agents) for w in windows.values()), default=0),
                   events=store.feed_marks()[0])
        out.update(_reload_new_weights(feed, config, later))
        if one is not None:  # a copy of the store: writable, so it has the store id the cache is keyed by
            out.update(_save_cache(store, Path(args["db"]), feed))
            out.update(_one_event(store, one, config, later, feed, args))
        # Last (the clock cannot go back a day after it without a rebuild): a day on, the evaluation that lets go
        # of the records behind the windows (once a day: it walks every record held).
        t4 = time.perf_counter()
        feed.evaluate(later + timedelta(days=1))
        out.update(day_later=time.perf_counter() - t4, day_later_held=len(feed.model.records()))
    finally:
        store.close()
    return out


def _reload_new_weights(feed: Any, config: Any, at: Any) -> Args:
    """A reload that changes only what summing reads (another weights version and floor): the daemon keeps the model
    (LiveFeed.adopt) and sums every window again. Timed from adopt to the evaluation's end; then back to ``config``."""
    from dataclasses import replace

    other = replace(config, weights_versions={**config.weights_versions, "bench": (0.1, 0.3, 0.1, 0.2, 0.2, 0.1)},
                    weights_active="bench", scoring=replace(config.scoring, min_decisions=7))
    t0 = time.perf_counter()
    if not feed.adopt(other):
        raise RuntimeError("a weights-only change was refused by the model")
    feed.evaluate(at)
    t1 = time.perf_counter()
    summed = feed.model.summed
    feed.adopt(config)
    feed.evaluate(at)
    return {"reload": t1 - t0, "reload_summed": summed}


def _save_cache(store: Any, db: Path, feed: Any) -> Args:
    """A clean stop writes the model cache (daemon/modelcache.py); ``task_restart``, a fresh process as a restart is,
    reads it after this worker has gone on (one more event ingested: the start catches up)."""
    from daemon import modelcache

    t0 = time.perf_counter()
    size = modelcache.save(feed, modelcache.path_for(db), store.store_id())
    return {"cache_save": time.perf_counter() - t0, "cache_bytes": size}


def windows_digest(windows: Any) -> str:
    """A digest of what an evaluation returned (every window, agent and figure), to compare two processes' models."""
    import hashlib

    return hashlib.sha256(repr(sorted(windows.items())).encode()).hexdigest()


def task_restart(args: Args) -> Args:
    """The daemon's start from the model cache the rescore worker wrote: open the store, read the cache, catch up
    with what the store committed since (sync), evaluate; the windows' digest, and this process's peak memory."""
    from bench.parts.daemon import vm_status
    from collectors.rfc3339 import from_us
    from daemon import modelcache
    from daemon.config import load_config
    from daemon.store import Store

    config = load_config(Path(args["config"]))
    db = Path(args["db"])
    store = Store.open(db)
    try:
        t0 = time.perf_counter()
        loaded = modelcache.load(modelcache.path_for(db), config, store)
        if loaded is None:
            raise RuntimeError("the model cache the rescore worker wrote was refused (see the log)")
        gc.collect()  # and the model frozen out of the collector: as the daemon's load does (modelkeeper.load_feed)
        gc.freeze()
        t1 = time.perf_counter()
        loaded.sync(store)
        windows = loaded.evaluate(from_us(int(args["at_us"])))
        t2 = time.perf_counter()
    finally:
        store.close()
    return {"restart_load": t1 - t0, "restart": t2 - t0, "restart_digest": windows_digest(windows),
            "restart_hwm_mb": vm_status(os.getpid())["VmHWM"] / 2**20}


def _one_event(store: Any, one: Args, config: Any, at: Any, feed: Any, args: Args) -> Args:
    from datetime import timedelta

    from collectors.rfc3339 import to_us
    from daemon.ingest import Ingester

    root, rel = Path(one["root"]), one["rel"]
    line = one["line"].encode()
    with _maybe_profile(args, "one_event"):
        t0 = time.perf_counter()
        with open(root / rel, "ab") as f:
            f.write(line)
        t1 = time.perf_counter()
        Ingester(store, root, config).ingest_path(rel)
        t2 = time.perf_counter()
        applied = feed.sync(store)
        t3 = time.perf_counter()
        windows = feed.evaluate(at + timedelta(milliseconds=100))
        t4 = time.perf_counter()
    return {
        "one_append": t1 - t0, "one_ingest": t2 - t1, "one_load": t3 - t2, "one_eval": t4 - t3,
        "one_total": t4 - t0, "one_seen": float(applied >= 1), "one_evaluated": feed.model.evaluated,
        "one_summed": feed.model.summed,
        "one_agents": max((len(w.agents) for w in windows.values()), default=0),
        # What a start from the cache must score at the same instant (task_restart).
        "one_at_us": to_us(at + timedelta(milliseconds=100)), "one_digest": windows_digest(windows),
    }


def task_scrape(args: Args) -> Args:
    """Build a Snapshot from a state directory (no store), then time /metrics renders with SQL forbidden."""
    import sqlite3

    from collectors.batch import scan_state
    from collectors.rfc3339 import parse_ts
    from daemon.config import load_config
    from daemon.metrics import SnapshotRenderer
    from daemon.snapshot import Counters, build_snapshot
    from scorers.context import Records
    from tests.metrics_reference import reference_exposition

    config = load_config(Path(args["config"]))
    scan = scan_state(Path(args["state"]), config)
    records = Records(scan.events, scan.labels, scan.files, (), scan.links)
    snap = build_snapshot(records, parse_ts(args["at"]), config, Counters(), ())
    agents = max(len(w.agents) for w in snap.windows.values())
    # No store is opened in this process at all; on top of that, any attempt to open a database
    # during the renders is counted and refused, so "no SQL during a scrape" is checked, not assumed.
    sql_attempts = 0
    real_connect = sqlite3.connect

    def refuse(*a: Any, **k: Any) -> sqlite3.Connection:
        nonlocal sql_attempts
        sql_attempts += 1
        raise RuntimeError("SQL during a scrape")

    reps: list[list[float]] = []
    names = sorted({a for w in snap.windows.values() for a in w.agents})
    renderer = SnapshotRenderer()
    t0 = time.perf_counter()
    body = renderer.exposition(snap)  # every agent: what the first scrape after a start pays
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    reference_exposition(snap)  # the same body by prometheus_client's generate_latest: the baseline
    whole = time.perf_counter() - t0
    nxt = snap
    sqlite3.connect = refuse  # type: ignore[assignment]
    try:
        with _maybe_profile(args, "scrape"):
            for _ in range(args["reps"]):
                times: list[float] = []
                rep_started = time.perf_counter()
                # Bounded in time too: at a second a render, 200 would take minutes and tell nothing more.
                while len(times) < args["renders"] and (
                        len(times) < 5 or time.perf_counter() - rep_started < args["time_cap"]):
                    # The next evaluation's snapshot: one agent's results changed (new objects), as after one
                    # event; built outside the timing, as the daemon builds it before any scrape.
                    nxt = _one_agent_changed(snap, names[len(times) % len(names)], len(times))
                    t0 = time.perf_counter()
                    body = renderer.exposition(nxt)  # the body every scrape of this snapshot is then served
                    times.append(time.perf_counter() - t0)
                reps.append(times)
    finally:
        sqlite3.connect = real_connect
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return {"reps": reps, "agents": agents, "events": len(records.events), "body_bytes": len(body),
            "series": series, "sql_attempts": sql_attempts, "store_module_loaded": "daemon.store" in sys.modules,
            "first_render_s": first, "generate_latest_s": whole,
            "identical": float(body == reference_exposition(nxt))}


def _one_agent_changed(snap: Any, agent: str, k: int) -> Any:
    from dataclasses import replace

    windows = {}
    for name, result in snap.windows.items():
        agents = dict(result.agents)
        if agent in agents:
            agents[agent] = replace(agents[agent], decisions=agents[agent].decisions + k)
        windows[name] = replace(result, agents=agents)
    return replace(snap, windows=windows)


def task_verify(args: Args) -> Args:
    """Interleaved: plain aiohttp GETs (baseline) and UrlChecker.check (subject) over the same URLs."""
    return asyncio.run(_verify(args))


async def _verify(args: Args) -> Args:
    import aiohttp

    from daemon.config import Verify
    from daemon.verify.http import UrlChecker

    hosts: dict[str, int] = args["hosts"]
    names = sorted(hosts)
    n = args["checks"]
    stats_url = args["stats_url"]
    settings = Verify(allow_networks=("127.0.0.0/8",), per_host=args["per_host"], concurrency=args["concurrency"])

    async def server_stats(session: aiohttp.ClientSession, reset: bool) -> Args:
        async with session.post(stats_url, params={"reset": "1" if reset else "0"}) as resp:
            data: Args = await resp.json()
            return data

    order = skewed_hosts(len(names), n)

    def urls(rep: int, kind: str) -> list[str]:
        # Distinct paths, so nothing can be answered from a cache.
        return [f"http://{names[h]}:{hosts[names[h]]}/{kind}/{rep}/{i}" for i, h in enumerate(order)]

    async def baseline(session: aiohttp.ClientSession, rep: int) -> Args:
        async def get(url: str) -> bool:
            async with session.get(url) as resp:
                await resp.read()
                return resp.status == 200

        started = time.perf_counter()
        ok = await asyncio.gather(*(get(u) for u in urls(rep, "plain")))
        return {"seconds": time.perf_counter() - started, "ok": float(sum(ok))}

    async def checked(rep: int) -> Args:
        async with UrlChecker(settings) as checker:
            started = time.perf_counter()
            outcomes = await asyncio.gather(*(checker.check(u) for u in urls(rep, "check")))
            seconds = time.perf_counter() - started
        return {"seconds": seconds, "ok": float(sum(1 for o in outcomes if o.ok is True))}

    samples: list[Args] = []
    connector = aiohttp.TCPConnector(limit=args["concurrency"], limit_per_host=args["per_host"])
    async with aiohttp.ClientSession(connector=connector) as control:
        plain_connector = aiohttp.TCPConnector(limit=args["concurrency"], limit_per_host=args["per_host"])
        async with aiohttp.ClientSession(connector=plain_connector) as plain:
            for rep in range(args["reps"]):
                await server_stats(control, reset=True)
                base = await baseline(plain, rep)
                base_stats = await server_stats(control, reset=True)
                with _maybe_profile(args, f"checks-{rep}"):
                    subject = await checked(rep)
                subject_stats = await server_stats(control, reset=True)
                samples.append({"baseline": base, "baseline_server": base_stats,
                                "checker": subject, "checker_server": subject_stats})
    return {"samples": samples}


def skewed_hosts(hosts: int, checks: int) -> list[int]:
    """Host index of each check: Zipf-weighted (host k gets ∝ 1/(k+1)), hosts taking turns.

    Real citations crowd onto a few hosts. With checks spread evenly, 64 global slots over 50
    hosts would never need a fifth slot on any host and the per-host limit would go untested;
    with the skew, the busiest hosts have hundreds of checks waiting and the limit binds.
    """
    weights = [1 / (k + 1) for k in range(hosts)]
    total = sum(weights)
    counts = [int(checks * w / total) for w in weights]
    for k in range(checks - sum(counts)):
        counts[k % hosts] += 1
    order: list[int] = []
    while len(order) < checks:
        for k in range(hosts):
            if counts[k]:
                counts[k] -= 1
                order.append(k)
    return order


TASKS: dict[str, Callable[[Args], Args]] = {
    "jsonl": task_jsonl, "rescore": task_rescore, "restart": task_restart, "scrape": task_scrape,
    "verify": task_verify,
}


def main(argv: list[str]) -> int:
    task, payload = argv[0], json.loads(argv[1])
    result = TASKS[task](payload)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
