"""Letting go of records behind every window: memory follows the window, not the history.

With ``evict`` (the daemon's model), records a day behind the longest window are let go. No window at a time
``T ≥ horizon + longest window`` holds them, and no rule reads back from a decision inside one further than the window
(a rule with ``reaches_back`` compares with an earlier record only inside it; follow-ups, replies and the file index
look forward or at files). Their slots go back to the table; their ids stay as 8-byte hashes, and a record arriving
with one of them has the store's records of that id recalled (spec 1.1). A clock that steps back past what was let go
raises :class:`HistoryEvicted`.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections import defaultdict
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta

from collectors.rfc3339 import to_us
from scorers.live.agents import drop_slots, drop_times, without
from scorers.live.base import SLOTS, ModelState
from scorers.live.ids import EMPTY
from scorers.live.labels import slots_of

#: How far behind the longest window the model keeps records: the clock may step back this far without a reload.
EVICT_SLACK = timedelta(days=1)
#: Records are let go in steps of this much time (each step takes that day's records out of the indexes), so once a
#: day; memory holds at most this much more than the windows and the slack.
EVICT_EVERY = timedelta(days=1)


class HistoryEvicted(Exception):
    """Raised by :meth:`LiveModel.evaluate` for a time whose windows reach records the model has let go (the clock
    stepped back further than :data:`EVICT_SLACK`): build the model again from the store."""


class Eviction(ModelState):
    """Records let go behind the windows (and, before anything is added, records never taken)."""

    def let_go(self, horizon: datetime, ids: Iterable[str]) -> None:
        """Before anything is added: the records dated up to ``horizon`` under ``ids`` are not coming (the caller
        left them in the store, every record of those ids), as if :meth:`_evict` had let them go. A start on a store
        with a long history then never holds it all at once. With no ids nothing was let go and no horizon is kept:
        the first evaluation lets go of what arrives behind every window (a start on an empty store, beside its
        first scan)."""
        if not self._fresh or len(self._table):
            raise ValueError("let_go() is for a model nothing was added to yet")
        count = 0
        for rid in ids:
            self._evicted.add(rid)
            count += 1
        if count:
            self.evicted_to = horizon

    def ids_let_go(self) -> list[int]:
        """The hashes of the ids let go that only this model holds (for its owner to keep elsewhere: see
        :attr:`let_go_elsewhere`)."""
        return self._evicted.hashes()

    def ids_kept_elsewhere(self, hashes: Iterable[int], count: int) -> None:
        """These hashes of :meth:`ids_let_go` are kept where :attr:`let_go_elsewhere` asks (``count`` ids in all,
        there): the model lets go of them too."""
        self._evicted.discard(hashes)
        self.let_go_elsewhere_count = count

    def horizon_at(self, at: datetime) -> datetime:
        """Up to when records may be let go once the model is evaluated at ``at``: a day behind every window."""
        return at - self.config.scoring.longest_window - EVICT_SLACK

    def _horizon(self, at: datetime) -> datetime | None:
        """Up to when records are to be let go at ``at`` (None: not yet due, or the model keeps everything)."""
        if at - self.config.scoring.longest_window < self.evicted_to:
            raise HistoryEvicted(f"the windows at {at} reach records let go up to {self.evicted_to}")
        horizon = self.horizon_at(at)
        return horizon if self.evicts and horizon >= self.evicted_to + EVICT_EVERY else None

    def _evict(self, horizon: datetime) -> None:
        """Let go of the records dated up to ``horizon``. An id goes only with every record of it (none hidden, none
        newer), so a held id has all its stored records here. Checks and file modifications that old go too."""
        t = self._table
        ts, until = t.ts, to_us(horizon)
        hidden = {t.id(h[2]) for h in self._hidden}
        # The ids of the records held up to the horizon: one pass over the column of times, once a step (an index of
        # the slots by day cost 4 bytes a record, all the time, to save that pass once a day).
        live = t.live
        candidates = dict.fromkeys(t.id(s) for s, x in enumerate(ts) if x <= until and live(s))
        gone: list[int] = []
        winners: list[int] = []
        for rid in candidates:
            w = self._winner.get(rid)
            if w == EMPTY or ts[w] > until or rid in hidden:
                continue  # w's own day holds it; a hidden record is filed under its day when shown
            rest = self._shadowed.get(rid, ())
            if all(ts[r] <= until for r in rest):
                winners.append(w)
                gone.append(w)
                gone.extend(rest)
        self._unindex_all(winners)
        for w in winners:
            rid = t.id(w)
            self._winner.remove(rid)
            self._shadowed.pop(rid, None)
            held = self._label_columns.unfile(rid)
            if held is not None:
                for slot in slots_of(held):
                    self._label_columns.drop(slot)
                self._tally = None
            self._evicted.add(rid)
        gone_set = set(gone)
        if any(x[2] in gone_set for x in self._expiry):
            self._expiry = [x for x in self._expiry if x[2] not in gone_set]
            heapq.heapify(self._expiry)
        for s in gone:
            if t.is_markdown(s):
                self._unfile_document(s)
            t.release(s)
        self._let_go_of_checks_and_file_times(horizon)
        self.evicted_to = horizon
        # The values only those records shared go too (documents, threads, shapes, citation lists), and the prompt
        # keys worked out (a cache, refilled by the prompts still asked about): else they grow with the history.
        self._table.vacuum()
        self._shared.clear()

    def _unindex_all(self, winners: Collection[int]) -> None:
        """Take winners out of the indexes at once, marking nothing (records let go behind every window). Each sorted
        column loses them in one pass over its part up to the latest of them: taken out one by one, each deletion near
        the front would move the rest of its column."""
        if not winners:
            return
        t = self._table
        ts = t.ts
        gone = set(winners)
        state_times = [ts[s] for s in winners if t.kind(s) in self._state_kinds]
        prompted: list[int] = []
        groups: set[tuple[str, str]] = set()
        by_agent: dict[str, list[int]] = defaultdict(list)
        for s in winners:
            if not t.is_decision(s):
                continue
            agent = t.agent(s)
            by_agent[agent].append(s)
            key = self._prompt_key(t.prompt(s))
            if key is not None:
                prompted.append(ts[s])
                groups.add((agent, key))
            self._dirty.discard(s)
        for path, bucket in list(self._by_path.items()):
            if any(s in gone for s in bucket):
                kept = without(bucket, gone)
                if kept:
                    self._by_path[path] = kept
                else:
                    del self._by_path[path]
        if any(s in gone for s in self._signal_claims):
            self._signal_claims = without(self._signal_claims, gone)
        latest = max(ts[s] for s in winners)
        drop_times(self._state_times, state_times)
        drop_times(self._prompted_times, prompted)
        for group_key in groups:
            group = self._prompts[group_key]
            drop_slots(group, gone, latest, ts)
            if not group:
                del self._prompts[group_key]
        for agent, slots in by_agent.items():
            self._unindex_from_agent(agent, slots, gone)

    def _unindex_from_agent(self, agent: str, slots: list[int], gone: set[int]) -> None:
        """Take ``slots`` (all of ``gone`` that are ``agent``'s) out of the agent's columns at once."""
        a, ts = self._agents[agent], self._table.ts
        newest = max(ts[s] for s in slots)
        k = bisect.bisect_right(a.events, newest, key=ts.__getitem__)
        events = a.events
        keep = [i for i in range(k) if events[i] not in gone]
        first = next((i for i, j in enumerate(keep) if i != j), len(keep))  # the first decision taken out
        for an in a.anchored:
            times = [x for d, x in zip(an.decisions, an.needs, strict=True) if d in gone]
            drop_times(an.sorted_times, times)
            if a.merged is not None:
                drop_times(a.merged, times)
            an.held[:k] = bytes(an.held[i] for i in keep)
            drop_slots(an.decisions, gone, newest, ts, an.needs, an.contributions)
        a.counts[:k] = array(a.counts.typecode, [a.counts[i] for i in keep])
        a.events[:k] = array(SLOTS, [events[i] for i in keep])
        self._changed(a, first)
        for s in slots:
            a.drop_labelled(s)
        for waiting in a.awaiting:
            drop_slots(waiting, gone, newest, ts)
        if not a.events:
            self._forget_agent(agent)

    def _let_go_of_checks_and_file_times(self, horizon: datetime) -> None:
        """Checks too old to be current at any time whose windows miss ``horizon`` (a newer one of the same target
        would replace them anyway), and file modifications up to it (``changed_in`` is asked from an earlier record
        inside a window, so never before it)."""
        oldest = horizon - self.config.scoring.check_max_age
        self._all_checks = [c for c in self._all_checks if c.checked_at > oldest]
        self.latest_checks = {k: c for k, c in self.latest_checks.items() if c.checked_at > oldest}
        cut = to_us(horizon)
        for f in self._files.files.values():
            f.drop_modified(cut)

