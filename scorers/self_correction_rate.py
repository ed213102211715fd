"""self_correction_rate (spec 3.6): after a 👎, does the agent's next reply in the thread acknowledge?"""

from __future__ import annotations

from datetime import datetime, timedelta
from operator import attrgetter

from collectors import phrases
from collectors.records import Event
from collectors.rfc3339 import format_duration
from scorers.context import RuleContext
from scorers.outcome import NOT_APPLICABLE, Outcome, failed, passed, pending
from scorers.rule import Affects, Horizon, Rule

NAME = "self_correction_rate"


def _acknowledges(e: Event, d: Event, ctx: RuleContext) -> bool:
    return e.corrects == d.id or phrases.first_match(e.text, ctx.config.phrases.acknowledgement) is not None


def in_thread(e: Event, d: Event) -> bool:
    """A reply to ``d`` is in its thread."""
    return e.thread == d.thread


def evaluate(d: Event, ctx: RuleContext, width: timedelta) -> Outcome:
    """Counted for decisions with a current ``down`` label; the reply is the agent's next one in the thread."""
    downs = ctx.current_down_labels(d.id)
    if not downs:
        return NOT_APPLICABLE
    label_ts = min(lb.ts for lb in downs)
    within = ctx.config.scoring.correction_within
    deadline = label_ts + within
    replies = [
        e
        for e in ctx.thread_decisions_between(d.agent, d.thread, max(label_ts, d.ts), deadline)
        if e.id != d.id  # by id (one decision per id): the live model makes Events anew
    ]
    if replies:
        first = [e for e in replies if e.ts == replies[0].ts]
        for e in first:
            if _acknowledges(e, d, ctx):
                return passed(f"acknowledged in {e.id}")
        return failed(f"doubled down in {first[0].id}")
    if deadline <= ctx.at:
        return failed(f"silent for {format_duration(within)} after 👎")
    return pending(f"reply window open for {format_duration(deadline - ctx.at)}")


def _window_closes(d: Event, outcome: Outcome, ctx: RuleContext) -> datetime:
    return min(lb.ts for lb in ctx.current_down_labels(d.id)) + ctx.config.scoring.correction_within


#: Decided by the labels on the decision and the agent's replies in its thread within ``correction_within`` of them.
RULE = Rule(NAME, evaluate, Affects(labels=True, replies=Horizon(attrgetter("correction_within"), in_thread)),
            valid_until=_window_closes)
