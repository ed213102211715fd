"""The lookups the component rules make, written once for both evaluation paths.

:class:`~scorers.context.Context` (built per evaluation) and the live model (scorers/live/, kept up to date) hold
different indexes, but answer the rules' questions here: the file index as known at ``T`` through the symlinks
inside the root (a deletion after ``T`` is not known yet), each reviewer's current label, the latest conclusive check
of a target and its maximum age, the previous answer to a prompt.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any, Protocol, TypeVar

from collectors.citations import path_never_exists
from collectors.links import NO_LINKS, LinkMap, Links
from collectors.records import CheckResult, FileEntry, Label, Order
from collectors.rfc3339 import from_us, to_us


class Ordered(Protocol):
    """A record with a time and a read order (an Event, or the live model's stub of one)."""

    @property
    def ts(self) -> datetime: ...

    @property
    def order(self) -> Order: ...


def sort_key(e: Ordered) -> tuple[datetime, Order]:
    """The order decisions are kept in: time, then read order."""
    return (e.ts, e.order)


R = TypeVar("R", bound=Ordered)
_ts = attrgetter("ts")


def previous_in(group: Sequence[R], d: Ordered) -> R | None:
    """The last record of ``group`` (sorted by :func:`sort_key`) before ``d``."""
    # The records before d: those of an earlier time (one bisection by time alone, with no key built per step), then
    # those of d's time and an earlier read order, which follow them (searched only when the first of them is one).
    ts = d.ts
    i = bisect.bisect_left(group, ts, key=_ts)
    if i < len(group) and group[i].ts == ts and group[i].order < d.order:
        i = bisect.bisect_left(group, (ts, d.order), lo=i, key=sort_key)
    return group[i - 1] if i > 0 else None


def any_between(times: Sequence[datetime], after: datetime, until: datetime) -> bool:
    """True iff the sorted ``times`` hold one with ``after < t ≤ until``."""
    i = bisect.bisect_right(times, after)
    return i < len(times) and times[i] <= until


# --- labels


def supersedes_label(label: Label, prev: Label | None) -> bool:
    """True when ``label`` replaces ``prev`` as its reviewer's current label (later ts; equal ts: later read)."""
    return prev is None or (label.ts, label.order) >= (prev.ts, prev.order)


def current_labels(labels: Iterable[Label]) -> list[Label]:
    """Each reviewer's current label among ``labels`` (all on one decision, none after T), by reviewer."""
    current: dict[str, Label] = {}
    for label in labels:
        if supersedes_label(label, current.get(label.reviewer)):
            current[label.reviewer] = label
    return [current[r] for r in sorted(current)]


def down_labels(current: Iterable[Label]) -> list[Label]:
    """The ``down`` labels among a decision's current labels."""
    return [lb for lb in current if lb.value == "down"]


# --- checks


def supersedes_check(c: CheckResult, prev: CheckResult | None) -> bool:
    """True when ``c`` replaces ``prev`` as its target's latest check (later check; equal time: later stored)."""
    return prev is None or (c.checked_at, c.seq) >= (prev.checked_at, prev.seq)


def take_check(latest: dict[tuple[str, str], CheckResult], c: CheckResult) -> bool:
    """Make ``c`` (a check not after T) its target's latest in ``latest`` if it is conclusive and the latest one
    (inconclusive results are kept by the store but never used); True when it did."""
    if c.ok is None:
        return False
    key = (c.type, c.target)
    if supersedes_check(c, latest.get(key)):
        latest[key] = c
        return True
    return False


def check_expires(c: CheckResult, max_age: timedelta) -> datetime:
    """When ``c`` stops being current: ``T − max_age < checked_at`` holds for every T before this."""
    return c.checked_at + max_age


Checks = dict[tuple[str, str], CheckResult]


def current_checks(checks: Iterable[CheckResult], at: datetime, max_age: timedelta) -> Checks:
    """``RuleContext.checks`` at a fixed ``at``: the latest conclusive check per key not after ``at``, where it is
    still current (the pure evaluation's; the live model's T moves, so it keeps a :class:`CurrentChecks` view)."""
    latest: dict[tuple[str, str], CheckResult] = {}
    for c in checks:
        if c.checked_at <= at:
            take_check(latest, c)
    return {k: c for k, c in latest.items() if at < check_expires(c, max_age)}


def current_check(latest: Mapping[tuple[str, str], CheckResult], key: tuple[str, str], at: datetime,
                  max_age: timedelta) -> CheckResult | None:
    """The latest conclusive check of ``key`` among ``latest`` (none after ``at``) if it is still current at ``at``."""
    found = latest.get(key)
    return None if found is None or check_expires(found, max_age) <= at else found


class CurrentChecks(Mapping[tuple[str, str], CheckResult]):
    """``RuleContext.checks``: the latest conclusive check per (type, target) with ``T − max_age < checked_at ≤ T``,
    a view over the latest conclusive check per key among those not after T."""

    __slots__ = ("_at", "_latest", "_max_age")

    def __init__(self, latest: Mapping[tuple[str, str], CheckResult], at: datetime, max_age: timedelta) -> None:
        self._latest = latest
        self._at = at
        self._max_age = max_age

    def get(self, key: tuple[str, str], default: CheckResult | None = None) -> CheckResult | None:  # type: ignore[override]
        """The current check of ``key``, or ``default`` (without raising: rules ask this of every citation)."""
        found = current_check(self._latest, key, self._at, self._max_age)
        return default if found is None else found

    def __getitem__(self, key: tuple[str, str]) -> CheckResult:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return (k for k in self._latest if self.get(k) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


# --- files


#: The modifications of a file that has none (most files): no array of its own.
NO_MODIFICATIONS: tuple[()] = ()
#: In a column of deletion times (a pickled :class:`FileIndex`): not deleted.
NOT_DELETED = -(2**63)


class FileState:
    """One file's index entry as the lookups read it: modifications as sorted microseconds (a busy log gains one
    per ingest pass: appended in place, found by bisection), :data:`NO_MODIFICATIONS` while there are none."""

    __slots__ = ("created", "deleted", "modified")

    def __init__(self, created: datetime, deleted: datetime | None,
                 modified: array[int] | tuple[()] = NO_MODIFICATIONS) -> None:
        self.created = created
        self.deleted = deleted
        self.modified = modified

    @classmethod
    def of(cls, entry: FileEntry) -> FileState:
        """The lookups' form of a stored entry."""
        if not entry.modified:
            return cls(entry.created, entry.deleted)
        return cls(entry.created, entry.deleted, array("q", sorted(to_us(t) for t in entry.modified)))

    def add(self, times: Iterable[datetime]) -> list[datetime]:
        """Record more modification times; returns them sorted."""
        added = sorted(times)
        us = [to_us(t) for t in added]
        if not us:
            return added
        modified = self.modified
        if isinstance(modified, array) and modified:
            if us[0] <= modified[-1]:
                self.modified = array("q", sorted({*modified, *us}))  # a batch pass may date a change earlier
            else:
                modified.extend(us)
        else:
            self.modified = array("q", us)
        return added

    def drop_modified(self, until_us: int) -> None:
        """Forget the modifications up to ``until_us`` (microseconds)."""
        modified = self.modified
        if isinstance(modified, array) and modified:
            del modified[:bisect.bisect_right(modified, until_us)]
            if not modified:
                self.modified = NO_MODIFICATIONS


class FileIndex:
    """The file index by canonical path, with the symlinks inside the root: ``exists``, ``changed_in`` and
    ``created_matching`` of spec 1.4 and 3.4 as known at ``at`` (nothing after it is known: not a file created, nor
    a modification or a deletion). A path names its target's entry through the links."""

    __slots__ = ("created_paths", "created_us", "files", "links")

    def __init__(self, links: LinkMap = NO_LINKS) -> None:
        self.files: dict[str, FileState] = {}
        #: Every entry's creation time (microseconds) and canonical path, sorted by (created, path), in two aligned
        #: columns (no tuple per file): the files created in a span, by bisection.
        self.created_us: array[int] = array("q")
        self.created_paths: list[str] = []
        self.links = links

    def __getstate__(self) -> tuple[Any, ...]:
        # Columns, not an object per file: unpickling a FileState each (its reduce's tuple and dict, its datetimes'
        # bytes and tuples) keeps every such transient in the unpickler's memo until the end, then frees them among
        # what the model keeps (docs/performance.md, round 23).
        states = self.files.values()
        created = array("q", [to_us(f.created) for f in states])
        deleted = array("q", [NOT_DELETED if f.deleted is None else to_us(f.deleted) for f in states])
        return list(self.files), created, deleted, [f.modified for f in states], self.created_us, \
            self.created_paths, self.links

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        paths, created, deleted, modified, self.created_us, self.created_paths, self.links = state
        self.files = {path: FileState(from_us(c), None if d == NOT_DELETED else from_us(d), m)
                      for path, c, d, m in zip(paths, created, deleted, modified, strict=True)}

    @classmethod
    def of(cls, files: Mapping[str, FileEntry], links: Links) -> FileIndex:
        """An index of stored entries (keyed by canonical path) and symlinks."""
        index = cls(LinkMap(links))
        index.put_all({p: FileState.of(f) for p, f in files.items()})
        return index

    def put_all(self, states: Mapping[str, FileState | None]) -> None:
        """:meth:`put` of each entry of ``states`` (a load's or a rebuild's), the creation columns sorted once: an
        insertion each would move the columns' tails, a time quadratic in the files."""
        files = self.files
        for path, state in states.items():
            if state is None:
                files.pop(path, None)
            else:
                files[path] = state
        created = sorted((to_us(f.created), p) for p, f in files.items())
        self.created_us = array("q", [us for us, _ in created])
        self.created_paths = [p for _, p in created]

    def _created_at(self, us: int, path: str) -> int:
        """Where (``us``, ``path``) is, or goes, in the creation columns."""
        lo = bisect.bisect_left(self.created_us, us)
        hi = bisect.bisect_right(self.created_us, us, lo)
        return bisect.bisect_left(self.created_paths, path, lo, hi)

    def put(self, path: str, state: FileState | None) -> FileState | None:
        """Make ``state`` the entry of ``path`` (None: no entry); returns the entry it replaced."""
        old = self.files.pop(path, None)
        if old is not None:
            i = self._created_at(to_us(old.created), path)
            del self.created_us[i], self.created_paths[i]
        if state is not None:
            self.files[path] = state
            us, created_us, paths = to_us(state.created), self.created_us, self.created_paths
            if not created_us or us > created_us[-1] or (us == created_us[-1] and path > paths[-1]):
                created_us.append(us)  # the common case (entries come mostly in creation order): no search
                paths.append(path)
            else:
                i = self._created_at(us, path)
                created_us.insert(i, us)
                paths.insert(i, path)
        return old

    def entry(self, path: str, at: datetime) -> FileState | None:
        """The entry of the file ``path`` names (through the symlinks), if it was created by ``at``."""
        canonical = self.links.resolve(path)
        entry = None if canonical is None else self.files.get(canonical)
        return entry if entry is not None and entry.created <= at else None

    def exists(self, path: str, t: datetime, at: datetime) -> bool:
        """``exists(p, t)`` as known at ``at``; ``..`` and ``/`` never exist, nor does a path through a symlink that
        leaves the root."""
        if path_never_exists(path):
            return False
        entry = self.entry(path, at)
        if entry is None or entry.created > t:
            return False
        deleted = entry.deleted
        return deleted is None or deleted > at or deleted > t  # a deletion after ``at`` is not known yet

    def changed_in(self, path: str, a: datetime, b: datetime, at: datetime) -> bool:
        """True iff the file ``path`` names was created, modified or deleted in ``(a, b]``, as known at ``at``."""
        entry = self.entry(path, at)
        if entry is None:
            return False
        b = min(b, at)
        if a < entry.created <= b or (entry.deleted is not None and a < entry.deleted <= b):
            return True
        modified = entry.modified
        i = bisect.bisect_right(modified, to_us(a))  # the first modification after a
        return i < len(modified) and modified[i] <= to_us(b)

    def created_matching(self, glob: str, a: datetime, b: datetime, exclude: str | None, at: datetime) -> list[str]:
        """Indexed files that ``glob`` matches under some name, created in ``(a, b]`` (and by ``at``), other than the
        file ``exclude`` names; their canonical paths, sorted."""
        links = self.links
        own = None if exclude is None else links.resolve(exclude)
        lo = bisect.bisect_right(self.created_us, to_us(a))
        hi = bisect.bisect_right(self.created_us, to_us(min(b, at)))
        return sorted(p for p in self.created_paths[lo:hi] if p != own and links.matches(glob, p))
