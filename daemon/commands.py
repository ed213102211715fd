"""The bodies of the ``honestyd`` commands (daemon/cli.py parses the arguments and calls one of them).

Each ``cmd_*`` takes the parsed arguments and returns the exit status; a mistake in them is a
:class:`~daemon.cliargs.UsageError` (one line, exit status 2). Modules a command alone needs are imported in it,
so that a command starts without loading the others' dependencies.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from collectors.batch import scan_state
from collectors.checks import load_checks
from collectors.records import Event
from collectors.rfc3339 import format_ts
from daemon import cliargs
from daemon.cliargs import UsageError
from daemon.config import Config, ConfigError, load_config, render_config
from scorers.context import Context, Records
from scorers.score import evaluate_window, to_json
from scorers.source_verifiability import with_path_checks


def _load_config_or_exit(path: Path | None, flag: str = "--config ") -> Config:
    """The config at ``path`` (None: the defaults); each of its errors is a line of one UsageError."""
    try:
        return load_config(path)
    except ConfigError as exc:
        where = f"{path}: "
        raise UsageError("\n".join(flag + (e if e.startswith(where) else where + e) for e in exc.errors)) from exc


def _known_agent(agent: str, agents: Collection[str], at: datetime | None) -> None:
    """A UsageError unless ``agent`` is among ``agents`` (those with decisions up to ``at``)."""
    if agent in agents:
        return
    names = sorted(agents)
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    until = f" up to {format_ts(at)}" if at is not None else ""
    raise UsageError(f"agent {agent!r}: no decisions by this agent{until} (agents: {shown or 'none'})")


def load_records(args: argparse.Namespace, config: Config) -> Records:
    """Records from ``--state DIR`` (parsed afresh) or ``--db FILE`` (the store), plus ``--checks``."""
    if args.state is not None:
        scan = scan_state(Path(args.state), config)
        records = Records(scan.events, scan.labels, scan.files, (), scan.links)
    else:
        from daemon.store import Store

        with Store.open(Path(args.db), readonly=True) as store:
            records = store.load_records()
    if args.checks is not None:
        checks, rejects = load_checks(Path(args.checks).read_bytes(), str(args.checks))
        for r in rejects:
            print(f"{r.path}:{r.line}: rejected check ({r.reason})", file=sys.stderr)
        records = replace(records, checks=[*records.checks, *checks])
    return records


def cmd_check_config(args: argparse.Namespace) -> int:
    """Print the effective configuration, or every error (exit 2)."""
    config = _load_config_or_exit(Path(args.file), flag="")
    sys.stdout.write(render_config(config))
    return 0


def _scoring_context(args: argparse.Namespace) -> Context:
    config = _load_config_or_exit(Path(args.config) if args.config else None)
    if args.weights is not None:
        if args.weights not in config.weights_versions:
            known = ", ".join(sorted(config.weights_versions))
            raise UsageError(f"--weights {args.weights}: unknown weights version {args.weights!r} (known: {known})")
        # Re-render every agent under one version, per-agent contracts included.
        config = replace(config, weights_active=args.weights, weights_agents={})
    records = load_records(args, config)
    if args.verify_paths:
        records = with_path_checks(records, args.at)
    return Context(records, args.at, config)


def cmd_score(args: argparse.Namespace) -> int:
    """Score every agent for one window at ``--at``."""
    from daemon.render import render_scores

    ctx = _scoring_context(args)
    result = evaluate_window(ctx, args.window or ctx.config.scoring.windows[0][0])
    if args.json:
        print(json.dumps(to_json(result), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render_scores(result, ctx.config.scoring.min_decisions))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """The per-decision table and arithmetic behind one agent's score."""
    from daemon.render import render_audit
    from scorers.audit import audit_json

    ctx = _scoring_context(args)
    result = evaluate_window(ctx, args.window or ctx.config.scoring.windows[0][0], agents=[args.agent])
    agent = result.agents.get(args.agent)
    if agent is None:
        _known_agent(args.agent, ctx.by_agent, ctx.at)  # never seen: a mistake; seen, but not lately: no result
        print(f"no decisions by {args.agent!r} in the listing window ending {args.at}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(audit_json(agent, result), indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render_audit(agent, result, ctx.config.scoring.min_decisions))
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    """One-shot catch-up of a state directory into a database (running it twice adds nothing)."""
    from daemon.ingest import Ingester
    from daemon.store import Store

    config = _load_config_or_exit(Path(args.config) if args.config else None)
    with _holding(Path(args.db)), Store.open(Path(args.db)) as store:
        ingester = Ingester(store, Path(args.state), config)
        stats = ingester.scan()
        ingester.reject_log.flush(everything=True)  # the rejects only counted, summed up before the report
        counts = store.counts()
    added = sum(stats.records.values())
    rejected = sum(stats.rejects.values())
    print(
        f"ingested {added} new records ({', '.join(f'{k} {v}' for k, v in sorted(stats.records.items())) or 'none'}),"
        f" {rejected} rejects; store holds {counts['events']} events, {counts['labels']} labels,"
        f" {counts['files']} files, {counts['rejects']} rejects"
    )
    return 0


def cmd_rejects(args: argparse.Namespace) -> int:
    """List every refused line or file: where, why, and how it started."""
    from daemon.store import Store

    with Store.open(Path(args.db), readonly=True) as store:
        rows = store.rejects()
    for r in rows:
        where = f"{r['path']}:{r['line']}" if r["line"] else r["path"]
        gen = f" (generation {r['generation']})" if r["generation"] else ""
        print(f"{where}{gen}\t{r['source']}\t{r['reason']}\t{r['snippet'][:120]!r}")
    print(f"{len(rows)} rejects", file=sys.stderr)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``export decisions``: JSON Lines, one stored decision per line, sorted by id."""
    from daemon.store import Store

    config = _load_config_or_exit(Path(args.config) if args.config else None)
    with Store.open(Path(args.db), readonly=True) as store:
        decisions = store.events(decisions_only=config.decision_kinds)
    decisions.sort(key=lambda e: (e.id, e.order))
    out = sys.stdout
    for d in decisions:
        out.write(json.dumps(decision_json(d), ensure_ascii=False, sort_keys=True) + "\n")
    return 0


def decision_json(d: Event) -> dict[str, object]:
    """A decision as exported: every parsed field, its citations and its source location."""
    return {
        "id": d.id, "ts": format_ts(d.ts), "agent": d.agent, "kind": d.kind, "thread": d.thread,
        "text": d.text, "prompt": d.prompt, "reason": d.reason, "alternatives": list(d.alternatives),
        "subject": list(d.subject), "corrects": d.corrects,
        "citations": [{"type": c.type, "target": c.target} for c in d.citations],
        "source": {"path": d.path, "line": d.line, "generation": d.generation},
    }


def cmd_verify(args: argparse.Namespace) -> int:
    """Catch the database up with the state, check sources now (all, or a day's sample), store the results."""
    import asyncio

    from daemon.ingest import Ingester, system_clock
    from daemon.store import Store
    from daemon.verify.once import verify_once

    config = _load_config_or_exit(Path(args.config) if args.config else None)
    root = Path(args.state)
    fixed = args.at

    def clock() -> datetime:
        return fixed if fixed is not None else system_clock()

    now = clock()
    with _holding(Path(args.db)), Store.open(Path(args.db)) as store:
        Ingester(store, root, config, clock).scan()
        sample_day = None if args.all else (args.sample or now.date())
        summary = asyncio.run(verify_once(store, config, root, now, clock, sample_day=sample_day))
    counts = summary.as_dict()
    if args.json:
        print(json.dumps({"at": format_ts(now), "sample": str(sample_day) if sample_day else "all", "types": counts}))
    else:
        scope = f"sample of {sample_day}" if sample_day else "all targets"
        print(f"verified {sum(summary.checked.values())} targets ({scope}), {sum(summary.cached.values())} cached")
        for kind, c in counts.items():
            print(f"  {kind:<6} checked {c['checked']:>5}  resolved {c['resolved']:>5}  failed {c['failed']:>5}"
                  f"  inconclusive {c['inconclusive']:>5}  cached {c['cached']:>5}")
    return 0


def cmd_checks_export(args: argparse.Namespace) -> int:
    """Every stored check as JSON Lines in the ``--checks`` format."""
    from daemon.store import Store

    with Store.open(Path(args.db), readonly=True) as store:
        for c in store.checks():
            row = {"target": c.target, "type": c.type, "checked_at": format_ts(c.checked_at), "ok": c.ok,
                   "status": c.status, "detail": c.detail}
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    return 0


def cmd_checks_import(args: argparse.Namespace) -> int:
    """Append check results from a JSON Lines file (``--checks`` format) to the store."""
    from daemon.store import Store

    checks, rejects = load_checks(Path(args.file).read_bytes(), str(args.file))
    for r in rejects:
        print(f"{r.path}:{r.line}: rejected check ({r.reason})", file=sys.stderr)
    with Store.open(Path(args.db)) as store, store.transaction():
        store.add_checks(checks)
    print(f"imported {len(checks)} checks, {len(rejects)} rejected")
    return 1 if rejects else 0


@contextmanager
def _holding(db: Path) -> Iterator[None]:
    """The store's lock (``<db>.lock``) while a one-shot command writes: two writers would break exactly-once."""
    from daemon.lifecycle import StartupError, holding_store

    try:
        with holding_store(db):
            yield
    except StartupError as exc:
        print(exc, file=sys.stderr)
        raise SystemExit(exc.status) from None


def cmd_store_check(args: argparse.Namespace) -> int:
    """Is the database sound? ``ok`` and its row counts (exit 0), or what SQLite finds wrong (exit 3)."""
    from daemon.lifecycle import EXIT_STORE_DAMAGED, EXIT_STORE_UNUSABLE
    from daemon.storerepair import check

    db = Path(args.db)
    if not db.is_file():
        print(f"--db {db}: no database there", file=sys.stderr)
        return 2
    try:
        report = check(db)
    except sqlite3.OperationalError as exc:
        print(f"{db}: cannot open: {exc}", file=sys.stderr)
        return EXIT_STORE_UNUSABLE
    if not report.problems:
        print(f"{db}: ok ({', '.join(f'{n} {t}' for t, n in report.counts.items())})")
        return 0
    print(f"{db}: damaged: {report.problems[0]}" + (f" (and {len(report.problems) - 1} more problems)"
                                                    if len(report.problems) > 1 else ""))
    for problem in report.problems[1:]:
        print(f"  {problem}")
    print(f"repair: honestyd store rebuild --db {db} --state DIR [--config FILE] (see docs/deploy.md)")
    return EXIT_STORE_DAMAGED


def cmd_store_rebuild(args: argparse.Namespace) -> int:
    """Move a damaged database aside and build a fresh one from the state root and what the old file still holds."""
    from daemon.storerepair import describe, describe_lost, rebuild

    config = _load_config_or_exit(Path(args.config) if args.config else None)
    db, root = Path(args.db), Path(args.state)
    if not db.is_file():
        print(f"--db {db}: no database there (`honestyd ingest` makes one)", file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"--state {root}: not a folder", file=sys.stderr)
        return 2
    with _holding(db):
        report = rebuild(db, root, config)
    print(f"moved the damaged store aside to {report.aside}")
    print(f"kept from it: {describe(report.kept)}")
    lost, bad = describe_lost(report.lost), +report.bad
    if lost or bad:
        print(f"could not read from it (lost, unless still in the state root): {'; '.join(lost) or 'no run'}"
              + ("; garbled rows refused: " + ", ".join(f"{n} of {t}" for t, n in sorted(bad.items())) if bad else ""))
    print(f"re-ingested from {root}: {sum(report.ingest.records.values())} records,"
          f" {sum(report.ingest.rejects.values())} rejects")
    c = report.counts
    print(f"{db} now holds {c['events']} events, {c['labels']} labels, {c['files']} files, {c['checks']} checks,"
          f" {c['rejects']} rejects")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    """Fit weights to reviewer labels; ``--apply VERSION`` writes them to the weights file."""
    from daemon import tune_apply

    config = _load_config_or_exit(Path(args.config) if args.config else None)
    return tune_apply.main(args, load_records(args, config), config)


def cmd_history(args: argparse.Namespace) -> int:
    """An agent's daily score trend under any weights version."""
    from datetime import timedelta

    from daemon.store import Store
    from daemon.tune_apply import latest_time
    from scorers.history import counts_at, history_points

    config = _load_config_or_exit(Path(args.config) if args.config else None)
    version = args.weights or config.weights_for(args.agent)[0]
    if version not in config.weights_versions:
        known = ", ".join(sorted(config.weights_versions))
        raise UsageError(f"--weights {version}: unknown weights version {version!r} (known: {known})")
    window = args.window or config.scoring.windows[0][0]
    if window not in dict(config.scoring.windows):
        raise UsageError(f"--window {window}: history is kept for the configured windows only"
                         f" ({', '.join(name for name, _ in config.scoring.windows)})")
    counts = []
    if args.state is not None or args.backfill:
        records = load_records(args, config)
        end = args.at or latest_time(records)
        if end is None:
            print("no records", file=sys.stderr)
            return 1
        _known_agent(args.agent, {e.agent for e in records.events}, None)
        for n in range(args.days - 1, -1, -1):
            counts += counts_at(records, end.date() - timedelta(days=n), config, [args.agent])
    if args.db is not None:
        with Store.open(Path(args.db), readonly=not counts) as store:  # only --backfill writes
            if counts:
                with store.transaction():
                    store.put_history(counts)
            counts = store.history(args.agent)
            if not counts and not store.has_agent(args.agent):
                raise UsageError(f"agent {args.agent!r}: no records by this agent in {args.db}")
    points = [p for p in history_points(counts, config.weights_versions[version], config.scoring.min_decisions)
              if p.window == window]
    if args.json:
        print(json.dumps({"agent": args.agent, "window": window, "weights_version": version, "points": [
            {"day": p.day.isoformat(), "decisions": p.decisions, "score": p.score, "percent": p.percent,
             "coverage": p.coverage} for p in points]}, indent=2))
        return 0
    print(f"{args.agent} · window {window} · weights {version}")
    for p in points:
        shown = f"{p.percent:>3} %" if p.percent is not None else f"INSUFFICIENT · N=<{config.scoring.min_decisions}"
        print(f"  {p.day}  {shown}  ({p.decisions} decisions, coverage {p.coverage:.2f})")
    if not points:
        print("  no history stored (run the daemon, or pass --backfill)")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run the daemon until SIGTERM/SIGINT; SIGHUP re-reads the config file and keeps the flags."""
    import logging

    from collectors import walkahead
    from daemon import heap, lifecycle
    from daemon.config import Overrides

    heap.settle()  # before the daemon's threads start
    config_path = Path(args.config) if args.config else None
    config = _load_config_or_exit(config_path)
    overrides = Overrides(
        state=Path(args.state) if args.state else None,
        db=Path(args.db) if args.db else None,
        listen=args.listen,
    )
    # The flags were checked as they were parsed; what the config names is checked here, before anything starts.
    applied = overrides.apply(config)
    cliargs.check("--state" if args.state else "[state] root", cliargs.existing_dir, applied.state_root)
    cliargs.check("--db" if args.db else "[store] path", cliargs.database, applied.db_path)
    # A large root's catch-up walk runs on the second core while this one imports the daemon (it only reads).
    cache = lifecycle.cache_path_for(applied.db_path) if applied.daemon.model_cache else None
    walk = walkahead.start(applied.state_root, applied.db_path, cache=cache)

    from daemon import logescape, logsetup
    from daemon.app import Daemon, file_clock
    from daemon.ingest import system_clock

    logescape.configure(logging.INFO, logescape.DAEMON_FORMAT)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per job run drowns the journal
    logsetup.install()  # a line repeated in a flood is written a few times, then counted (daemon/logsetup.py)
    clock = args.clock_warp or (file_clock(Path(args.clock_file)) if args.clock_file else system_clock)
    return Daemon(config, config_path=config_path, overrides=overrides, clock=clock, walk_ahead=walk).run()


def cmd_demo(args: argparse.Namespace) -> int:
    """A generated state, the daemon on it, and live agents writing to it (daemon/demo.py)."""
    from daemon import demo, heap

    heap.settle()  # the daemon runs in this process
    return demo.main(args)


def cmd_simulate(args: argparse.Namespace) -> int:
    """Generate a seeded demo/test state directory."""
    from daemon import simulate

    return simulate.main(args)
