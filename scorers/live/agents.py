"""Each agent's visible decisions as the model keeps them: slots in (ts, read order), with their cached counts, and
the sorted columns of slots every index of the model is made of.

A column of slots is sorted by :meth:`~scorers.live.table.Table.key` (time, then read order): found by bisection on
the table's own columns (``key=``), with no key object held per slot.
"""

from __future__ import annotations

import bisect
from array import array
from collections import Counter
from collections.abc import Iterable

from scorers.live.base import SLOTS
from scorers.live.table import Table

#: In a column of times: none.
NONE = -(2**63)


def find(slots: array[int], s: int, t: Table) -> int | None:
    """Where ``s`` is in ``slots`` (sorted by the table's key), or None."""
    key = t.key(s)
    i = t.bisect_left(slots, key)
    while i < len(slots):  # past any slot of an equal key (two decisions of one document at one time)
        if slots[i] == s:
            return i
        if t.key(slots[i]) != key:
            return None
        i += 1
    return None


def insert(slots: array[int], s: int, t: Table) -> int:
    """Put ``s`` into ``slots`` (sorted by the table's key) after every slot of a smaller or equal key when it sorts
    last (a live arrival, no search), else before the slots of an equal key; returns where."""
    key = t.key(s)
    i = len(slots) if not slots or t.key(slots[-1]) <= key else t.bisect_left(slots, key)
    slots.insert(i, s)
    return i


class Anchored:
    """One agent's decisions whose outcome of one window-dependent rule needs an earlier record inside the window
    (:attr:`~scorers.rule.Rule.reaches_back`): a window whose edge passed that record's time takes their counts
    back out when it sums. Times are microseconds."""

    __slots__ = ("contributions", "decisions", "held", "needs", "sorted_times")

    def __init__(self) -> None:
        #: Per decision (aligned with Agent.events): 1 when it needs a time inside the window (a byte, not the time:
        #: most decisions need none, and the time is beside the decision in ``needs``).
        self.held = bytearray()
        self.sorted_times: array[int] = array("q")
        #: The decisions with a time, in (ts, read order), and beside each its time (``needs``) and the position of
        #: (passed, counted, pending, false gaps) in the model's contributions (``contributions``): what a window
        #: whose edge passed that time takes back out, without finding the decision's position.
        self.decisions: array[int] = array(SLOTS)
        self.needs: array[int] = array("q")
        self.contributions: array[int] = array("i")

    def need(self, t: Table, s: int, i: int) -> int:
        """The time the decision ``s`` (at ``i``) needs inside the window (NONE: none)."""
        if not self.held[i]:
            return NONE
        j = find(self.decisions, s, t)
        assert j is not None
        return self.needs[j]

    def set(self, t: Table, s: int, i: int, need: int, contribution: int, merged: array[int] | None) -> None:
        """The decision ``s`` at ``i`` now needs ``need`` (NONE: nothing) inside the window for ``contribution`` to
        count (``merged``: the agent's times of every such rule, when it has more than this one)."""
        if self.held[i]:
            j = find(self.decisions, s, t)
            assert j is not None
            old = self.needs[j]
            del self.sorted_times[bisect.bisect_left(self.sorted_times, old)]
            if merged is not None:
                del merged[bisect.bisect_left(merged, old)]
            del self.decisions[j], self.needs[j], self.contributions[j]
        if need != NONE:
            bisect.insort(self.sorted_times, need)
            if merged is not None:
                bisect.insort(merged, need)
            j = insert(self.decisions, s, t)  # a first evaluation sets them in (ts, read order): the end, no search
            self.needs.insert(j, need)
            self.contributions.insert(j, contribution)
        self.held[i] = need != NONE


