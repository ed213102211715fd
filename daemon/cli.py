"""Command-line interface: argument parsing only; the work happens in the modules it calls."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from collectors.batch import scan_state
from collectors.checks import load_checks
from collectors.rfc3339 import TimestampError, parse_ts
from daemon import __version__
from daemon.config import Config, ConfigError, load_config, render_config
from scorers.context import Context, Records
from scorers.score import evaluate_window, to_json
from scorers.source_verifiability import with_path_checks


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

    for register in _EXTRA_COMMANDS:
        register(sub)
    return parser


_EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``honestyd`` console script."""
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
