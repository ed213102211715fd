"""Command-line interface: argument parsing only; the work happens in the modules it calls."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.batch import scan_state
from collectors.checks import load_checks
from collectors.records import Event
from collectors.rfc3339 import TimestampError, format_ts, parse_ts
from daemon import __version__
from daemon.config import Config, ConfigError, load_config, render_config
from scorers.context import Context, Records
from scorers.score import evaluate_window, to_json
from scorers.source_verifiability import with_path_checks

if TYPE_CHECKING:
    from daemon.ingest import Clock
    from daemon.verify.runner import VerifySummary


def _timestamp(value: str) -> datetime:
    try:
        return parse_ts(value)
    except TimestampError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def _load_config_or_exit(path: Path | None) -> Config:
    try:
        return load_config(path)
    except ConfigError as exc:
        for error in exc.errors:
            print(f"config error: {error}", file=sys.stderr)
        raise SystemExit(2) from exc


def load_records(args: argparse.Namespace, config: Config) -> Records:
    """Records from ``--state DIR`` (parsed afresh) or ``--db FILE`` (the store), plus ``--checks``."""
    if args.state is not None:
        scan = scan_state(Path(args.state), config)
        records = Records(scan.events, scan.labels, scan.files, ())
    else:
        from daemon.store import Store

        with Store.open(Path(args.db), readonly=True) as store:
            records = store.load_records()
    if args.checks is not None:
        checks, rejects = load_checks(Path(args.checks).read_bytes(), str(args.checks))
        for r in rejects:
            print(f"{r.path}:{r.line}: rejected check ({r.reason})", file=sys.stderr)
        records = Records(records.events, records.labels, records.files, [*records.checks, *checks])
    return records


def cmd_check_config(args: argparse.Namespace) -> int:
    """Print the effective configuration, or every error (exit 2)."""
    config = _load_config_or_exit(Path(args.file))
    sys.stdout.write(render_config(config))
    return 0


def _scoring_context(args: argparse.Namespace) -> Context:
    config = _load_config_or_exit(Path(args.config) if args.config else None)
    if args.weights is not None:
        if args.weights not in config.weights_versions:
            known = ", ".join(sorted(config.weights_versions))
            print(f"unknown weights version {args.weights!r} (known: {known})", file=sys.stderr)
            raise SystemExit(2)
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
    with Store.open(Path(args.db)) as store:
        stats = Ingester(store, Path(args.state), config).scan()
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
    from daemon.verify.github import GitHubChecker, load_token
    from daemon.verify.http import UrlChecker
    from daemon.verify.runner import checkers, select_targets, verify

    config = _load_config_or_exit(Path(args.config) if args.config else None)
    root = Path(args.state)
    fixed = args.at

    def clock() -> datetime:
        return fixed if fixed is not None else system_clock()

    now = clock()
    with Store.open(Path(args.db)) as store:
        Ingester(store, root, config, clock).scan()
        sample_day = None if args.all else (args.sample or now.date())
        todo, cached = select_targets(store, config, now, sample_day)

        async def run_checks() -> VerifySummary:
            token = load_token(config.github)
            async with UrlChecker(config.verify) as urls, GitHubChecker(config.verify, config.github, token) as api:
                by_type = checkers(root, store.file_entries(), now, config.github_repo, urls, api)
                return await verify(todo, by_type, clock)

        summary = asyncio.run(run_checks())
        with store.atomic():
            store.add_checks(summary.results)
    for kind, _ in cached:
        summary.cached[kind] += 1
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
        print(f"unknown weights version {version!r}", file=sys.stderr)
        return 2
    counts = []
    if args.state is not None or args.backfill:
        records = load_records(args, config)
        end = args.at or latest_time(records)
        if end is None:
            print("no records", file=sys.stderr)
            return 1
        for n in range(args.days - 1, -1, -1):
            counts += counts_at(records, end.date() - timedelta(days=n), config, [args.agent])
    if args.db is not None:
        with Store.open(Path(args.db)) as store:
            if counts:
                with store.atomic():
                    store.put_history(counts)
            counts = store.history(args.agent)
    window = args.window or config.scoring.windows[0][0]
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

    from daemon import logsetup
    from daemon.app import Daemon, Overrides, file_clock
    from daemon.ingest import system_clock

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per job run drowns the journal
    logsetup.install()  # a line repeated in a flood is written a few times, then counted (daemon/logsetup.py)
    config_path = Path(args.config) if args.config else None
    config = _load_config_or_exit(config_path)
    overrides = Overrides(
        state=Path(args.state) if args.state else None,
        db=Path(args.db) if args.db else None,
        listen=args.listen,
    )
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


def _date(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {value!r}") from exc


def cmd_simulate(args: argparse.Namespace) -> int:
    """Generate a seeded demo/test state directory."""
    from daemon import simulate

    return simulate.main(args)


def _add_source(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--state", metavar="DIR", help="read a state directory afresh")
    src.add_argument("--db", metavar="FILE", help="read an honestyd database")


def _add_scoring(p: argparse.ArgumentParser) -> None:
    _add_source(p)
    p.add_argument("--at", required=True, type=_timestamp, metavar="TIME", help="evaluation time (RFC 3339)")
    p.add_argument("--window", help="24h, 7d, 30d or any duration (default: the first configured window)")
    p.add_argument("--config", metavar="FILE", help="config.toml (default: built-in defaults)")
    p.add_argument("--checks", metavar="FILE", help="link-check results, JSON Lines")
    p.add_argument("--verify-paths", action="store_true", help="check every path citation at --at")
    p.add_argument("--weights", metavar="VERSION", help="score every agent with this weights version")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def build_parser() -> argparse.ArgumentParser:
    """The ``honestyd`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="honestyd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"honestyd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("check-config", help="validate a config file and print the effective config")
    p.add_argument("file")
    p.set_defaults(func=cmd_check_config)

    p = sub.add_parser("score", help="score every agent at a given time")
    _add_scoring(p)
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("audit", help="the decisions and arithmetic behind one agent's score")
    p.add_argument("agent")
    _add_scoring(p)
    p.set_defaults(func=cmd_audit)

    p = sub.add_parser("ingest", help="one-shot catch-up of a state directory into a database")
    p.add_argument("--state", required=True, metavar="DIR")
    p.add_argument("--db", required=True, metavar="FILE")
    p.add_argument("--config", metavar="FILE")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("rejects", help="list refused lines and files")
    p.add_argument("--db", required=True, metavar="FILE")
    p.set_defaults(func=cmd_rejects)

    p = sub.add_parser("export", help="export stored records as JSON Lines")
    p.add_argument("what", choices=["decisions"])
    p.add_argument("--db", required=True, metavar="FILE")
    p.add_argument("--config", metavar="FILE")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("verify", help="check cited sources now and store the results")
    p.add_argument("--state", required=True, metavar="DIR")
    p.add_argument("--db", required=True, metavar="FILE")
    p.add_argument("--config", metavar="FILE")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="check every cited target")
    which.add_argument("--sample", type=_date, metavar="DATE", help="the daily sample of DATE (default: today)")
    p.add_argument("--at", type=_timestamp, metavar="TIME", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("tune", help="fit weights to reviewer labels (constrained least squares)")
    _add_source(p)
    p.add_argument("--agent", help="tune this agent's own contract")
    p.add_argument("--min-labels", dest="min_labels", type=int, default=100)
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--checks", metavar="FILE", help="link-check results, JSON Lines")
    p.add_argument("--at", type=_timestamp, metavar="TIME", help="evaluation time (default: the newest record)")
    p.add_argument("--apply", metavar="VERSION", help="write the proposed weights as this new version")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("history", help="an agent's daily score trend under any weights version")
    p.add_argument("agent")
    _add_source(p)
    p.add_argument("--weights", metavar="VERSION")
    p.add_argument("--window", help="which window's trend (default: the first configured)")
    p.add_argument("--days", type=int, default=14, help="days to compute with --state or --backfill")
    p.add_argument("--backfill", action="store_true", help="with --db: compute the days from the records and store")
    p.add_argument("--at", type=_timestamp, metavar="TIME", help="last day (default: the newest record)")
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--checks", metavar="FILE", help="link-check results, JSON Lines")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("run", help="run the daemon: watch, ingest, score, verify, serve")
    p.add_argument("--config", metavar="FILE")
    p.add_argument("--state", metavar="DIR", help="state root (overrides [state] root)")
    p.add_argument("--db", metavar="FILE", help="database (overrides [store] path)")
    p.add_argument("--listen", metavar="HOST:PORT", help="HTTP address (overrides [daemon] listen)")
    # Test hook: read "now" from a file, so tests move time without sleeping.
    p.add_argument("--clock-file", metavar="FILE", help=argparse.SUPPRESS)
    # Benchmark hook: ORIGIN,SINCE,RATE, a clock RATE times fast that read ORIGIN at the Unix time SINCE.
    p.add_argument("--clock-warp", metavar="ORIGIN,SINCE,RATE", type=clock_warp, help=argparse.SUPPRESS)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("checks", help="move check results in and out as JSON Lines")
    checks_sub = p.add_subparsers(dest="checks_command", required=True)
    q = checks_sub.add_parser("export", help="print every stored check")
    q.add_argument("--db", required=True, metavar="FILE")
    q.set_defaults(func=cmd_checks_export)
    q = checks_sub.add_parser("import", help="append checks from a file")
    q.add_argument("--db", required=True, metavar="FILE")
    q.add_argument("file")
    q.set_defaults(func=cmd_checks_import)

    from daemon import demo, simulate

    p = sub.add_parser("demo", help="a demo state, the daemon on it, and live agents (one slipping)")
    demo.add_arguments(p)
    p.set_defaults(func=demo.main)

    p = sub.add_parser("simulate", help="generate a seeded state directory with agents following policies")
    simulate.add_arguments(p)
    p.set_defaults(func=cmd_simulate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``honestyd`` console script."""
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