class Agent:
    """One agent's visible decisions in (ts, read order), with their cached counts."""

    __slots__ = ("anchor_times", "anchored", "awaiting", "counts", "events", "label_slots", "labelled", "merged",
                 "prefix", "tail", "tail_key", "version")

    def __init__(self, zero: tuple[int, ...], anchored: int, follow_ups: int, counts: str = "H") -> None:
        self.events: array[int] = array(SLOTS)
        #: Per decision: the position of its counts in the model's counts table ((passed, counted, pending) per rule,
        #: then its false gaps: see scorers/live/plan.py); two bytes each while the table is that small (``counts``).
        self.counts: array[int] = array(counts)
        #: Per window-dependent rule, the decisions whose outcome needs an earlier record inside the window.
        self.anchored = tuple(Anchored() for _ in range(anchored))
        #: Their times, all rules together, sorted: how many a window's edge has passed is one bisection. With one
        #: such rule, its own column; with several, a column of its own kept beside theirs (``merged``).
        self.anchor_times: array[int] = self.anchored[0].sorted_times if anchored == 1 else array("q")
        self.merged = self.anchor_times if anchored > 1 else None
        #: Column sums of the first ``k * BLOCK`` decisions' counts at ``prefix[k * columns:(k + 1) * columns]``, for
        #: the leading k kept here (k = 0 always; sums.py).
        self.prefix: array[int] = array("q", zero)
        #: This agent's labelled decisions, and beside each the slot of its latest visible label (a reply can matter
        #: until a rule's reply horizon after its time; the model's HeldLabels has it).
        self.labelled: array[int] = array(SLOTS)
        self.label_slots: array[int] = array(SLOTS)
        #: Per rule reading follow-ups: the decisions waiting for one, in (ts, read order).
        self.awaiting: tuple[array[int], ...] = tuple(array(SLOTS) for _ in range(follow_ups))
        self.version = 0
        #: Column sums of the decisions after the last whole block, for (version, number of decisions).
        self.tail: tuple[int, ...] = zero
        self.tail_key: tuple[int, int] = (-1, -1)

    def index(self, s: int, t: Table) -> int | None:
        """Where ``s`` is in :attr:`events`, or None when it is not there."""
        return find(self.events, s, t)

    def between(self, after: int, until: int, ts: array[int]) -> tuple[int, int]:
        """The slice of decisions with ``after < ts ≤ until`` (microseconds)."""
        events, at = self.events, ts.__getitem__
        return bisect.bisect_right(events, after, key=at), bisect.bisect_right(events, until, key=at)

    def labelled_slot(self, s: int) -> int | None:
        """The slot of the latest visible label on the decision ``s`` (None: it has none filed here)."""
        try:
            return self.label_slots[self.labelled.index(s)]
        except ValueError:
            return None

    def set_labelled(self, s: int, label: int) -> None:
        """The latest visible label on the decision ``s`` is in slot ``label``."""
        try:
            self.label_slots[self.labelled.index(s)] = label
        except ValueError:
            self.labelled.append(s)
            self.label_slots.append(label)

    def drop_labelled(self, s: int) -> None:
        """The decision ``s`` is no longer filed as labelled here."""
        try:
            k = self.labelled.index(s)
        except ValueError:
            return
        del self.labelled[k], self.label_slots[k]


def drop_times(times: array[int], drop: list[int]) -> None:
    """Take ``drop`` (a multiset) out of the sorted ``times``, in one pass over the part up to its latest."""
    if not drop:
        return
    left = Counter(drop)
    k = bisect.bisect_right(times, max(drop))
    kept = array(times.typecode)
    for x in times[:k]:
        if left[x]:
            left[x] -= 1
        else:
            kept.append(x)
    assert not +left, "a time to drop was not held"
    times[:k] = kept


def drop_slots(slots: array[int], gone: set[int], until: int, ts: array[int], *beside: array[int]) -> None:
    """Take the slots in ``gone``, all dated up to ``until``, out of ``slots`` sorted by time (and the entries of each
    column ``beside`` aligned with them)."""
    k = bisect.bisect_right(slots, until, key=ts.__getitem__)
    if any(s in gone for s in slots[:k]):
        keep = [i for i in range(k) if slots[i] not in gone]
        for aligned in beside:
            aligned[:k] = array(aligned.typecode, [aligned[i] for i in keep])
        slots[:k] = array(slots.typecode, [slots[i] for i in keep])


def without(slots: Iterable[int], gone: set[int]) -> array[int]:
    """A column of ``slots`` but those in ``gone``."""
    return array(SLOTS, [s for s in slots if s not in gone])
