"""Outcomes into counts, and counts into each window's results.

A decision's rules run once (and again when a change or time makes its outcome stale); their (passed, counted,
pending) are kept as one tuple of counts per decision, in the plan's columns. A window's result sums an agent's
counts from its edge on, from cached per-block prefix sums, and takes back out the outcomes whose earlier record the
window no longer holds (``reaches_back``). The sum is kept until the agent changes or the window's edge passes a
decision or such a record.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from collectors.records import Event
from collectors.rfc3339 import to_us
from scorers.live.agents import NONE, Agent
from scorers.live.base import NEVER, NO_WIDTH, SLOTS
from scorers.live.indexes import NO_FILING, Filing, Indexing
from scorers.lookups import check_expires, current_check
from scorers.outcome import NOT_APPLICABLE, PENDING
from scorers.score import AgentResult, ComponentResult, WindowResult, summarise

#: What the rules say of one decision: its counts, when they stop being valid (NEVER: never by time alone), and per
#: rule reaching back, the (time the window must hold, what it then adds) to keep, or None to leave as it is.
Anchor = tuple[datetime | None, tuple[int, int, int, int]]
Outcomes = tuple[tuple[int, ...], datetime, tuple[Anchor | None, ...]]


#: An anchor's (passed, counted, pending, false gaps) when its outcome is a bare —.
ADDS_NOTHING = (0, 0, 0, 0)

#: One agent's work in a rebuild: its decisions' outcomes in order, and the filings (by position) of those filed
#: anywhere (see :data:`~scorers.live.indexes.Filing`; most are not).
Worked = tuple[Sequence[Outcomes], Sequence[tuple[int, Filing]]]


@runtime_checkable
class Packed(Protocol):
    """A helper's outcomes of one agent's decisions as columns (daemon/coldsplit.py), kept as they are
    (:meth:`Summing._take`) rather than as an :data:`Outcomes` tuple per decision."""

    def counts(self) -> tuple[Sequence[tuple[int, ...]], Sequence[int]]:
        """The distinct counts, and per decision the position of its own among them."""

    def expiries(self) -> Iterator[tuple[int, int]]:
        """(position, microseconds) of each decision whose outcomes stop being valid at a time, in order."""

    def anchors(self) -> Iterator[tuple[int, int, int, tuple[int, int, int, int]]]:
        """(position, anchored rule, the time the window must hold: microseconds or NONE, what it adds) of each
        anchor that is not None, in order."""


class Helper(Protocol):
    """Works out a rebuild's outcomes elsewhere (see :meth:`Summing.rerun_all`), agent by agent from the first."""

    def poll(self, timeout: float = 0.0) -> list[Worked]:
        """The work of the next agents in order, one per agent, sent since the last call (none once it ended),
        waiting at most ``timeout`` seconds for the first."""

    def close(self) -> None:
        """Stop working: every agent is kept (or the rebuild failed)."""


#: Starts a :class:`Helper` for the agents' names in order, their numbers of decisions and a function working out the
#: outcomes of some of them; None when it will not help.
Split = Callable[[list[str], list[int], Callable[[Sequence[str]], list[Worked]]], Helper | None]

#: Decisions per block of the cached prefix sums (see range_sums): a window's sum adds at most 2 × (BLOCK − 1)
#: decisions' counts to one difference of prefixes. The prefixes cost 8 bytes per column per block (at 64, 2.4 MB of
#: the bench's 961k decisions; the sums at either end stay well under a millisecond at 128).
BLOCK = 128
#: A rebuild's Events are made this many decisions at a time (:meth:`~scorers.live.table.Table.events`): in one pass
#: for the times' conversion, a few hundred kilobytes held at once whatever the agent's size.
EVENTS_AT_ONCE = 1024


