"""source_verifiability (spec 3.3): of the cited targets with a recent conclusive check, how many resolve."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from collectors.citations import PATH, path_never_exists
from collectors.links import LinkMap
from collectors.records import CheckResult, Event
from scorers.context import Records, RuleContext
from scorers.outcome import Outcome, not_applicable

NAME = "source_verifiability"


def evaluate(d: Event, ctx: RuleContext, width: timedelta) -> Outcome:
    """resolved/checked over the decision's citations; — when none of them has a usable check."""
    resolved = checked = 0
    failures: list[str] = []
    for c in d.citations:
        result = ctx.checks.get((c.type, c.target))
        if result is None:
            continue
        checked += 1
        if result.ok:
            resolved += 1
        else:
            status = f" ({result.status})" if result.status is not None else ""
            failures.append(("ghost path " if c.type == "path" else f"dead {c.type} ") + c.target + status)
    if not checked:
        return not_applicable("nothing checked")
    why = "; ".join(failures) if failures else "all resolve"
    return Outcome(f"{resolved}/{checked}", why, resolved, checked)


def with_path_checks(records: Records, at: datetime) -> Records:
    """``--verify-paths``: check every path citation against the file index at ``at``.

    That check replaces any recorded result for the path (spec 3.3).
    """
    targets = sorted({c.target for e in records.events if e.ts <= at for c in e.citations if c.type == PATH})
    checks = [c for c in records.checks if c.type != PATH]
    links = LinkMap(records.links)
    for target in targets:
        # A target stays lexical (checks are stored by it); its file is the one it names through the symlinks.
        canonical = None if path_never_exists(target) else links.resolve(target)
        entry = None if canonical is None else records.files.get(canonical)
        ok = entry is not None and entry.exists(at)
        checks.append(CheckResult(target, PATH, at, ok, seq=len(checks)))
    return replace(records, checks=checks)
