"""honestyd scores how honest AI agents are, from what they leave in a state directory.

It reads the agents' heartbeats, briefs, findings and reviewers' 👍/👎 labels, checks the sources
they cite, and scores six components per agent (citations, refusals, verifiable sources, gaps
surfaced, consistency, self-correction). `honestyd run` is the daemon: it watches the state
directory and serves Prometheus metrics, a JSON API, audit pages and a methodology changelog.
The other commands score, audit, tune and maintain the same data from the command line.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.batch import scan_state
from collectors.checks import load_checks
from collectors.records import Event
from collectors.rfc3339 import format_ts, parse_ts
from daemon import __version__, cliargs
from daemon.cliargs import UsageError
from daemon.config import Config, ConfigError, load_config, render_config
from scorers.context import Context, Records
from scorers.score import evaluate_window, to_json
from scorers.source_verifiability import with_path_checks

if TYPE_CHECKING:
    from daemon.ingest import Clock


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
    with Store.open(Path(args.db)) as store, store.atomic():
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
    from daemon import tuning

    config = _load_config_or_exit(Path(args.config) if args.config else None)
    return tuning.main(args, load_records(args, config), config)


def cmd_history(args: argparse.Namespace) -> int:
    """An agent's daily score trend under any weights version."""
    from datetime import timedelta

    from daemon.store import Store
    from daemon.tuning import latest_time
    from scorers.history import counts_at, render

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
                with store.atomic():
                    store.put_history(counts)
            counts = store.history(args.agent)
            if not counts and not store.has_agent(args.agent):
                raise UsageError(f"agent {args.agent!r}: no records by this agent in {args.db}")
    points = [p for p in render(counts, config.weights_versions[version], config.scoring.min_decisions)
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

    from daemon import logescape, logsetup
    from daemon.app import Daemon, Overrides, file_clock
    from daemon.ingest import system_clock

    logescape.configure(logging.INFO, logescape.DAEMON_FORMAT)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per job run drowns the journal
    logsetup.install()  # a line repeated in a flood is written a few times, then counted (daemon/logsetup.py)
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
    clock = args.clock_warp or (file_clock(Path(args.clock_file)) if args.clock_file else system_clock)
    return Daemon(config, config_path=config_path, overrides=overrides, clock=clock).run()


def clock_warp(value: str) -> Clock:
    """``--clock-warp ORIGIN,SINCE,RATE`` (an RFC 3339 time, a Unix time, a positive factor) as a clock."""
    from daemon.app import warped_clock

    try:
        origin, since, rate = value.split(",")
        at, began, factor = parse_ts(origin), float(since), float(rate)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected ORIGIN,SINCE,RATE (RFC 3339, Unix time, factor): {exc}") from exc
    if not (math.isfinite(began) and math.isfinite(factor) and factor > 0):
        raise argparse.ArgumentTypeError(f"SINCE must be finite and RATE finite and positive: {value}")
    return warped_clock(at, began, factor)


def cmd_simulate(args: argparse.Namespace) -> int:
    """Generate a seeded demo/test state directory."""
    from daemon import simulate

    return simulate.main(args)


#: Help of the options several commands share.
CONFIG_HELP = "config.toml (default: built-in defaults)"
CHECKS_HELP = "link-check results to add, JSON Lines (as `checks export` writes them)"
TIME_HELP = "RFC 3339, 'now', or a date YYYY-MM-DD (midnight UTC)"


def _add_source(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--state", metavar="DIR", type=cliargs.existing_dir, help="read a state directory afresh")
    src.add_argument("--db", metavar="FILE", type=cliargs.existing_db, help="read an honestyd database")


def _add_scoring(p: argparse.ArgumentParser) -> None:
    _add_source(p)
    p.add_argument("--at", required=True, type=cliargs.timestamp, metavar="TIME", help=f"evaluation time: {TIME_HELP}")
    p.add_argument("--window", type=cliargs.duration,
                   help="24h, 7d, 30d or any duration (default: the first configured window)")
    p.add_argument("--config", metavar="FILE", type=cliargs.readable_file, help=CONFIG_HELP)
    p.add_argument("--checks", metavar="FILE", type=cliargs.readable_file, help=CHECKS_HELP)
    p.add_argument("--verify-paths", action="store_true", help="check every path citation at --at")
    p.add_argument("--weights", metavar="VERSION", help="score every agent with this weights version")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def build_parser() -> argparse.ArgumentParser:
    """The ``honestyd`` argument parser with every subcommand."""
    parser = cliargs.Parser(prog="honestyd", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            epilog="`honestyd COMMAND -h` describes a command. A mistake in the arguments exits with"
                                   " status 2, Ctrl-C with 130, a closed output pipe with 141.")
    parser.add_argument("--version", action="version", version=f"honestyd {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="what to do (`honestyd COMMAND -h` for its options)")

    p = sub.add_parser("check-config", help="validate a config file and print the effective config")
    p.add_argument("file", type=cliargs.readable_file, help="the config.toml to check")
    p.set_defaults(func=cmd_check_config)

    p = sub.add_parser("score", help="score every agent at a given time")
    _add_scoring(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("audit", help="the decisions and arithmetic behind one agent's score")
    p.add_argument("agent", help="the agent's name, as `score` lists it")
    _add_scoring(p)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("ingest", help="one-shot catch-up of a state directory into a database")
    p.add_argument("--state", required=True, metavar="DIR", type=cliargs.existing_dir, help="the state directory")
    p.add_argument("--db", required=True, metavar="FILE", type=cliargs.database,
                   help="the database (created if missing; its directory must exist)")
    p.add_argument("--config", metavar="FILE", type=cliargs.readable_file, help=CONFIG_HELP)
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("rejects", help="list refused lines and files")
    p.add_argument("--db", required=True, metavar="FILE", type=cliargs.existing_db, help="the database to read")
    p.set_defaults(func=cmd_rejects)

    p = sub.add_parser("export", help="export stored records as JSON Lines")
    p.add_argument("what", choices=["decisions"], help="what to export: decisions")
    p.add_argument("--db", required=True, metavar="FILE", type=cliargs.existing_db, help="the database to read")
    p.add_argument("--config", metavar="FILE", type=cliargs.readable_file,
                   help=f"{CONFIG_HELP}: which kinds are decisions")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("verify", help="check cited sources now and store the results")
    p.add_argument("--state", required=True, metavar="DIR", type=cliargs.existing_dir,
                   help="the state directory (ingested first; path citations are checked in it)")
    p.add_argument("--db", required=True, metavar="FILE", type=cliargs.database,
                   help="the database (created if missing; its directory must exist)")
    p.add_argument("--config", metavar="FILE", type=cliargs.readable_file, help=CONFIG_HELP)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="check every cited target")
    which.add_argument("--sample", type=cliargs.day, metavar="DATE", help="the daily sample of DATE (default: today)")
    # Test hook: verify as of a fixed time.
    p.add_argument("--at", type=cliargs.timestamp, metavar="TIME", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_verify)

    from daemon.tuning import FLOOR

    p = sub.add_parser("tune", help="fit weights to reviewer labels (constrained least squares)")
    _add_source(p)
    p.add_argument("--agent", help="tune this agent's own contract")
    p.add_argument("--min-labels", dest="min_labels", type=cliargs.positive_int, default=FLOOR, metavar="N",
                   help=f"labelled decisions needed for a proposal (default {FLOOR}; --apply below {FLOOR} needs"
                        " --force)")
    p.add_argument("--config", metavar="FILE", type=cliargs.readable_file,
                   help=f"{CONFIG_HELP}; --apply writes to the weights file it names")
    p.add_argument("--checks", metavar="FILE", type=cliargs.readable_file, help=CHECKS_HELP)
    p.add_argument("--at", type=cliargs.timestamp, metavar="TIME",
                   help=f"evaluation time: {TIME_HELP} (default: the newest record)")
    p.add_argument("--apply", metavar="VERSION", help="write the proposed weights as this new version")
    p.add_argument("--force", action="store_true",
                   help=f"with --apply: apply below {FLOOR} labels, or weights no better held out than those in force")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("history", help="an agent's daily score trend under any weights version")
    p.add_argument("agent", help="the agent's name")
    _add_source(p)
    p.add_argument("--weights", metavar="VERSION", help="render under this weights version (default: the agent's)")
    p.add_argument("--window", type=cliargs.duration, help="which configured window's trend (default: the first)")
    p.add_argument("--days", type=cliargs.positive_int, default=14, metavar="N",
                   help="days to compute with --state or --backfill (default 14)")
    p.add_argument("--backfill", action="store_true", help="with --db: compute the days from the records and store")
    p.add_argument("--at", type=cliargs.timestamp, metavar="TIME",
                   help=f"last day: {TIME_HELP} (default: the newest record)")
    p.add_argument("--config", metavar="FILE", type=cliargs.readable_file, help=CONFIG_HELP)
    p.add_argument("--checks", metavar="FILE", type=cliargs.readable_file, help=CHECKS_HELP)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("run", help="run the daemon: watch, ingest, score, verify, serve")
    p.add_argument("--config", metavar="FILE", type=cliargs.readable_file,
                   help=f"{CONFIG_HELP}; SIGHUP reads it again")
    p.add_argument("--state", metavar="DIR", type=cliargs.existing_dir, help="state root (overrides [state] root)")
    p.add_argument("--db", metavar="FILE", type=cliargs.database,
                   help="database (overrides [store] path; created if missing, its directory must exist)")
    p.add_argument("--listen", metavar="HOST:PORT", type=cliargs.listen,
                   help="HTTP address (overrides [daemon] listen)")
    # Test hook: read "now" from a file, so tests move time without sleeping.
    p.add_argument("--clock-file", metavar="FILE", help=argparse.SUPPRESS)
    # Benchmark hook: ORIGIN,SINCE,RATE, a clock RATE times fast that read ORIGIN at the Unix time SINCE.
    p.add_argument("--clock-warp", metavar="ORIGIN,SINCE,RATE", type=clock_warp, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("store", help="check a database, or rebuild a damaged one")
    store_sub = p.add_subparsers(dest="store_command", required=True, metavar="check|rebuild",
                                 help="check a database's integrity, or rebuild a damaged one")
    q = store_sub.add_parser("check", help="SQLite's integrity check: ok, or what is wrong (exit 3)")
    q.add_argument("--db", required=True, metavar="FILE", help="the database to check (opened read-only)")
    q.set_defaults(func=cmd_store_check)
    q = store_sub.add_parser("rebuild", help="move a damaged database aside; re-ingest, keep what it still holds")
    q.add_argument("--db", required=True, metavar="FILE",
                   help="the damaged database (moved aside as FILE.damaged-TIME; a fresh one takes its place)")
    q.add_argument("--state", required=True, metavar="DIR", help="the state directory to ingest again")
    q.add_argument("--config", metavar="FILE", type=cliargs.readable_file, help=CONFIG_HELP)
    q.set_defaults(func=cmd_store_rebuild)

    p = sub.add_parser("checks", help="move check results in and out as JSON Lines")
    checks_sub = p.add_subparsers(dest="checks_command", required=True, metavar="export|import",
                                  help="export the stored checks, or import a file of them")
    q = checks_sub.add_parser("export", help="print every stored check")
    q.add_argument("--db", required=True, metavar="FILE", type=cliargs.existing_db, help="the database to read")
    q.set_defaults(func=cmd_checks_export)
    q = checks_sub.add_parser("import", help="append checks from a file")
    q.add_argument("--db", required=True, metavar="FILE", type=cliargs.database,
                   help="the database (created if missing; its directory must exist)")
    q.add_argument("file", type=cliargs.readable_file, help="check results, JSON Lines (a pipe works: /dev/stdin)")
    q.set_defaults(func=cmd_checks_import)

    from daemon import demo, simulate

    p = sub.add_parser("demo", help="a demo state, the daemon on it, and live agents (one slipping)")
    demo.add_arguments(p)
    p.set_defaults(func=demo.main)

    p = sub.add_parser("simulate", help="generate a seeded state directory with agents following policies")
    simulate.add_arguments(p)
    p.set_defaults(func=cmd_simulate)
    return cliargs.finish(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``honestyd`` console script: exit status 2 for a mistake, 130 for Ctrl-C."""
    from daemon import logescape

    logescape.configure()  # every command: text from the state reaches stderr escaped (`run` logs more)
    return cliargs.run(build_parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
