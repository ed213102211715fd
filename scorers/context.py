"""The world as it stood at the evaluation time ``T``: what every component rule looks up.

Built once per evaluation from plain records. "Nothing after ``T`` exists" (spec, Time):
records, labels, files, file changes and checks after ``T`` are dropped here, so the
component rules never have to think about it.
"""

from __future__ import annotations

import bisect
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Protocol

from collectors.citations import PATH, Citation, normalise_path, path_never_exists
from collectors.links import LinkMap, Links
from collectors.records import CheckResult, Event, FileEntry, Label, Order
from collectors.statedir import glob_regex
from scorers.spec import ScoringConfig


@dataclass(frozen=True)
class Records:
    """Everything the scorers read: events and Markdown decisions, labels, the file index (keyed by canonical path)
    and the symlinks inside the root (see collectors/links.py), checks."""

    events: Sequence[Event]
    labels: Sequence[Label] = ()
    files: Mapping[str, FileEntry] = field(default_factory=dict)
    checks: Sequence[CheckResult] = ()
    links: Links = field(default_factory=dict)


def prompt_key(prompt: str | None) -> str | None:
    """SHA-256 of the prompt lower-cased with white space folded; None when there is no prompt."""
    if prompt is None:
        return None
    folded = " ".join(prompt.lower().split())
    if not folded:
        return None
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()


def _as_of(entry: FileEntry, at: datetime) -> FileEntry | None:
    """The index entry as it was known at ``at``: later changes and deletions are not yet seen."""
    if entry.created > at:
        return None
    deleted = entry.deleted if entry.deleted is not None and entry.deleted <= at else None
    modified = tuple(t for t in entry.modified if t <= at)
    return FileEntry(entry.path, entry.created, modified, deleted)


class RuleContext(Protocol):
    """What the six component rules read: :class:`Context` (built per evaluation) and the daemon's
    incremental ``scorers.live`` model both provide it, so one set of rules serves both.
    """

    at: datetime
    config: ScoringConfig

    @property
    def checks(self) -> Mapping[tuple[str, str], CheckResult]:
        """The latest conclusive check per (type, target) with ``T − max_age < checked_at ≤ T``."""

    def agent_decisions_between(self, agent: str, after: datetime, until: datetime) -> Sequence[Event]:
        """The agent's decisions with ``after < ts ≤ until`` (and ≤ T), in (ts, read order)."""

    def state_change_between(self, after: datetime, until: datetime) -> bool:
        """True iff a state-change event has ``after < ts ≤ until``."""

    def exists(self, path: str, t: datetime) -> bool:
        """``exists(p, t)`` of spec 1.4 over the index as known at T."""

    def changed_in(self, path: str, a: datetime, b: datetime) -> bool:
        """True iff ``path`` was created, modified or deleted in ``(a, b]`` (as known at T)."""

    def created_matching(self, glob: str, a: datetime, b: datetime, exclude: str | None) -> list[str]:
        """Indexed files matching ``glob`` created in ``(a, b]``, other than ``exclude``, sorted."""

    def previous_same_prompt(self, d: Event) -> Event | None:
        """The latest earlier decision of the same agent with the same prompt key."""

    def current_down_labels(self, decision_id: str) -> list[Label]:
        """The current ``down`` labels on a decision."""


class Ordered(Protocol):
    """A record with a time and a read order (an Event, or the live model's stub of one)."""

    @property
    def ts(self) -> datetime: ...

    @property
    def order(self) -> Order: ...


def sort_key(e: Ordered) -> tuple[datetime, Order]:
    """The order decisions are kept in: time, then read order."""
    return (e.ts, e.order)


def supersedes_label(label: Label, prev: Label | None) -> bool:
    """True when ``label`` replaces ``prev`` as its reviewer's current label (later ts; equal ts: later read)."""
    return prev is None or (label.ts, label.order) >= (prev.ts, prev.order)


def supersedes_check(c: CheckResult, prev: CheckResult | None) -> bool:
    """True when ``c`` replaces ``prev`` as its target's latest check (later check; equal time: later stored)."""
    return prev is None or (c.checked_at, c.seq) >= (prev.checked_at, prev.seq)