class Summing(Indexing):
    """Per-decision counts from the rules (run over the indexes), and per-(agent, window) sums of them."""

    def _reevaluate(self, s: int, a: Agent, i: int) -> None:
        """Run the rules for the decision ``s`` (at ``a.events[i]``) and keep its counts and when they stop being
        valid."""
        self._apply(s, a, i, self._outcomes(s, a, i, self._table.event(s)))

    def _outcomes(self, s: int, a: Agent, i: int, e: Event) -> Outcomes:
        """What the rules say of the decision ``s`` (at ``a.events[i]``; ``e``: its Event), for :meth:`_apply`; reads
        the model, changes nothing of it (so the decisions of different agents can be worked out apart: see
        :meth:`rerun_all`)."""
        plan = self.plan
        counts = [0] * plan.columns
        gaps = plan.false_gaps
        until = NEVER
        for evaluate, s, valid_until, false_gap in plan.plain:
            o = evaluate(e, self, NO_WIDTH)
            if o is NOT_APPLICABLE:  # (most rules of most decisions): nothing counted, nothing pending
                continue
            mark, _, passed, counted = o
            counts[s], counts[s + 1] = passed, counted
            if mark == PENDING:  # Outcome.pending, read once per rule of every decision: without its call
                counts[s + 2] = 1
                t = valid_until(e, o, self)
                if t is not None and t < until:
                    until = t
            if false_gap is not None and false_gap(o):
                counts[gaps] += 1
        citations = e.citations
        if plan.checks and citations:  # a check stops being current as it ages
            latest, at, max_age = self.latest_checks, self.at, self.config.scoring.check_max_age
            for c in citations:
                check = current_check(latest, (c.type, c.target), at, max_age)  # as self.checks, without the view
                if check is not None:
                    until = min(until, check_expires(check, max_age))
        anchors: list[Anchor | None] = []
        for (reaches_back, s, valid_until, false_gap), an in zip(plan.anchored, a.anchored, strict=True):
            o, t = reaches_back(e, self)
            if o is NOT_APPLICABLE:  # a bare — adds nothing, kept as below (nor is it a false gap, as above)
                anchors.append((None, ADDS_NOTHING) if an.held[i] else None)
                continue
            mark, _, passed, counted = o
            undecided = int(mark == PENDING)
            gap = 1 if false_gap is not None and false_gap(o) else 0
            if passed or counted or undecided or gap:
                counts[s], counts[s + 1], counts[s + 2] = passed, counted, undecided
                counts[gaps] += gap
                if undecided:
                    deadline = valid_until(e, o, self)
                    if deadline is not None and deadline < until:
                        until = deadline
            else:
                t = None  # a — adds nothing to any window, in it or not
            anchors.append((t, (passed, counted, undecided, gap)) if t is not None or an.held[i] else None)
        return tuple(counts), until, tuple(anchors)

    def _apply(self, s: int, a: Agent, i: int, outcomes: Outcomes) -> None:
        """Keep what :meth:`_outcomes` said of the decision ``s`` (at ``a.events[i]``): its counts, the times its
        outcomes need inside the window, and when they stop being valid."""
        self._hold(s, a, i, outcomes)
        self._changed(a, i)

    def _hold(self, s: int, a: Agent, i: int, outcomes: Outcomes) -> None:
        """:meth:`_apply` but for marking ``a`` changed (a rebuild marks each agent once)."""
        counts, until, anchors = outcomes
        for anchor, an in zip(anchors, a.anchored, strict=True):
            if anchor is not None:
                t, added = anchor
                an.set(self._table, s, i, NONE if t is None else to_us(t), self._contribution_index(added), a.merged)
        a.counts[i] = self._count_index(counts)
        if until < NEVER:
            heapq.heappush(self._expiry, (to_us(until), next(self._seq), s))

    def rerun_all(self, split: Split | None = None) -> None:
        """Run the rules for every decision (a rebuild). ``split`` may start a :class:`Helper` working out the agents'
        outcomes elsewhere (another process, with a copy of this model) from the first agent on: this model works out
        and keeps agents from the last one back, keeping between two of its own what the helper sent, until the two
        meet; then the helper is stopped. An agent whose work the helper got wrong in number is worked out here. The
        decisions are filed by path, signal and follow-up wait with their rules, from the Event made for those (see
        :meth:`~scorers.live.indexes.Indexing._filing`): on either side, one Event per decision."""
        names = list(self._agents)
        helper = None if split is None else split(names, [len(self._agents[n].events) for n in names],
                                                  self._work_of)
        self.evaluated = 0
        self._by_path, self._signal_claims = {}, array(SLOTS)  # filed afresh, agent by agent
        for a in self._agents.values():  # and so are the follow-ups' waits
            a.awaiting = tuple(array(SLOTS) for _ in a.awaiting)
        sent, last = 0, len(names)  # names[:sent] kept from the helper, names[last:] worked out here
        try:
            while sent < last:
                for worked in () if helper is None else helper.poll():
                    if sent < last:  # else worked out here as well, the two sides having met meanwhile
                        self._keep(self._agents[names[sent]], worked)
                    sent += 1
                if sent < last:
                    last -= 1
                    self._rerun(self._agents[names[last]])
        finally:  # stopped even when a rule raised here: nothing is left running elsewhere
            if helper is not None:
                helper.close()

    def _keep(self, a: Agent, worked: Worked) -> None:
        """Keep the work a helper did for ``a``'s decisions (or do it, if not one outcome per decision)."""
        outcomes, filings = worked
        n = len(a.events)
        self._take(a, worked if len(outcomes) == n and all(0 <= k < n for k, _ in filings) else self._work(a))

    def _rerun(self, a: Agent) -> None:
        """Run the rules for every decision of ``a``, and file each (a rebuild)."""
        self._take(a, self._work(a))

    def _take(self, a: Agent, worked: Worked) -> None:
        """Keep ``worked`` as ``a``'s: its outcomes applied, its decisions filed."""
        outcomes, filings = worked
        if isinstance(outcomes, Packed):
            self._hold_packed(a, outcomes)
        else:
            self._apply_all(a, outcomes)
        events, awaiting = a.events, a.awaiting
        for k, filing in filings:
            s = events[k]
            self._file(s, filing)
            for j in filing[2]:  # appended: the filings come in the agent's (ts, read) order
                awaiting[j].append(s)
        self.evaluated += len(a.events)

    def _work(self, a: Agent) -> Worked:
        """The outcomes of ``a``'s decisions and their filings (one Event each); reads the model, changes nothing."""
        t, outcomes, filings, events = self._table, [], [], a.events
        for start in range(0, len(events), EVENTS_AT_ONCE):
            chunk = events[start:start + EVENTS_AT_ONCE]
            for k, (s, e) in enumerate(zip(chunk, t.events(chunk), strict=True), start):
                outcomes.append(self._outcomes(s, a, k, e))
                filing = self._filing(e)
                if filing != NO_FILING:
                    filings.append((k, filing))
        return outcomes, filings

    def _work_of(self, names: Sequence[str]) -> list[Worked]:
        """:meth:`_work` for these agents, agent by agent (what a helper sends)."""
        return [self._work(self._agents[name]) for name in names]

    def _apply_all(self, a: Agent, outcomes: Iterable[Outcomes]) -> None:
        """:meth:`_apply` for every decision of ``a`` in order (a rebuild), the agent marked changed once."""
        for i, (s, o) in enumerate(zip(a.events, outcomes, strict=True)):
            self._hold(s, a, i, o)
        self._changed(a, 0)

    def _hold_packed(self, a: Agent, packed: Packed) -> None:
        """:meth:`_apply_all` of outcomes held as columns: each distinct counts' position found once (in the order
        of first use, as one by one), the rest copied across; the same model as one by one."""
        table, positions = packed.counts()
        index = {k: self._count_index(table[k]) for k in dict.fromkeys(positions)}
        a.counts[:] = array(a.counts.typecode, map(index.__getitem__, positions))  # (widened above, if it had to be)
        events, expiry, seq = a.events, self._expiry, self._seq
        for i, us in packed.expiries():
            heapq.heappush(expiry, (us, next(seq), events[i]))
        t, anchored, merged = self._table, a.anchored, a.merged
        for i, j, us, added in packed.anchors():
            anchored[j].set(t, events[i], i, us, self._contribution_index(added), merged)
        self._changed(a, 0)

    def _changed(self, a: Agent, i: int) -> None:
        """The decision at index ``i`` of ``a`` (and so every later position) changed: drop the prefix sums that
        include it, and give the agent a new version (model-wide: an agent removed and re-created never repeats one)."""
        del a.prefix[(i // BLOCK + 1) * self.plan.columns:]
        a.version = next(self._seq)

    def _window(self, name: str, width: timedelta) -> WindowResult:
        at, ts = self.at, self._table.ts
        listing = to_us(at - max(self.config.scoring.longest_window, width))
        edge = to_us(at - width)
        agents: dict[str, AgentResult] = {}
        results = self._results
        for agent in sorted(self._agents):
            a = self._agents[agent]
            events = a.events
            if not events or not ts[events[-1]] > listing:
                continue
            cached = results.get((agent, name))
            if cached is not None and _still(cached, a, edge, ts):
                agents[agent] = cached[1]
                continue
            lo = bisect.bisect_right(events, edge, key=ts.__getitem__)
            # How many outcomes need a time the window no longer holds: with the version, what the sum depends on
            # (each rule's count only grows as the edge moves on, so their total tells them apart).
            stale = bisect.bisect_right(a.anchor_times, edge)
            key = (a.version, lo, stale, len(events), edge)
            if cached is not None and cached[0][:4] == key[:4]:
                results[(agent, name)] = (key, cached[1])
                agents[agent] = cached[1]
                continue
            result = self._sum(agent, a, lo, edge, stale)
            self.summed += 1
            results[(agent, name)] = (key, result)
            agents[agent] = result
        return WindowResult(at, name, width, self.config.weights_active, agents)

    def _sum(self, agent: str, a: Agent, lo: int, edge: int, stale: int) -> AgentResult:
        """The agent's result over its decisions from ``lo``, without the outcomes that need a time at or before
        ``edge`` (microseconds; ``stale`` of them), which the window no longer holds."""
        plan, contributions = self.plan, self._contributions
        totals = range_sums(a, lo, plan.zero, self._counts)
        for (_, s, _, _), an in zip(plan.anchored, a.anchored, strict=True):
            left = stale if a.merged is None else bisect.bisect_right(an.sorted_times, edge)
            if not left:
                continue  # no such outcome has lost its earlier record
            # That record is never later than its decision: of the ``left`` decisions whose time is up to the edge,
            # the first ``first`` are themselves up to it (before the window), and the rest are the ones to take out.
            # Counting them ends the walk at the last one instead of at the window's end.
            first = bisect.bisect_right(an.decisions, edge, key=self._table.ts.__getitem__)
            left -= first
            for t, c in zip(itertools.islice(an.needs, first, None), itertools.islice(an.contributions, first, None),
                            strict=True):
                if not left:
                    break
                if t <= edge:
                    passed, counted, pending, gaps = contributions[c]
                    left -= 1
                    totals[s] -= passed
                    totals[s + 1] -= counted
                    totals[s + 2] -= pending
                    totals[plan.false_gaps] -= gaps
        components = {n: ComponentResult(totals[3 * k], totals[3 * k + 1], totals[3 * k + 2])
                      for k, n in enumerate(plan.names)}
        return summarise(agent, len(a.events) - lo, components, totals[plan.false_gaps], self.config)


def _still(cached: tuple[tuple[Any, ...], AgentResult], a: Agent, edge: int, ts: array[int]) -> bool:
    """True when the sum ``cached`` for ``a`` still holds at ``edge`` (microseconds), known without a search: the agent
    is the same version with as many decisions, and the edge, no earlier than the sum's, has passed neither the first
    decision the sum kept nor the next time an outcome needs (evaluated after every ingest pass, for every agent)."""
    (version, lo, stale, n, was), _ = cached
    if version != a.version or n != len(a.events) or edge < was:
        return False
    times = a.anchor_times
    return bool((lo == n or ts[a.events[lo]] > edge) and (stale == len(times) or times[stale] > edge))


def column_sums(rows: Sequence[tuple[int, ...]], zero: tuple[int, ...]) -> list[int]:
    """The sum of each column of ``rows`` (``zero`` when there are none)."""
    return [sum(col) for col in zip(*rows, strict=True)] if rows else list(zero)


def range_sums(a: Agent, lo: int, zero: tuple[int, ...], table: Sequence[tuple[int, ...]]) -> list[int]:
    """Column sums of the counts of ``a``'s decisions from ``lo`` on (``a.counts`` holds their positions in ``table``):
    the whole blocks as a difference of cached prefix sums (extended as needed), the partial blocks at either end
    directly.

    A live agent changes at its tail, so all but its last prefix stay cached from one evaluation to the next, and
    a window costs the same however many decisions it holds.
    """
    n, counts = len(a.counts), a.counts
    first = -(-lo // BLOCK)  # the first whole block in the range
    last = n // BLOCK  # whole blocks end before this one
    if first >= last:
        return column_sums([table[c] for c in counts[lo:]], zero)
    p, w = a.prefix, len(zero)
    while len(p) <= last * w:
        k = len(p) // w - 1  # prefixes 0..k are cached: add block k
        block = column_sums([table[c] for c in counts[k * BLOCK:(k + 1) * BLOCK]], zero)
        p.extend([x + y for x, y in zip(p[k * w:(k + 1) * w], block, strict=True)])
    # The tail after the last whole block is the same for every window: summed once per version of the agent.
    key = (a.version, n)
    if a.tail_key != key:
        a.tail_key, a.tail = key, tuple(column_sums([table[c] for c in counts[last * BLOCK:]], zero))
    head = column_sums([table[c] for c in counts[lo:first * BLOCK]], zero)
    return [end - start + h + t for end, start, h, t in
            zip(p[last * w:(last + 1) * w], p[first * w:(first + 1) * w], head, a.tail, strict=True)]
