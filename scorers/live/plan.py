"""What the live model does for a set of rules, worked out once from the rules' declarations and the config.

Each rule's (passed, counted, pending) has three columns of a decision's counts, in the rules' order, and the
false gaps one more; each dependency a rule declares (:class:`~scorers.rule.Affects`) becomes an index the model
keeps and a kind of change it follows. The model reads only this plan, never a rule's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from collectors.records import Event
from scorers.context import RuleContext
from scorers.outcome import Outcome
from scorers.rule import Affects, Evaluate, Reach, Rule, Selects
from scorers.spec import ScoringConfig

ValidUntil = Callable[[Event, Outcome, RuleContext], datetime | None]
FalseGap = Callable[[Outcome], bool] | None
Matches = Callable[[Event, Event], bool]


@dataclass(frozen=True, slots=True)
class Plan:
    """The layout of a decision's counts and the dependencies to follow, for one set of rules."""

    names: tuple[str, ...]
    #: How many counts a decision has: three per rule, then its false gaps (in column ``false_gaps``).
    columns: int
    false_gaps: int
    zero: tuple[int, ...]
    #: The rules whose outcome does not depend on the window: (evaluate, first column, valid_until, false_gap).
    plain: tuple[tuple[Evaluate, int, ValidUntil, FalseGap], ...]
    #: The rules whose outcome needs an earlier record inside the window: (reaches_back, column, valid_until, gap).
    anchored: tuple[tuple[Callable[[Event, RuleContext], Reach], int, ValidUntil, FalseGap], ...]
    labels: bool
    checks: bool
    paths: bool
    repeats: bool
    #: Per rule reading later decisions from the decision itself: (horizon, matches, which decisions wait).
    follow_ups: tuple[tuple[timedelta, Matches, Selects | None], ...]
    #: The kinds of decision any of them can select (None: any; see :attr:`~scorers.rule.Affects.awaits_kinds`).
    awaited_kinds: frozenset[str] | None
    #: Per rule reading later decisions from a label on the decision: (horizon, matches).
    replies: tuple[tuple[timedelta, Matches], ...]
    longest_reply: timedelta
    #: Which decisions read the files created under a signal's glob, per rule; the globs and the longest ``within``.
    signals: tuple[Selects, ...]
    signal_globs: tuple[str, ...]
    signal_within: timedelta
    #: Decisions are filed by the paths they name: their own outcome, or the next answer's, reads those files.
    by_path: bool

    @classmethod
    def of(cls, rules: Mapping[str, Rule], config: ScoringConfig) -> Plan:
        """The plan for ``rules`` (by name, in column order) under ``config``."""
        ordered = list(rules.values())
        columns = {rule.name: 3 * i for i, rule in enumerate(ordered)}
        count = 3 * len(ordered) + 1
        deps = [rule.affected_by for rule in ordered]
        scoring = config.scoring
        replies = tuple((a.replies.length(scoring), a.replies.matches) for a in deps if a.replies is not None)
        return cls(
            names=tuple(columns),
            columns=count,
            false_gaps=count - 1,
            zero=(0,) * count,
            plain=tuple((r.evaluate, columns[r.name], r.valid_until, r.false_gap)
                        for r in ordered if r.reaches_back is None),
            anchored=tuple((r.reaches_back, columns[r.name], r.valid_until, r.false_gap)
                           for r in ordered if r.reaches_back is not None),
            labels=any(a.labels or a.replies is not None for a in deps),
            checks=any(a.checks for a in deps),
            paths=any(a.paths for a in deps),
            repeats=any(a.repeats for a in deps),
            follow_ups=tuple((a.follow_ups.length(scoring), a.follow_ups.matches, a.awaits)
                             for a in deps if a.follow_ups is not None),
            awaited_kinds=_awaited_kinds([a for a in deps if a.follow_ups is not None]),
            replies=replies,
            longest_reply=max((length for length, _ in replies), default=timedelta(0)),
            signals=tuple(a.signals for a in deps if a.signals is not None),
            signal_globs=tuple(s.glob for s in config.signals),
            signal_within=max((s.within for s in config.signals), default=timedelta(0)),
            by_path=any(a.paths or a.repeats for a in deps),
        )


def _awaited_kinds(deps: list[Affects]) -> frozenset[str] | None:
    """The union of the kinds the follow-ups' ``awaits`` can select (None: some can select any)."""
    kinds: frozenset[str] = frozenset()
    for a in deps:
        if a.awaits is None or a.awaits_kinds is None:
            return None
        kinds |= a.awaits_kinds
    return kinds
