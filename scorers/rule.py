"""What a component rule is: its evaluation, and what the live model must know to keep its outcomes.

A rule is a pure function of (decision, :class:`~scorers.context.RuleContext`, window width) → Outcome; the pure
evaluation (scorers/score.py) and the live model (scorers/live/) call the same one. Beside it each rule declares, as
data, what can change an outcome it gave (:class:`Affects`, in the terms of the context's lookups: the model indexes
decisions by it once and re-runs the rule when such a change arrives), when a pending outcome is decided by time
alone (``valid_until``), and how it depends on the window (``reaches_back``). Nothing else about a rule is written
anywhere else: a new component is a module exporting a :class:`Rule`, added to ``scorers.rules.RULES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from collectors.records import Event
from scorers.context import RuleContext
from scorers.outcome import NOT_APPLICABLE, Outcome
from scorers.spec import Scoring

#: The rule itself: (decision, context, window width) → outcome.
Evaluate = Callable[[Event, RuleContext, timedelta], Outcome]
#: Which decisions take part in a dependency, asked once when a decision is indexed (from its fields and the config).
Selects = Callable[[Event, RuleContext], bool]


@dataclass(frozen=True, slots=True)
class Horizon:
    """Later decisions of the same agent that the rule reads (``RuleContext.agent_decisions_between``): those within
    ``length`` of a start (the decision itself, or a label on it), for which ``matches(later, decision)`` holds, can
    change the decision's outcome by coming or going."""

    length: Callable[[Scoring], timedelta]
    matches: Callable[[Event, Event], bool]


@dataclass(frozen=True, slots=True)
class Affects:
    """What can change a rule's outcome for a decision ``d``; each field names one of the context's lookups."""

    #: A label on ``d`` (``current_down_labels``).
    labels: bool = False
    #: The current check of a target ``d`` cites (``checks``); a check ageing out (``check_max_age``) is one.
    checks: bool = False
    #: The file index at a path ``d`` names (spec 3.4's P: ``exists``), under any name.
    paths: bool = False
    #: Decisions of ``d``'s agent after ``d`` (``agent_decisions_between``), for the decisions ``awaits`` selects.
    follow_ups: Horizon | None = None
    awaits: Selects | None = None
    #: The only kinds of decision ``awaits`` can select (None: any): the others are not made into an Event to ask.
    awaits_kinds: frozenset[str] | None = None
    #: Decisions of ``d``'s agent after a label on ``d`` (from the label's time), once ``d`` has one
    #: (``thread_decisions_between``).
    replies: Horizon | None = None
    #: ``d``'s agent's previous answer to the same prompt (``previous_same_prompt``) and what lies between them: the
    #: coming and going of answers to that prompt, state-change records (``state_change_between``), and changes to the
    #: files the previous answer names (``changed_in``).
    repeats: bool = False
    #: Files created under a configured signal's glob within its ``within`` before ``d`` (``created_matching``), for
    #: the decisions ``signals`` selects.
    signals: Selects | None = None


#: The outcome in a window that holds everything it needs, and the time of the earlier record it compares with
#: (None: none); see :attr:`Rule.reaches_back`.
Reach = tuple[Outcome, datetime | None]


def _never(d: Event, outcome: Outcome, ctx: RuleContext) -> datetime | None:
    return None


@dataclass(frozen=True, slots=True)
class Rule:
    """One component of spec section 3: its name, its evaluation and its invalidation (see the module docstring).

    The functions are module-level ones (the daemon's model cache pickles them by name)."""

    name: str
    evaluate: Evaluate
    affected_by: Affects = Affects()
    #: For a pending outcome: when time alone can decide it (a follow-up, grace or reply window closing).
    valid_until: Callable[[Event, Outcome, RuleContext], datetime | None] = _never
    #: None when the outcome does not depend on the window's width. Else the outcome's only dependence on it: with
    #: ``(o, t) = reaches_back(d, ctx)``, ``evaluate(d, ctx, W)`` is ``o`` when ``t`` is None or ``T − W < t``, and
    #: a bare — otherwise (spec 3.5: both answers of a repeat in the window).
    reaches_back: Callable[[Event, RuleContext], Reach] | None = None
    #: Outcomes reported beside the score as false gaps (spec 3.4): each says why, so never asked of the bare —
    #: (:data:`~scorers.outcome.NOT_APPLICABLE`).
    false_gap: Callable[[Outcome], bool] | None = None

    def __call__(self, d: Event, ctx: RuleContext, width: timedelta) -> Outcome:
        """The rule's outcome for ``d`` in a window of ``width`` ending at ``ctx.at``."""
        return self.evaluate(d, ctx, width)


def windowed(reach: Reach, at: datetime, width: timedelta) -> Outcome:
    """The outcome of a rule with ``reaches_back`` in the window ``(at − width, at]``, from its reach."""
    outcome, t = reach
    return outcome if t is None or at - width < t else NOT_APPLICABLE
