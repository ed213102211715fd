"""Letting go of records behind every window: memory follows the window, not the history.

With ``evict`` (the daemon's model), records a day behind the longest window are let go. No window at a time
``T ≥ horizon + longest window`` holds them, and no rule reads back from a decision inside one further than the window
(a rule with ``reaches_back`` compares with an earlier record only inside it; follow-ups, replies and the file index
look forward or at files). Their ids stay as 8-byte hashes; a record arriving with one of them has the store's
records of that id recalled (spec 1.1). A clock that steps back past what was let go raises :class:`HistoryEvicted`.
"""

from __future__ import annotations

import bisect
import heapq
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from typing import Any

from collectors.records import Event
from collectors.rfc3339 import to_us
from scorers.live.base import DAWN, ModelState, document_events
from scorers.live.labels import slots_of
from scorers.live.records import Record, Stub, ts_of

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
        if not self._fresh or self.records():
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
        hidden = {h[2].id for h in self._hidden}
        day = horizon.toordinal()
        # Every held record up to the horizon was shown on one of these days (the ids of records since gone, or
        # shown again later, are looked at and passed over).
        boundary = self._days.pop(day, [])
        candidates: dict[str, None] = {}
        for d in [d for d in self._days if d < day]:
            candidates.update(dict.fromkeys(self._days.pop(d)))
        candidates.update(dict.fromkeys(boundary))
        gone: list[Record] = []
        for rid in candidates:
            w = self._winner.get(rid)
            if w is None or w.ts > horizon or rid in hidden:
                continue  # w's own day holds it; a hidden record is filed under its day when shown
            rest = self._shadowed.get(rid, ())
            if all(r.ts <= horizon for r in rest):
                gone.append(w)
                gone.extend(rest)
        gone_ids = {id(r) for r in gone}
        winners = [r for r in gone if self._winner.get(r.id) is r]
        self._unindex_all(winners)
        for w in winners:
            del self._winner[w.id]
            self._shadowed.pop(w.id, None)
            held = self._labels.pop(w.id, None)
            if held is not None:
                for slot in slots_of(held):
                    self._label_columns.drop(slot)
                self._tally = None
            self._evicted.add(w.id)
        # The horizon's day goes on holding every candidate that stays (its records after the horizon, or blocked by
        # a hidden record): a hidden record that is removed, not shown, files its id nowhere else.
        later = [rid for rid in candidates if rid in self._winner]
        if later:
            self._days.setdefault(day, []).extend(later)
        for path in {r.path for r in gone if r.line is None}:
            kept = [d for d in document_events(self._documents.get(path)) if id(d) not in gone_ids]
            if kept:
                self._documents[path] = kept if len(kept) > 1 else kept[0]
            else:
                self._documents.pop(path, None)
        if any(id(x[2]) in gone_ids for x in self._expiry):
            self._expiry = [x for x in self._expiry if id(x[2]) not in gone_ids]
            heapq.heapify(self._expiry)
        self._let_go_of_checks_and_file_times(horizon)
        self.evicted_to = horizon

    def _unindex_all(self, winners: Collection[Record]) -> None:
        """Take winners out of the indexes at once, marking nothing (records let go behind every window). Each sorted
        list loses them in one pass over its part up to the latest of them: taken out one by one, each deletion near
        the front would move the rest of its list."""
        gone = {id(e) for e in winners}
        state_times = [e.ts for e in winners if e.kind in self._state_kinds]
        prompted: list[datetime] = []
        groups: set[tuple[str, str]] = set()
        by_agent: dict[str, list[Event]] = defaultdict(list)
        for e in winners:
            if isinstance(e, Stub) or not self._is_decision(e):
                continue
            by_agent[e.agent].append(e)
            key = self._prompt_key(e.prompt)
            if key is not None:
                prompted.append(e.ts)
                groups.add((e.agent, key))
            self._index_paths(e, add=False)
            self._dirty.pop(id(e), None)
        latest = max((e.ts for e in winners), default=DAWN)
        drop_times(self._state_times, state_times)
        drop_times(self._prompted_times, prompted)
        for group_key in groups:
            group = self._prompts[group_key]
            drop_records(group, gone, latest)
            if not group:
                del self._prompts[group_key]
        for agent, es in by_agent.items():
            a = self._agents[agent]
            until = max(e.ts for e in es)
            k = bisect.bisect_right(a.events, until, key=ts_of)
            keep = [i for i in range(k) if id(a.events[i]) not in gone]
            first = next((i for i, j in enumerate(keep) if i != j), len(keep))  # the first decision taken out
            for an in a.anchored:
                times = [t for i in range(first, k) if id(a.events[i]) in gone and (t := an.times[i]) is not None]
                drop_times(an.sorted_times, times)
                if a.merged is not None:
                    drop_times(a.merged, times)
                an.times[:k] = [an.times[i] for i in keep]
                drop_records(an.decisions, gone, until, an.needs, an.contributions)
            a.events[:k] = [a.events[i] for i in keep]
            a.counts[:k] = [a.counts[i] for i in keep]
            self._changed(a, first)
            for e in es:
                a.labelled.pop(e.id, None)
            for waiting in a.awaiting:
                drop_records(waiting, gone, until)
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


def drop_times(times: list[datetime], drop: list[datetime]) -> None:
    """Take ``drop`` (a multiset) out of the sorted ``times``, in one pass over the part up to its latest."""
    if not drop:
        return
    left = Counter(drop)
    k = bisect.bisect_right(times, max(drop))
    kept = []
    for t in times[:k]:
        if left[t]:
            left[t] -= 1
        else:
            kept.append(t)
    assert not +left, "a time to drop was not held"
    times[:k] = kept


def drop_records(records: list[Event], gone: set[int], until: datetime, *beside: list[Any]) -> None:
    """Take the records whose id() is in ``gone``, all dated up to ``until``, out of ``records`` sorted by time (and
    the entries of each list ``beside`` aligned with them)."""
    k = bisect.bisect_right(records, until, key=ts_of)
    if any(id(r) in gone for r in records[:k]):
        keep = [i for i in range(k) if id(records[i]) not in gone]
        for aligned in beside:
            aligned[:k] = [aligned[i] for i in keep]
        records[:k] = [records[i] for i in keep]
