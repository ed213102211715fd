"""source_verifiability (spec 3.3): of the cited targets with a recent conclusive check, how many resolve."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from collectors.citations import PATH
from collectors.records import CheckResult, Event
from scorers.context import Records, RuleContext
from scorers.lookups import FileIndex
from scorers.outcome import Outcome, not_applicable
from scorers.rule import Affects, Rule

NAME = "source_verifiability"
NOTHING_CHECKED = not_applicable("nothing checked")


def evaluate(d: Event, ctx: RuleContext, width: timedelta) -> Outcome:
    """resolved/checked over the decision's citations; — when none of them has a usable check."""
    if not d.citations:
        return NOTHING_CHECKED
    checks = ctx.checks
    resolved = checked = 0
    failures: list[str] = []
    for c in d.citations:
        result = checks.get((c.type, c.target))
        if result is None:
            continue
        checked += 1
        if result.ok:
            resolved += 1
        else:
            status = f" ({result.status})" if result.status is not None else ""
            failures.append(("ghost path " if c.type == "path" else f"dead {c.type} ") + c.target + status)
    if not checked:
        return NOTHING_CHECKED
    why = "; ".join(failures) if failures else "all resolve"
    return Outcome(f"{resolved}/{checked}", why, resolved, checked)


#: Decided by the current checks of what the decision cites (they age out after ``check_max_age``).
RULE = Rule(NAME, evaluate, Affects(checks=True))


def with_path_checks(records: Records, at: datetime) -> Records:
    """``--verify-paths``: check every path citation against the file index at ``at``.

    That check replaces any recorded result for the path (spec 3.3).
    """
    targets = sorted({c.target for e in records.events if e.ts <= at for c in e.citations if c.type == PATH})
    checks = [c for c in records.checks if c.type != PATH]
    # A target stays lexical (checks are stored by it); its file is the one it names through the symlinks.
    files = FileIndex.of(records.files, records.links)
    for target in targets:
        checks.append(CheckResult(target, PATH, at, files.exists(target, at, at), seq=len(checks)))
    return replace(records, checks=checks)
