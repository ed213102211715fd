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
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Protocol

from collectors.citations import PATH, Citation, normalise_path
from collectors.records import CheckResult, Event, Label, Records
from collectors.statedir import glob_regex
from scorers.lookups import (
    FileIndex,
    any_between,
    current_checks,
    current_labels,
    down_labels,
    previous_in,
    sort_key,
)
from scorers.spec import ScoringConfig


def prompt_key(prompt: str | None) -> str | None:
    """SHA-256 of the prompt lower-cased with white space folded; None when there is no prompt."""
    if prompt is None:
        return None
    folded = " ".join(prompt.lower().split())
    if not folded:
        return None
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()


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

    def thread_decisions_between(self, agent: str, thread: str | None, after: datetime,
                                 until: datetime) -> Sequence[Event]:
        """:meth:`agent_decisions_between` in ``thread`` only (None: those with no thread)."""

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


class Context:
    """Indexes over the records at time ``at``; shared by all six component rules (the lookups themselves are
    scorers/lookups.py's, which the live model answers with too)."""

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
        self.files = FileIndex.of(records.files, records.links)
        self.checks = current_checks(records.checks, at, config.scoring.check_max_age)
        self.labels = self._current_labels(records.labels)
        #: Outcomes that do not depend on the window width, shared by every window of this evaluation.
        self.outcomes: dict[tuple[int, str], Any] = {}

    def is_decision(self, e: Event) -> bool:
        """Heartbeat events of a decision kind, and every brief and finding (Markdown, no line)."""
        return e.line is None or e.kind in self.decision_kinds

    def _current_labels(self, labels: Iterable[Label]) -> dict[str, list[Label]]:
        """Each reviewer's current label per decision (labels after T are not known yet)."""
        by_decision: dict[str, list[Label]] = defaultdict(list)
        for label in labels:
            if label.ts <= self.at:
                by_decision[label.decision].append(label)
        return {d: current_labels(by_decision[d]) for d in sorted(by_decision)}

    # --- lookups used by the component rules

    def agent_decisions_between(self, agent: str, after: datetime, until: datetime) -> list[Event]:
        """The agent's decisions with ``after < ts ≤ until`` (and ≤ T), in (ts, read order)."""
        times = self._agent_times.get(agent, [])
        lo = bisect.bisect_right(times, after)
        hi = bisect.bisect_right(times, min(until, self.at))
        return self.by_agent[agent][lo:hi]

    def thread_decisions_between(self, agent: str, thread: str | None, after: datetime,
                                 until: datetime) -> list[Event]:
        """:meth:`agent_decisions_between` in ``thread`` only (None: those with no thread)."""
        return [e for e in self.agent_decisions_between(agent, after, until) if e.thread == thread]

    def state_change_between(self, after: datetime, until: datetime) -> bool:
        """True iff a state-change event has ``after < ts ≤ until``."""
        return any_between(self.state_change_times, after, until)

    def exists(self, path: str, t: datetime) -> bool:
        """``exists(p, t)`` of spec 1.4 over the index as known at T; ``..`` and ``/`` never exist, nor does a path
        through a symlink that leaves the root (the others name their target's entry: spec 1)."""
        return self.files.exists(path, t, self.at)

    def changed_in(self, path: str, a: datetime, b: datetime) -> bool:
        """True iff the file ``path`` names was created, modified or deleted in ``(a, b]`` (as known at T)."""
        return self.files.changed_in(path, a, b, self.at)

    def created_matching(self, glob: str, a: datetime, b: datetime, exclude: str | None) -> list[str]:
        """Indexed files that ``glob`` matches under some name, created in ``(a, b]``, other than the file
        ``exclude`` names; their canonical paths."""
        return self.files.created_matching(glob, a, b, exclude, self.at)

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
        return None if key is None else previous_in(self.prompt_history.get((d.agent, key), []), d)

    def current_down_labels(self, decision_id: str) -> list[Label]:
        """The current ``down`` labels on a decision."""
        current = self.labels.get(decision_id)
        return down_labels(current) if current else []


def paths_of(d: Event) -> list[str]:
    """``P`` of spec 3.4: the normalised ``subject`` paths plus the ``path`` citations, de-duplicated."""
    subject, citations = d.subject, d.citations  # each read once: a live model's record reads them through properties
    if not subject and not citations:
        return []
    paths = [normalise_path(s) for s in subject] if subject else []
    for c in citations:  # a plain loop: most decisions have a citation, few a path one
        if c.type == PATH:
            paths.append(c.target)
    return list(dict.fromkeys(paths)) if len(paths) > 1 else paths


def names_a_path(d: Event) -> bool:
    """True iff :func:`paths_of` ``d`` is not empty (without building it)."""
    return bool(d.subject) or any(c.type == PATH for c in d.citations)


def in_window(d: Event, at: datetime, width: timedelta) -> bool:
    """``T − W < d.ts ≤ T``."""
    return at - width < d.ts <= at


__all__ = ["Citation", "Context", "Records", "glob_regex", "in_window", "paths_of", "prompt_key", "sort_key"]
