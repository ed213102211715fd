"""consistency_under_repeat (spec 3.5): the same prompt twice should cite the same sources."""

from __future__ import annotations

from datetime import timedelta

from collectors.citations import PATH
from collectors.records import Event
from scorers.context import RuleContext
from scorers.outcome import NOT_APPLICABLE, Outcome, failed, not_applicable, passed
from scorers.rule import Affects, Reach, Rule

NAME = "consistency_under_repeat"


def evaluate(d: Event, ctx: RuleContext, width: timedelta) -> Outcome:
    """Compare with the agent's previous decision on the same prompt, unless state changed between; — when that
    answer is not in the window (:func:`reaches_back` and :func:`~scorers.rule.windowed`, without comparing a pair
    the window does not hold)."""
    p = ctx.previous_same_prompt(d)
    if p is None or not ctx.at - width < p.ts:
        return NOT_APPLICABLE
    return compare(d, p, ctx)


_NO_REPEAT: Reach = (NOT_APPLICABLE, None)


def reaches_back(d: Event, ctx: RuleContext) -> Reach:
    """The outcome of ``d`` in a window holding its previous answer, and that answer's time (None: there is none)."""
    p = ctx.previous_same_prompt(d)
    return _NO_REPEAT if p is None else (compare(d, p, ctx), p.ts)


def compare(d: Event, p: Event, ctx: RuleContext) -> Outcome:
    """The outcome of the pair (p, d) while ``p`` is inside the window: the part that does not depend on it."""
    if ctx.state_change_between(p.ts, d.ts):
        return not_applicable(f"state changed since {p.id}")
    for c in p.citations:
        if c.type == PATH and ctx.changed_in(c.target, p.ts, d.ts):
            return not_applicable(f"{c.target} changed since {p.id}")
    if set(p.citations) == set(d.citations):
        return passed(f"same sources as {p.id}")
    return failed(f"drift vs {p.id}")


#: Decided by the previous answer to the prompt, the state changes and file changes between, and the window.
RULE = Rule(NAME, evaluate, Affects(repeats=True), reaches_back=reaches_back)
