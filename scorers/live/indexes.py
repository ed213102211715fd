"""The indexes the rules read, over the visible winners, and the model's answers to the rules' lookups.

Each agent's decisions in (ts, read order) with their cached counts (:class:`~scorers.live.agents.Agent`); the
state-change times; the answers to each prompt; the decisions by the paths they name; the file index and the
symlinks. Every index holds slots of the table (scorers/live/table.py); a rule is given the Events they stand for. The
lookups themselves (:class:`~scorers.context.RuleContext`) are scorers/lookups.py's, as in the pure evaluation.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from collectors.links import LinkMap, Links
from collectors.records import CheckResult, Event, FileEntry, Label
from collectors.rfc3339 import from_us, to_us
from scorers.context import paths_of, prompt_key
from scorers.live import base
from scorers.live.agents import NONE, Agent, find, insert
from scorers.live.base import SLOTS, ModelState
from scorers.live.ids import EMPTY
from scorers.lookups import CurrentChecks, FileState

#: Where a decision is filed besides its place among its agent's decisions and prompts: the keys of the paths it names
#: (spec 3.4's P, canonical), whether a signal selects it, and the follow-up rules waiting for a later decision to
#: decide it (by position in the plan's ``follow_ups``). Only the model's invalidation reads those, never a rule.
Filing = tuple[tuple[str, ...], bool, tuple[int, ...]]
NO_FILING: Filing = ((), False, ())


class Indexing(ModelState):
    """Winners into and out of the indexes; the file index; the lookups the rules make."""

    def _agent(self, name: str) -> Agent:
        """The agent's indexes (made when new)."""
        a = self._agents.get(name)
        if a is None:
            plan = self.plan
            a = self._agents[name] = Agent(plan.zero, len(plan.anchored), len(plan.follow_ups),
                                           "H" if len(self._counts) <= base.COUNTS_FIT else "I")
        return a

    def _index(self, s: int) -> None:
        """Add a visible winner to the indexes the rules read, and mark what it can change."""
        t = self._table
        us = t.ts[s]
        if t.kind(s) in self._state_kinds:
            bisect.insort(self._state_times, us)
            if not self._bulk:
                self._touch_state_change(us)
        if not t.is_decision(s):
            return  # not a decision: in no other index
        plan, e = self.plan, t.event(s)
        a = self._agent(e.agent)
        i = insert(a.events, s, t)
        a.counts.insert(i, 0)
        for an in a.anchored:
            an.held.insert(i, 0)
        self._changed(a, i)
        labelled = self._label_columns.visible(e.id) if plan.replies else None
        if labelled is not None:
            a.set_labelled(s, self._label_columns.latest(labelled))
        key = self._prompt_key(e.prompt)
        if key is not None:
            bisect.insort(self._prompted_times, us)
            insert(self._prompts.setdefault((e.agent, key), array(SLOTS)), s, t)
        filing = self._filing(e)
        self._file(s, filing)
        for j in filing[2]:
            insert(a.awaiting[j], s, t)
        if not self._bulk:  # a rebuild marks them all at once (_all_dirty)
            self._dirty.add(s)
            self._touch_neighbours(s, e, a)

    def _index_agent(self, agent: str, slots: Sequence[int], prompt_keys: Sequence[str | None]) -> None:
        """:meth:`_index` in a rebuild (``_bulk``), for the decisions of ``agent`` winning their ids, in key order
        (:meth:`~scorers.live.table.Table.in_key_order`), none indexed yet: they go into the agent's indexes at
        once, no search, into the times of prompted decisions unsorted (the rebuild sorts them once), and into the path
        and signal maps and the follow-ups' waits later, with the rules (:meth:`~scorers.live.sums.Summing.rerun_all`:
        from the Event made for those). No prefix sum is dropped:
        the rebuild's agents hold none yet (their first sums come after the rules ran for every decision).
        ``prompt_keys``: the prompt key of each shape of the table, by position."""
        t = self._table
        a = self._agents.get(agent)
        if a is None:
            a = self._agent(agent)
            a.version = next(self._seq)
        a.events.extend(slots)
        a.counts.extend(array(a.counts.typecode, [0]) * len(slots))
        for an in a.anchored:
            an.held.extend(bytes(len(slots)))
        shape_at, ts, prompted = t.shape, t.ts, self._prompted_times
        for s in slots:
            key = prompt_keys[shape_at[s]]
            if key is not None:
                prompted.append(ts[s])
                group = self._prompts.get((agent, key))
                if group is None:
                    group = self._prompts[(agent, key)] = array(SLOTS)
                group.append(s)

    def _unindex(self, s: int) -> None:
        """Take a winner out of the indexes, and mark what its going can change."""
        t = self._table
        us = t.ts[s]
        if t.kind(s) in self._state_kinds:
            del self._state_times[bisect.bisect_left(self._state_times, us)]
            self._touch_state_change(us)
        if not t.is_decision(s):
            return
        plan, e = self.plan, t.event(s)
        a = self._agents[e.agent]
        i = a.index(s, t)
        assert i is not None
        for an in a.anchored:
            an.set(t, s, i, NONE, 0, a.merged)
            del an.held[i]
        del a.events[i], a.counts[i]
        self._changed(a, i)
        a.drop_labelled(s)
        for (_, _, awaits), waiting in zip(plan.follow_ups, a.awaiting, strict=True):
            if awaits is None or awaits(e, self):
                j = find(waiting, s, t)
                assert j is not None
                del waiting[j]
        key = self._prompt_key(e.prompt)
        if key is not None:
            del self._prompted_times[bisect.bisect_left(self._prompted_times, us)]
            group = self._prompts[(e.agent, key)]
            j = find(group, s, t)
            assert j is not None
            del group[j]  # its successor: _touch_neighbours
            if not group:
                del self._prompts[(e.agent, key)]
        self._unfile(s, e)
        self._dirty.discard(s)
        self._touch_neighbours(s, e, a)
        if not a.events:
            self._forget_agent(e.agent)

    def _forget_agent(self, agent: str) -> None:
        """An agent with no visible decision left: it goes, and its cached results with it."""
        del self._agents[agent]
        for name, _ in self.config.scoring.windows:
            self._results.pop((agent, name), None)

    def _path_keys(self, e: Event) -> Iterable[str]:
        """Where a decision is filed by path: each canonical path it names, once."""
        paths = paths_of(e)  # (most name none)
        return dict.fromkeys(map(self._path_key, paths)) if paths else {}

    def _unfile(self, s: int, e: Event) -> None:
        """Take the decision ``s`` (the Event ``e``) out of the path and signal maps (its agent's waits go with it)."""
        plan = self.plan
        if plan.by_path:
            for key in self._path_keys(e):
                bucket = self._by_path.get(key)
                if bucket is not None and s in bucket:
                    bucket.remove(s)
                    if not bucket:
                        del self._by_path[key]
        for selects in plan.signals:
            if selects(e, self):
                if s in self._signal_claims:
                    self._signal_claims.remove(s)
                break

    def _filing(self, e: Event) -> Filing:
        """Where ``e`` is filed besides its agent's indexes (see :data:`Filing`); reads the model, changes nothing of
        it (a rebuild's helper works them out apart: see :meth:`~scorers.live.sums.Summing.rerun_all`)."""
        plan = self.plan
        keys = tuple(self._path_keys(e)) if plan.by_path else ()
        kinds = plan.awaited_kinds
        waits = () if not plan.follow_ups or (kinds is not None and e.kind not in kinds) else tuple(
            j for j, (_, _, awaits) in enumerate(plan.follow_ups) if awaits is None or awaits(e, self))
        claims = False
        for selects in plan.signals:
            if selects(e, self):
                claims = True
                break
        return (keys, claims, waits) if keys or claims or waits else NO_FILING

    def _file(self, s: int, filing: Filing) -> None:
        """File the decision ``s`` by path and signal as :meth:`_filing` said (its waits are its agent's)."""
        keys, claims, _ = filing
        for key in keys:
            bucket = self._by_path.get(key)
            if bucket is None:
                bucket = self._by_path[key] = array(SLOTS)
            bucket.append(s)
        if claims:
            self._signal_claims.append(s)

    def _prompt_key(self, prompt: str | None) -> str | None:
        if prompt is None:
            return None
        key = ("prompt", prompt)
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = (prompt_key(prompt),)
        result: str | None = found[0]
        return result

    # --- the file index

    def put_file(self, path: str, entry: FileEntry | None) -> None:
        """The file-index entry of ``path`` as the store now holds it (None: no entry)."""
        # The path as the table holds it, where a record has it (a Markdown decision's document, a log).
        self._put_file(self._table.strings.get(path, path), None if entry is None else FileState.of(entry))

    def put_files(self, entries: Iterable[FileEntry]) -> None:
        """:meth:`put_file` of every entry of ``entries`` (a load: the store's whole index, each entry dropped once
        its state is made)."""
        strings = self._table.strings
        states = {strings.get(e.path, e.path): FileState.of(e) for e in entries}
        if self._fresh:  # nothing is indexed yet that a file could touch: the index alone takes them
            self._files.put_all(states)
            return
        for path, f in states.items():
            self._put_file(path, f)

    def _put_files_again(self, files: Mapping[str, FileState]) -> None:
        """A rebuild's :meth:`_put_file` of every entry it had (``_bulk``: nothing touched), the index made at once."""
        self._files.put_all(files)
        for path, f in files.items():
            self._later_file_times(path, f)

    def add_file_times(self, path: str, modified: Iterable[datetime], deleted: datetime | None) -> None:
        """The entry of ``path``, same ``created``, gained modifications and has this deletion time now.

        What a live log does every ingest pass: cheaper than :meth:`put_file` with the whole entry.
        """
        f = self._files.files[path]
        later = [t for t in f.add(modified) if t > self.at]
        if deleted is not None and deleted != f.deleted and deleted > self.at:
            later.append(deleted)
        f.deleted = deleted
        if not self._fresh:
            for t in later:
                heapq.heappush(self._file_times, (t, path))
            if not self._bulk:
                self._touch_path(path, {f.created})

    def _put_file(self, path: str, f: FileState | None) -> None:
        old = self._files.put(path, f)
        if f is not None and not self._fresh:
            self._later_file_times(path, f)
        if not self._fresh and not self._bulk:
            self._touch_path(path, {e.created for e in (old, f) if e is not None})

    def _later_file_times(self, path: str, f: FileState) -> None:
        """Queue the times of ``f`` after T (created, deleted, modified): the model learns of each when it comes."""
        later = [t for t in (f.created, f.deleted) if t is not None and t > self.at]
        at_us = to_us(self.at)
        for us in reversed(f.modified):  # ascending: only the tail can lie after T
            if us <= at_us:
                break
            later.append(from_us(us))
        for t in later:
            heapq.heappush(self._file_times, (t, path))

    def put_links(self, links: Links) -> None:
        """The symlinks inside the root as the store now holds them. A change re-files every decision naming a path
        under the file it now names and re-evaluates what those paths decide (rare: a link made, re-pointed or
        removed)."""
        new = LinkMap(links)
        if new == self._files.links:
            return
        named = list(dict.fromkeys(s for bucket in self._by_path.values() for s in bucket))
        self._files.links = new
        self._by_path = {}
        for s in named:
            for key in self._path_keys(self._table.event(s)):
                self._by_path.setdefault(key, array(SLOTS)).append(s)
        if not self._fresh and not self._bulk:
            self._touch_relinked(named)

    def _path_key(self, path: str) -> str:
        """Where a decision naming ``path`` is filed: the canonical path it names (itself if it leaves the root)."""
        return self._files.links.resolve(path) or path

    def file_state(self, path: str) -> tuple[datetime, datetime | None] | None:
        """(created, deleted) of the model's entry for ``path`` (None: no entry)."""
        f = self._files.files.get(path)
        return None if f is None else (f.created, f.deleted)

    # --- RuleContext

    @property
    def checks(self) -> Mapping[tuple[str, str], CheckResult]:
        """The latest conclusive check per target not older than max_age (a view; built per use so the model
        holds no reference to itself: the daemon freezes it out of the garbage collector)."""
        return CurrentChecks(self.latest_checks, self.at, self.config.scoring.check_max_age)

    def _decision_slots(self, agent: str, after: datetime, until: datetime) -> Sequence[int]:
        """The slots of the agent's decisions with ``after < ts ≤ until`` (and ≤ T), in key order."""
        a = self._agents.get(agent)
        if a is None:
            return ()
        lo, hi = a.between(to_us(after), to_us(min(until, self.at)), self._table.ts)
        return a.events[lo:hi]

    def agent_decisions_between(self, agent: str, after: datetime, until: datetime) -> Sequence[Event]:
        """The agent's decisions with ``after < ts ≤ until`` (and ≤ T), in (ts, read order)."""
        t = self._table
        return [t.event(s) for s in self._decision_slots(agent, after, until)]

    def thread_decisions_between(self, agent: str, thread: str | None, after: datetime,
                                 until: datetime) -> Sequence[Event]:
        """:meth:`agent_decisions_between` in ``thread`` only (None: those with no thread), an Event made only for
        those (a reply window holds dozens of the agent's decisions, seldom more than one of the thread)."""
        t = self._table
        k = 0 if thread is None else t.threads.find(thread)
        if k == EMPTY:
            return ()
        column = t.thread
        return [t.event(s) for s in self._decision_slots(agent, after, until) if column[s] == k]

    def state_change_between(self, after: datetime, until: datetime) -> bool:
        """True iff a visible state-change event has ``after < ts ≤ until``."""
        times = self._state_times
        i = bisect.bisect_right(times, to_us(after))
        return i < len(times) and times[i] <= to_us(until)

    def exists(self, path: str, t: datetime) -> bool:
        """``exists(p, t)`` over the index as known at T (scorers/lookups.py)."""
        return self._files.exists(path, t, self.at)

    def changed_in(self, path: str, a: datetime, b: datetime) -> bool:
        """True iff ``path`` was created, modified or deleted in ``(a, b]``, as known at T."""
        return self._files.changed_in(path, a, b, self.at)

    def created_matching(self, glob: str, a: datetime, b: datetime, exclude: str | None) -> list[str]:
        """Indexed files that ``glob`` matches under some name, created in ``(a, b]`` (and ≤ T), other than the file
        ``exclude`` names; their canonical paths, sorted."""
        return self._files.created_matching(glob, a, b, exclude, self.at)

    def previous_same_prompt(self, d: Event) -> Event | None:
        """The latest earlier decision of the same agent with the same prompt key."""
        if d.prompt is None:
            return None  # no prompt, no key (most decisions: answered without a lookup)
        key = self._prompt_key(d.prompt)
        group = None if key is None else self._prompts.get((d.agent, key))
        if not group:
            return None
        t = self._table
        i = t.bisect_left(group, (to_us(d.ts), d.path, d.generation, d.line or 0))
        return t.event(group[i - 1]) if i > 0 else None

    def _next_same_prompt(self, s: int) -> int | None:
        """The next decision of the agent of ``s`` with its prompt key, after it (whether or not it is still
        indexed)."""
        t = self._table
        key = self._prompt_key(t.prompt(s))
        group = None if key is None else self._prompts.get((t.agent(s), key))
        if not group:
            return None
        j = bisect.bisect_right(group, t.key(s), key=t.key)
        return group[j] if j < len(group) else None

    def current_down_labels(self, decision_id: str) -> list[Label]:
        """Each reviewer's latest visible label on the decision, where it is ``down``, by reviewer."""
        held = self._label_columns.visible(decision_id)
        return [] if held is None else self._label_columns.current_down(held)
