"""What a change can alter: the decisions whose cached outcome the model re-runs the rules for.

Every kind of change is followed only as far as some rule declared it can matter (scorers/rule.py's ``Affects``,
worked into the plan): a decision arriving or going marks the decisions of its agent waiting for a follow-up it may
be, the labelled ones whose reply it may be, and the next answer to its prompt; a state change the answers after it;
a file-index change the decisions naming the path, the answers after them, and the signal claims it could answer;
a new current check the decisions citing its target; a change of the symlinks all of those.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from collectors.records import Event
from collectors.rfc3339 import from_us, to_us
from scorers.live.base import ModelState
from scorers.live.records import ts_of

if TYPE_CHECKING:
    from scorers.live.indexes import Agent


class Invalidation(ModelState):
    """Marks the decisions a change can concern; :meth:`LiveModel.evaluate` re-runs the rules for them."""

    def _touch(self, e: Event) -> None:
        self._dirty[id(e)] = e

    def _touch_next_answer(self, e: Event) -> None:
        nxt = self._next_same_prompt(e)
        if nxt is not None:
            self._dirty[id(nxt)] = nxt

    def _touch_neighbours(self, e: Event, a: Agent) -> None:
        """Decisions of e's agent whose outcome can depend on e (arriving or departing): those waiting for a
        follow-up it may be, the labelled ones in reach of a reply it may be, and the next answer to its prompt."""
        plan = self.plan
        for (length, matches, _), waiting in zip(plan.follow_ups, a.awaiting, strict=True):
            lo = bisect.bisect_left(waiting, e.ts - length, key=ts_of)
            hi = bisect.bisect_left(waiting, e.ts, key=ts_of)
            for d in waiting[lo:hi]:
                if matches(e, d):
                    self._touch(d)
        if plan.replies:
            # In microseconds: the label times are held so (scorers/live/labels.py), and this walks every labelled
            # decision of the agent (e.ts ≤ last label + longest reply, rearranged).
            times, since = self._label_columns.ts, to_us(e.ts - plan.longest_reply)
            for decision_id, slot in a.labelled.items():
                if since <= times[slot]:
                    last_label = from_us(times[slot])
                    labelled = self._winner.get(decision_id)
                    # labelled holds decisions' ids only (a winner that is a stub was never added, or was removed)
                    if isinstance(labelled, Event) and labelled.ts <= e.ts and any(
                            e.ts <= last_label + length and matches(e, labelled) for length, matches in plan.replies):
                        self._touch(labelled)
        if plan.repeats:
            self._touch_next_answer(e)

    def _touch_state_change(self, t: datetime) -> None:
        """A state change at ``t``: every answer to a prompt at or after ``t`` may now be exempt, or no longer."""
        if not self.plan.repeats or not self._prompted_times or self._prompted_times[-1] < t:
            return  # the live case: a state change after every prompted decision changes none (no walk over agents)
        for a in self._agents.values():
            lo = bisect.bisect_left(a.events, t, key=ts_of)
            for d in a.events[lo:]:
                if d.prompt is not None:
                    self._touch(d)

    def _touch_path(self, path: str, created: set[datetime]) -> None:
        """A file-index change: decisions naming the path, the answers after them, and the signal claims (of the
        file's ``created`` times, before and after the change)."""
        plan = self.plan
        for d in list(self._by_path.get(path, {}).values()):
            if plan.paths:
                self._touch(d)
            if plan.repeats:
                self._touch_next_answer(d)
        if not plan.signals or not any(self._files.links.matches(glob, path) for glob in plan.signal_globs):
            return
        within = plan.signal_within
        for d in self._signal_claims.values():
            if any(c <= d.ts < c + within for c in created):
                self._touch(d)

    def _touch_citing(self, keys: set[tuple[str, str]]) -> None:
        """New current checks of these targets: every decision citing one."""
        if not keys or self._bulk or not self.plan.checks:
            return
        for a in self._agents.values():
            for d in a.events:
                if d.citations and any((c.type, c.target) in keys for c in d.citations):
                    self._touch(d)

    def _touch_relinked(self, named: Iterable[Event]) -> None:
        """The symlinks changed: the decisions naming a path (``named``) may name another file now."""
        plan = self.plan
        for e in named:
            if plan.paths:
                self._touch(e)
            if plan.repeats:
                self._touch_next_answer(e)
        for d in self._signal_claims.values():
            self._touch(d)
