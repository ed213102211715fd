"""The ``honestyd simulate`` sub-command: the one-line summary it prints (its options are in daemon/cli.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from daemon.simulate.draws import ts_text
from daemon.simulate.writer import simulate


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
