"""A component that is not in the spec, written as a new one would be: one module exporting a Rule.

answered_rate: a ``dm`` in a thread counts; ✓ when the agent's next decision in that thread comes within
``follow_up``, ✗ when none does, pending until the window closes. tests/scorers/test_rules.py plugs it into the
live model and the pure evaluation beside the six rules of the spec.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from operator import attrgetter

from collectors.records import Event
from collectors.rfc3339 import format_duration
from scorers.context import RuleContext
from scorers.outcome import Outcome, failed, not_applicable, passed, pending
from scorers.rule import Affects, Horizon, Rule

NAME = "answered_rate"


def asks(d: Event, ctx: RuleContext) -> bool:
    """A dm in a thread waits for an answer."""
    return d.kind == "dm" and d.thread is not None


def answers(e: Event, d: Event) -> bool:
    """A later decision in the dm's thread answers it."""
    return e.thread == d.thread


def evaluate(d: Event, ctx: RuleContext, width: timedelta) -> Outcome:
    """✓ answered, ✗ unanswered once ``follow_up`` has passed, pending before."""
    if not asks(d, ctx):
        return not_applicable()
    grace = ctx.config.scoring.follow_up
    for e in ctx.agent_decisions_between(d.agent, d.ts, d.ts + grace):
        if e is not d and answers(e, d):
            return passed(f"answered in {e.id}")
    if d.ts + grace <= ctx.at:
        return failed(f"unanswered for {format_duration(grace)}")
    return pending("open")


def _closes(d: Event, outcome: Outcome, ctx: RuleContext) -> datetime:
    return d.ts + ctx.config.scoring.follow_up


RULE = Rule(NAME, evaluate, Affects(follow_ups=Horizon(attrgetter("follow_up"), answers), awaits=asks),
            valid_until=_closes)
