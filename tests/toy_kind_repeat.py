"""A second component that is not in the spec, whose outcome depends on the window: one module exporting a Rule.

kind_repeat: an answer to a prompt the agent answered before counts when both are in the window; ✓ when it is of
the same kind as the previous one, ✗ otherwise (so the live model keeps two window-dependent rules at once).
"""

from __future__ import annotations

from datetime import timedelta

from collectors.records import Event
from scorers.context import RuleContext
from scorers.outcome import Outcome, failed, not_applicable, passed
from scorers.rule import Affects, Reach, Rule, windowed

NAME = "kind_repeat"


def reaches_back(d: Event, ctx: RuleContext) -> Reach:
    """Compared with the previous answer to the prompt, which must be inside the window."""
    p = ctx.previous_same_prompt(d)
    if p is None:
        return not_applicable(), None
    return (passed(f"{d.kind} again") if p.kind == d.kind else failed(f"{p.kind} then {d.kind}")), p.ts


def evaluate(d: Event, ctx: RuleContext, width: timedelta) -> Outcome:
    """The outcome in the window ``width`` wide."""
    return windowed(reaches_back(d, ctx), ctx.at, width)


RULE = Rule(NAME, evaluate, Affects(repeats=True), reaches_back=reaches_back)
