"""citation_rate (spec 3.1): every decision counts; ✓ iff it has at least one citation."""

from __future__ import annotations

from datetime import timedelta

from collectors.records import Event
from scorers.context import RuleContext
from scorers.outcome import Outcome, failed, passed
from scorers.rule import Rule

NAME = "citation_rate"


def evaluate(d: Event, ctx: RuleContext, width: timedelta) -> Outcome:
    """✓ with the first citation named, or ✗ "no citation"."""
    if d.citations:
        first = d.citations[0]
        more = f" (+{len(d.citations) - 1})" if len(d.citations) > 1 else ""
        return passed(f"{first.type} {first.target}{more}")
    return failed("no citation")


#: Nothing but the decision itself decides it.
RULE = Rule(NAME, evaluate)
