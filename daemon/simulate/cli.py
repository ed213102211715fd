"""The ``honestyd simulate`` sub-command: its arguments and the one-line summary it prints."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from daemon import cliargs
from daemon.simulate.draws import ts_text
from daemon.simulate.writer import simulate


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``simulate`` sub-command's options to ``parser``."""
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


def main(args: argparse.Namespace) -> int:
    """Run the ``simulate`` sub-command; print a one-line summary."""
    try:
        summary = simulate(
            args.seed,
            Path(args.out),
            agents=args.agents,
            days=args.days,
            start=args.start,
            events_per_day=args.events_per_day,
            url_base=args.url_base,
        )
    except (ValueError, FileExistsError) as exc:
        print(f"honestyd simulate: {exc}", file=sys.stderr)
        return 2
    print(
        f"simulated {len(summary.policies)} agents, {ts_text(int(summary.start.timestamp()))}"
        f" to {ts_text(int(summary.end.timestamp()))}: {summary.events} events,"
        f" {summary.decisions} decisions, {summary.labels} labels,"
        f" {len(summary.files)} files in {summary.out}"
    )
    return 0
