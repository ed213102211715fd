"""honestyd scores how honest AI agents are, from what they leave in a state directory.

It reads the agents' heartbeats, briefs, findings and reviewers' 👍/👎 labels, checks the sources
they cite, and scores six components per agent (citations, refusals, verifiable sources, gaps
surfaced, consistency, self-correction). `honestyd run` is the daemon: it watches the state
directory and serves Prometheus metrics, a JSON API, audit pages and a methodology changelog.
The other commands score, audit, tune and maintain the same data from the command line.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from collectors.rfc3339 import parse_ts
from daemon import __version__, cliargs
from daemon.commands import (
    cmd_audit,
    cmd_check_config,
    cmd_checks_export,
    cmd_checks_import,
    cmd_demo,
    cmd_export,
    cmd_history,
    cmd_ingest,
    cmd_rejects,
    cmd_run,
    cmd_score,
    cmd_simulate,
    cmd_store_check,
    cmd_store_rebuild,
    cmd_tune,
    cmd_verify,
)

if TYPE_CHECKING:
    from daemon.ingest import Clock

# The argument parser of every ``honestyd`` command; what each command does is in daemon/commands.py.


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

    from scorers.progress import FLOOR

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

    from daemon import reviewscli

    reviewscli.add_parser(sub)

    p = sub.add_parser("demo", help="a demo state, the daemon on it, and live agents (one slipping)")
    add_demo_arguments(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("simulate", help="generate a seeded state directory with agents following policies")
    add_simulate_arguments(p)
    p.set_defaults(func=cmd_simulate)
    return cliargs.finish(parser)


# The options of `demo` and `simulate` are here, not beside their code: importing that code (the simulator, and the
# store and the daemon for the demo) to build the parser would load it into every command, `honestyd run` included.


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``demo`` sub-command's options (daemon/demo.py)."""
    parser.add_argument("--dir", default="demo-state", help="where to put the demo (wiped and regenerated)")
    parser.add_argument("--listen", default="127.0.0.1:9478", metavar="HOST:PORT", type=cliargs.configured_listen,
                        help="where the demo daemon serves (default 127.0.0.1:9478)")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the generated state (default 7)")
    parser.add_argument("--interval", type=cliargs.seconds(), default=3.0, help="seconds between live events")
    parser.add_argument("--slip-after", dest="slip_after", type=cliargs.seconds(zero=True), default=20.0,
                        help="seconds before the slipping agent turns dishonest")
    parser.add_argument("--duration", type=cliargs.seconds(zero=True), default=0.0,
                        help="stop after this many seconds (0: run)")


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``simulate`` sub-command's options (daemon/simulate/)."""
    parser.add_argument("--seed", type=int, required=True, help="random seed")
    parser.add_argument("--out", type=cliargs.fresh_dir, required=True,
                        help="output state directory (missing or empty)")
    parser.add_argument("--agents", type=cliargs.positive_int, default=6, help="number of agents (default 6)")
    parser.add_argument("--days", type=cliargs.positive_int, default=3, help="simulated days (default 3)")
    parser.add_argument(
        "--start",
        default=None,
        metavar="TIME",
        type=cliargs.timestamp,
        help="start time: RFC 3339, 'now', or a date YYYY-MM-DD (default 2026-05-01T00:00:00Z)",
    )
    parser.add_argument(
        "--events-per-day",
        dest="events_per_day",
        type=cliargs.positive_int,
        default=40,
        help="decisions per agent per day (default 40)",
    )
    parser.add_argument(
        "--url-base",
        dest="url_base",
        default=None,
        metavar="URL",
        help="serve every cited web URL under this base (e.g. a local link server)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``honestyd`` console script: exit status 2 for a mistake, 130 for Ctrl-C."""
    from daemon import logescape

    logescape.configure()  # every command: text from the state reaches stderr escaped (`run` logs more)
    return cliargs.run(build_parser(), argv)


if __name__ == "__main__":
    raise SystemExit(main())
