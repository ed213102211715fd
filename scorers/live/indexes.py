"""The indexes the rules read, over the visible winners, and the model's answers to the rules' lookups.

Each agent's decisions in (ts, read order) with their cached counts (:class:`Agent`); the state-change times; the
answers to each prompt; the decisions by the paths they name; the file index and the symlinks. The lookups
themselves (:class:`~scorers.context.RuleContext`) are scorers/lookups.py's, as in the pure evaluation.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from collectors.links import LinkMap, Links
from collectors.records import CheckResult, Event, FileEntry, Label
from collectors.rfc3339 import from_us, to_us
from scorers.context import paths_of, prompt_key
from scorers.live.base import ModelState
from scorers.live.records import ByRecordId, Record, Stub, ts_of
from scorers.lookups import (
    CurrentChecks,
    FileState,
    any_between,
    previous_in,
    sort_key,
)


class Anchored:
    """One agent's decisions whose outcome of one window-dependent rule needs an earlier record inside the window
    (:attr:`~scorers.rule.Rule.reaches_back`): a window whose edge passed that record's time takes their counts
    back out when it sums."""

    __slots__ = ("contributions", "decisions", "needs", "sorted_times", "times")

    def __init__(self) -> None:
        #: Per decision (aligned with Agent.events): the time the window must hold for its outcome to count, or None.
        self.times: list[datetime | None] = []
        self.sorted_times: list[datetime] = []
        #: The decisions with a time, in (ts, read order), and beside each its time (``needs``) and (passed, counted,
        #: pending, false gaps) (``contributions``, tuples shared by the model): what a window whose edge passed that
        #: time takes back out, without finding the decision's position. Two lists, not one of 5-tuples: a tuple per
        #: decision would cost more than both.
        self.decisions: list[Event] = []
        self.needs: list[datetime] = []
        self.contributions: list[tuple[int, int, int, int]] = []

    def set(self, e: Event, i: int, t: datetime | None, contribution: tuple[int, int, int, int],
            merged: list[datetime] | None) -> None:
        """The decision ``e`` at ``i`` now needs ``t`` inside the window for ``contribution`` to count (``merged``: the
        agent's times of every such rule, when it has more than this one)."""
        old = self.times[i]
        if old is not None:
            del self.sorted_times[bisect.bisect_left(self.sorted_times, old)]
            if merged is not None:
                del merged[bisect.bisect_left(merged, old)]
            j = bisect.bisect_left(self.decisions, sort_key(e), key=sort_key)
            del self.decisions[j], self.needs[j], self.contributions[j]
        if t is not None:
            bisect.insort(self.sorted_times, t)
            if merged is not None:
                bisect.insort(merged, t)
            key, decisions = sort_key(e), self.decisions
            # A first evaluation sets them in (ts, read order): the end, without a search keyed per step.
            j = len(decisions) if not decisions or sort_key(decisions[-1]) < key else bisect.bisect_left(
                decisions, key, key=sort_key)
            decisions.insert(j, e)
            self.needs.insert(j, t)
            self.contributions.insert(j, contribution)
        self.times[i] = t


class Agent:
    """One agent's visible decisions in (ts, read order), with their cached counts."""

    __slots__ = ("anchor_times", "anchored", "awaiting", "counts", "events", "labelled", "merged", "prefix", "tail",
                 "tail_key", "version")

    def __init__(self, zero: tuple[int, ...], anchored: int, follow_ups: int) -> None:
        self.events: list[Event] = []
        #: Per decision: (passed, counted, pending) per rule, then its false gaps (see scorers/live/plan.py).
        self.counts: list[tuple[int, ...]] = []
        #: Per window-dependent rule, the decisions whose outcome needs an earlier record inside the window.
        self.anchored = tuple(Anchored() for _ in range(anchored))
        #: Their times, all rules together, sorted: how many a window's edge has passed is one bisection. With one
        #: such rule, its own list; with several, a list of its own kept beside theirs (``merged``).
        self.anchor_times: list[datetime] = self.anchored[0].sorted_times if anchored == 1 else []
        self.merged = self.anchor_times if anchored > 1 else None
        #: Column sums of ``counts[:k * BLOCK]`` at ``prefix[k * columns:(k + 1) * columns]``, for the leading k
        #: kept here (k = 0 always; sums.py). Flat machine integers.
        self.prefix = array("q", zero)
        #: Ids of this agent's labelled decisions → the slot of their latest visible label (a reply can matter until
        #: a rule's reply horizon after its time; the model's HeldLabels has it).
        self.labelled: dict[str, int] = {}
        #: Per rule reading follow-ups: the decisions waiting for one, in (ts, read order).
        self.awaiting: tuple[list[Event], ...] = tuple([] for _ in range(follow_ups))
        self.version = 0
        #: Column sums of the decisions after the last whole block, for (version, number of decisions).
        self.tail: tuple[int, ...] = zero
        self.tail_key: tuple[int, int] = (-1, -1)

    def index(self, e: Event) -> int | None:
        """Where ``e`` is in :attr:`events`, or None when it is not there."""
        i = bisect.bisect_left(self.events, sort_key(e), key=sort_key)
        return i if i < len(self.events) and self.events[i] is e else None

    def between(self, after: datetime, until: datetime) -> tuple[int, int]:
        """The slice of decisions with ``after < ts ≤ until``."""
        return bisect.bisect_right(self.events, after, key=ts_of), bisect.bisect_right(self.events, until, key=ts_of)


class Indexing(ModelState):
    """Winners into and out of the indexes; the file index; the lookups the rules make."""

    def _index(self, e: Record) -> None:
        """Add a visible winner to the indexes the rules read, and mark what it can change."""
        if e.kind in self._state_kinds:
            bisect.insort(self._state_times, e.ts)
            if not self._bulk:
                self._touch_state_change(e.ts)
        if isinstance(e, Stub) or not self._is_decision(e):
            return  # not a decision: in no other index
        plan = self.plan
        a = self._agents.get(e.agent)
        if a is None:
            a = self._agents[e.agent] = Agent(plan.zero, len(plan.anchored), len(plan.follow_ups))
        at_end = not a.events or sort_key(a.events[-1]) <= sort_key(e)  # the bulk load's case: no search
        i = len(a.events) if at_end else bisect.bisect_left(a.events, sort_key(e), key=sort_key)
        a.events.insert(i, e)
        a.counts.insert(i, plan.zero)
        for an in a.anchored:
            an.times.insert(i, None)
        self._changed(a, i)
        if plan.replies and e.id in self._labels:
            a.labelled[e.id] = self._label_columns.latest(self._labels[e.id])
        for (_, _, awaits), waiting in zip(plan.follow_ups, a.awaiting, strict=True):
            if awaits is None or awaits(e, self):
                bisect.insort(waiting, e, key=sort_key)
        key = self._prompt_key(e.prompt)
        if key is not None:
            bisect.insort(self._prompted_times, e.ts)
            group = self._prompts[(e.agent, key)]
            if not group or sort_key(group[-1]) <= sort_key(e):
                group.append(e)
            else:
                group.insert(bisect.bisect_left(group, sort_key(e), key=sort_key), e)
        self._index_paths(e, add=True)
        if not self._bulk:  # a rebuild marks them all at once (_all_dirty)
            self._dirty[id(e)] = e
            self._touch_neighbours(e, a)

    def _index_last(self, e: Record) -> None:
        """:meth:`_index` in a rebuild (``_bulk``), for a winner that sorts after every one indexed (by
        :func:`~scorers.lookups.sort_key`): it goes at the end of every index, no search, and into the path and signal
        maps later (:meth:`_index_every_path`, from :meth:`~scorers.live.sums.Summing.rerun_all`). No prefix sum is
        dropped: the rebuild's agents hold none yet (their first sums come after the rules ran for every decision)."""
        kind = e.kind
        if kind in self._state_kinds:
            self._state_times.append(e.ts)
        if isinstance(e, Stub) or (e.line is not None and kind not in self._decision_kinds):
            return  # not a decision: in no other index
        plan = self.plan
        a = self._agents.get(e.agent)
        if a is None:
            a = self._agents[e.agent] = Agent(plan.zero, len(plan.anchored), len(plan.follow_ups))
            a.version = next(self._seq)
        a.events.append(e)
        a.counts.append(plan.zero)
        for an in a.anchored:
            an.times.append(None)
        if plan.replies and e.id in self._labels:
            a.labelled[e.id] = self._label_columns.latest(self._labels[e.id])
        if plan.follow_ups:
            for (_, _, awaits), waiting in zip(plan.follow_ups, a.awaiting, strict=True):
                if awaits is None or awaits(e, self):
                    waiting.append(e)
        prompt = e.prompt
        if prompt is not None:
            key = self._prompt_key(prompt)
            if key is not None:
                self._prompted_times.append(e.ts)
                self._prompts[(e.agent, key)].append(e)
        # Not filed by path here: no rule reads those maps, so the rebuild files every decision once its rules run
        # elsewhere (_index_every_path), while that work goes on.

    def _unindex(self, e: Record) -> None:
        """Take a winner out of the indexes, and mark what its going can change."""
        if e.kind in self._state_kinds:
            del self._state_times[bisect.bisect_left(self._state_times, e.ts)]
            self._touch_state_change(e.ts)
        if isinstance(e, Stub) or not self._is_decision(e):
            return
        plan = self.plan
        a = self._agents[e.agent]
        i = a.index(e)
        assert i is not None
        for an in a.anchored:
            an.set(e, i, None, (0, 0, 0, 0), a.merged)
            del an.times[i]
        del a.events[i], a.counts[i]
        self._changed(a, i)
        a.labelled.pop(e.id, None)
        for (_, _, awaits), waiting in zip(plan.follow_ups, a.awaiting, strict=True):
            if awaits is None or awaits(e, self):
                del waiting[bisect.bisect_left(waiting, sort_key(e), key=sort_key)]
        key = self._prompt_key(e.prompt)
        if key is not None:
            del self._prompted_times[bisect.bisect_left(self._prompted_times, e.ts)]
            group = self._prompts[(e.agent, key)]
            del group[bisect.bisect_left(group, sort_key(e), key=sort_key)]  # its successor: _touch_neighbours
            if not group:
                del self._prompts[(e.agent, key)]
        self._index_paths(e, add=False)
        self._dirty.pop(id(e), None)
        self._touch_neighbours(e, a)
        if not a.events:
            self._forget_agent(e.agent)

    def _forget_agent(self, agent: str) -> None:
        """An agent with no visible decision left: it goes, and its cached results with it."""
        del self._agents[agent]
        for name, _ in self.config.scoring.windows:
            self._results.pop((agent, name), None)

    def _index_paths(self, e: Event, *, add: bool) -> None:
        plan = self.plan
        if plan.by_path:
            for p in paths_of(e):
                key = self._path_key(p)
                if add:
                    self._by_path[key][e.id] = e
                else:
                    bucket = self._by_path.get(key)
                    if bucket is not None and bucket.get(e.id) is e:
                        del bucket[e.id]
                        if not bucket:
                            del self._by_path[key]
        for selects in plan.signals:
            if selects(e, self):
                if add:
                    self._signal_claims[e.id] = e
                elif self._signal_claims.get(e.id) is e:
                    del self._signal_claims[e.id]
                break

    def _index_every_path(self) -> None:
        """File every visible decision afresh by the paths it names and the signals it claims (a rebuild's
        :meth:`_index_last` leaves them out: only the model's invalidation reads those maps, never a rule)."""
        self._by_path = defaultdict(ByRecordId)
        self._signal_claims = ByRecordId()
        for a in self._agents.values():
            for e in a.events:
                self._index_paths(e, add=True)

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
        # The path as a record holds it, where one does (a Markdown decision's document, a log): not a copy per file.
        self._put_file(self._shared.get(path, path), None if entry is None else FileState.of(entry))

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
            later = [t for t in (f.created, f.deleted) if t is not None and t > self.at]
            at_us = to_us(self.at)
            for us in reversed(f.modified):  # ascending: only the tail can lie after T
                if us <= at_us:
                    break
                later.append(from_us(us))
            for t in later:
                heapq.heappush(self._file_times, (t, path))
        if not self._fresh and not self._bulk:
            self._touch_path(path, {e.created for e in (old, f) if e is not None})

    def put_links(self, links: Links) -> None:
        """The symlinks inside the root as the store now holds them. A change re-files every decision naming a path
        under the file it now names and re-evaluates what those paths decide (rare: a link made, re-pointed or
        removed)."""
        new = LinkMap(links)
        if new == self._files.links:
            return
        named = {e.id: e for bucket in self._by_path.values() for e in bucket.values()}
        self._files.links = new
        self._by_path = defaultdict(ByRecordId)
        for e in named.values():
            for p in paths_of(e):
                self._by_path[self._path_key(p)][e.id] = e
        if not self._fresh and not self._bulk:
            self._touch_relinked(named.values())

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

    def agent_decisions_between(self, agent: str, after: datetime, until: datetime) -> Sequence[Event]:
        """The agent's decisions with ``after < ts ≤ until`` (and ≤ T), in (ts, read order)."""
        a = self._agents.get(agent)
        if a is None:
            return ()
        lo, hi = a.between(after, min(until, self.at))
        return a.events[lo:hi]

    def state_change_between(self, after: datetime, until: datetime) -> bool:
        """True iff a visible state-change event has ``after < ts ≤ until``."""
        return any_between(self._state_times, after, until)

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
        group = self._prompt_group(d)
        return previous_in(group, d) if group else None

    def _next_same_prompt(self, d: Event) -> Event | None:
        """The next decision of d's agent with d's prompt key, after d (whether or not d is still indexed)."""
        group = self._prompt_group(d)
        j = bisect.bisect_right(group, sort_key(d), key=sort_key)
        return group[j] if j < len(group) else None

    def _prompt_group(self, d: Event) -> list[Event]:
        """The visible decisions of d's agent with d's prompt key, in (ts, read order); none without a key."""
        key = self._prompt_key(d.prompt)
        return [] if key is None else self._prompts.get((d.agent, key), [])

    def current_down_labels(self, decision_id: str) -> list[Label]:
        """Each reviewer's latest visible label on the decision, where it is ``down``, by reviewer."""
        held = self._labels.get(decision_id)
        return [] if held is None else self._label_columns.current_down(held)