class Context:
    """Indexes over the records at time ``at``; shared by all six component rules."""

    def __init__(self, records: Records, at: datetime, config: ScoringConfig) -> None:
        self.at = at
        self.config = config
        self.decision_kinds = frozenset(config.decision_kinds)
        seen: set[str] = set()
        events: list[Event] = []
        # De-duplicate ids in read order among the records not after T; the first one stays.
        for e in sorted((e for e in records.events if e.ts <= at), key=lambda e: e.order):
            if e.id not in seen:
                seen.add(e.id)
                events.append(e)
        self.events = events
        self.decisions = sorted((e for e in events if self.is_decision(e)), key=sort_key)
        self.by_id = {d.id: d for d in self.decisions}
        state_kinds = frozenset(config.state_change_kinds)
        self.state_change_times = sorted(e.ts for e in events if e.kind in state_kinds)
        self.by_agent: dict[str, list[Event]] = defaultdict(list)
        for d in self.decisions:
            self.by_agent[d.agent].append(d)
        self._agent_times = {a: [d.ts for d in ds] for a, ds in self.by_agent.items()}
        self.files = {p: v for p, v in ((p, _as_of(f, at)) for p, f in records.files.items()) if v is not None}
        self.links = LinkMap(records.links)
        self.checks = self._latest_checks(records.checks)
        self.labels = self._current_labels(records.labels)
        #: Outcomes that do not depend on the window width, shared by every window of this evaluation.
        self.outcomes: dict[tuple[int, str], Any] = {}

    def is_decision(self, e: Event) -> bool:
        """Heartbeat events of a decision kind, and every brief and finding (Markdown, no line)."""
        return e.line is None or e.kind in self.decision_kinds

    def _latest_checks(self, checks: Iterable[CheckResult]) -> dict[tuple[str, str], CheckResult]:
        oldest = self.at - self.config.scoring.check_max_age
        latest: dict[tuple[str, str], CheckResult] = {}
        for c in checks:
            if c.ok is None or not oldest < c.checked_at <= self.at:
                continue
            key = (c.type, c.target)
            if supersedes_check(c, latest.get(key)):
                latest[key] = c
        return latest

    def _current_labels(self, labels: Iterable[Label]) -> dict[str, list[Label]]:
        """Each reviewer's latest label per decision (later ts; equal ts: later in read order)."""
        current: dict[tuple[str, str], Label] = {}
        for label in labels:
            if label.ts > self.at:
                continue
            key = (label.decision, label.reviewer)
            if supersedes_label(label, current.get(key)):
                current[key] = label
        by_decision: dict[str, list[Label]] = defaultdict(list)
        for (decision, _), label in sorted(current.items()):
            by_decision[decision].append(label)
        return by_decision

    # --- lookups used by the component rules

    def agent_decisions_between(self, agent: str, after: datetime, until: datetime) -> list[Event]:
        """The agent's decisions with ``after < ts ≤ until`` (and ≤ T), in (ts, read order)."""
        times = self._agent_times.get(agent, [])
        lo = bisect.bisect_right(times, after)
        hi = bisect.bisect_right(times, min(until, self.at))
        return self.by_agent[agent][lo:hi]

    def state_change_between(self, after: datetime, until: datetime) -> bool:
        """True iff a state-change event has ``after < ts ≤ until``."""
        i = bisect.bisect_right(self.state_change_times, after)
        return i < len(self.state_change_times) and self.state_change_times[i] <= until

    def exists(self, path: str, t: datetime) -> bool:
        """``exists(p, t)`` of spec 1.4 over the index as known at T; ``..`` and ``/`` never exist, nor does a path
        through a symlink that leaves the root (the others name their target's entry: spec 1)."""
        if path_never_exists(path):
            return False
        entry = self._entry(path)
        return entry is not None and entry.exists(t)

    def changed_in(self, path: str, a: datetime, b: datetime) -> bool:
        """True iff the file ``path`` names was created, modified or deleted in ``(a, b]``."""
        entry = self._entry(path)
        return entry is not None and entry.changed_in(a, b)

    def _entry(self, path: str) -> FileEntry | None:
        canonical = self.links.resolve(path)
        return None if canonical is None else self.files.get(canonical)

    def created_matching(self, glob: str, a: datetime, b: datetime, exclude: str | None) -> list[str]:
        """Indexed files that ``glob`` matches under some name, created in ``(a, b]``, other than the file
        ``exclude`` names; their canonical paths."""
        own = None if exclude is None else self.links.resolve(exclude)
        links = self.links
        return sorted(
            p for p, f in self.files.items() if p != own and a < f.created <= b and links.matches(glob, p)
        )

    @cached_property
    def prompt_history(self) -> dict[tuple[str, str], list[Event]]:
        """Decisions with a prompt grouped by (agent, prompt key), in (ts, read order)."""
        groups: dict[tuple[str, str], list[Event]] = defaultdict(list)
        for d in self.decisions:
            key = prompt_key(d.prompt)
            if key is not None:
                groups[(d.agent, key)].append(d)
        return groups

    def previous_same_prompt(self, d: Event) -> Event | None:
        """The latest earlier decision of the same agent with the same prompt key."""
        key = prompt_key(d.prompt)
        if key is None:
            return None
        group = self.prompt_history.get((d.agent, key), [])
        i = bisect.bisect_left(group, sort_key(d), key=sort_key)
        return group[i - 1] if i > 0 else None

    def current_down_labels(self, decision_id: str) -> list[Label]:
        """The current ``down`` labels on a decision."""
        return [lb for lb in self.labels.get(decision_id, []) if lb.value == "down"]


def paths_of(d: Event) -> list[str]:
    """``P`` of spec 3.4: the normalised ``subject`` paths plus the ``path`` citations, de-duplicated."""
    if not d.subject and not d.citations:
        return []
    paths = [normalise_path(s) for s in d.subject] + [c.target for c in d.citations if c.type == PATH]
    return list(dict.fromkeys(paths)) if len(paths) > 1 else paths


def in_window(d: Event, at: datetime, width: timedelta) -> bool:
    """``T − W < d.ts ≤ T``."""
    return at - width < d.ts <= at


__all__ = ["Citation", "Context", "Records", "glob_regex", "in_window", "paths_of", "prompt_key"]
