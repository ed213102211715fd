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
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from collectors.records import Event
from collectors.rfc3339 import from_us, to_us
from scorers.live.base import ModelState

if TYPE_CHECKING:
    from scorers.live.agents import Agent

MICROSECOND = timedelta(microseconds=1)


class Invalidation(ModelState):
    """Marks the decisions a change can concern; :meth:`LiveModel.evaluate` re-runs the rules for them."""

    def _touch(self, s: int) -> None:
        if not self._all_dirty:  # a rebuild runs every decision: a set of those marked meanwhile is only dropped
            self._dirty.add(s)

    def _touch_next_answer(self, s: int) -> None:
        nxt = self._next_same_prompt(s)
        if nxt is not None:
            self._touch(nxt)

    def _touch_neighbours(self, s: int, e: Event, a: Agent) -> None:
        """Decisions of the agent of ``s`` (the Event ``e``) whose outcome can depend on it (arriving or departing):
        those waiting for a follow-up it may be, the labelled ones in reach of a reply it may be, and the next answer
        to its prompt."""
        plan, t = self.plan, self._table
        ts, us = t.ts, t.ts[s]
        for (length, matches, _), waiting in zip(plan.follow_ups, a.awaiting, strict=True):
            lo = bisect.bisect_left(waiting, to_us(e.ts - length), key=ts.__getitem__)
            hi = bisect.bisect_left(waiting, us, key=ts.__getitem__)
            for d in waiting[lo:hi]:
                if matches(e, t.event(d)):
                    self._touch(d)
        if plan.replies:
            # In microseconds: the label times are held so (scorers/live/labels.py), and this walks every labelled
            # decision of the agent (e.ts ≤ last label + longest reply, rearranged).
            times, since = self._label_columns.ts, to_us(e.ts - plan.longest_reply)
            for d, slot in zip(a.labelled, a.label_slots, strict=True):
                if since <= times[slot] and ts[d] <= us:
                    last_label = from_us(times[slot])
                    if any(e.ts <= last_label + length and matches(e, t.event(d)) for length, matches in plan.replies):
                        self._touch(d)
        if plan.repeats:
            self._touch_next_answer(s)

    def _touch_state_change(self, us: int) -> None:
        """A state change at ``us``: every answer to a prompt at or after it may now be exempt, or no longer."""
        if not self.plan.repeats or not self._prompted_times or self._prompted_times[-1] < us:
            return  # the live case: a state change after every prompted decision changes none (no walk over agents)
        t = self._table
        for a in self._agents.values():
            lo = bisect.bisect_left(a.events, us, key=t.ts.__getitem__)
            for d in a.events[lo:]:
                if t.prompt(d) is not None:
                    self._touch(d)

    def _touch_path(self, path: str, created: set[datetime]) -> None:
        """A file-index change: decisions naming the path, the answers after them, and the signal claims (of the
        file's ``created`` times, before and after the change)."""
        plan = self.plan
        for d in list(self._by_path.get(path, ())):
            if plan.paths:
                self._touch(d)
            if plan.repeats:
                self._touch_next_answer(d)
        if not plan.signals or not any(self._files.links.matches(glob, path) for glob in plan.signal_globs):
            return
        within, ts = plan.signal_within // MICROSECOND, self._table.ts
        starts = [to_us(c) for c in created]
        for d in self._signal_claims:
            if any(c <= ts[d] < c + within for c in starts):
                self._touch(d)

    def _touch_citing(self, keys: set[tuple[str, str]]) -> None:
        """New current checks of these targets: every decision citing one."""
        if not keys or self._bulk or not self.plan.checks:
            return
        t = self._table
        # Which shared lists of citations cite one (each list once), then the decisions holding such a list.
        hit = {k for k, cited in enumerate(t.citations.values) if any((c.type, c.target) in keys for c in cited)}
        if not hit:
            return
        for a in self._agents.values():
            for d in a.events:
                if t.cited[d] in hit:
                    self._touch(d)

    def _touch_relinked(self, named: Iterable[int]) -> None:
        """The symlinks changed: the decisions naming a path (``named``) may name another file now."""
        plan = self.plan
        for s in named:
            if plan.paths:
                self._touch(s)
            if plan.repeats:
                self._touch_next_answer(s)
        for d in self._signal_claims:
            self._touch(d)
