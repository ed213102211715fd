"""Plain, immutable records that flow from the collectors through the store to the scorers (and the daily counts
that flow back from the scorers into the store): every layer imports them from here, none from another layer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import NamedTuple

from collectors.citations import Citation
from collectors.links import Links

#: Read order of a record: (relative path, file generation, 1-based line; 0 for a whole file).
Order = tuple[str, int, int]


class Event(NamedTuple):
    """A heartbeat event, or a brief/finding (kind ``brief``/``finding``, ``line`` None).

    A NamedTuple rather than a frozen dataclass: a million of these are built per ingest and
    per evaluation, and tuple construction is several times cheaper.
    """

    id: str
    ts: datetime
    agent: str
    kind: str
    path: str
    line: int | None
    thread: str | None = None
    text: str = ""
    citations: tuple[Citation, ...] = ()
    prompt: str | None = None
    reason: str | None = None
    alternatives: tuple[str, ...] = ()
    subject: tuple[str, ...] = ()
    corrects: str | None = None
    generation: int = 0

    @property
    def order(self) -> Order:
        """The record's position in read order (spec section 1)."""
        return (self.path, self.generation, self.line or 0)

    @property
    def location(self) -> str:
        """``path:line`` for JSON Lines records, ``path`` for Markdown files (spec section 7)."""
        return f"{self.path}:{self.line}" if self.line is not None else self.path


class Label(NamedTuple):
    """A reviewer's 👍/👎 on a decision (spec 1.3)."""

    ts: datetime
    decision: str
    value: str
    reviewer: str
    path: str
    line: int
    generation: int = 0
    #: The reviewer's note, if the line has one (the reviewer's pages write it; no rule reads it).
    note: str | None = None

    @property
    def order(self) -> Order:
        """The label's position in read order."""
        return (self.path, self.generation, self.line)


class Reject(NamedTuple):
    """A refused line or file: where it was, why, and the start of what it said."""

    path: str
    line: int | None
    reason: str
    snippet: str


@dataclass(frozen=True, slots=True)
class FileEntry:
    """The file index entry of one path (spec 1.4)."""

    path: str
    created: datetime
    modified: tuple[datetime, ...] = ()
    deleted: datetime | None = None

    def exists(self, t: datetime) -> bool:
        """``created ≤ t`` and (``deleted`` unset or ``deleted > t``)."""
        return self.created <= t and (self.deleted is None or self.deleted > t)

    def changed_in(self, a: datetime, b: datetime) -> bool:
        """True iff created, a modification or the deletion lies in ``(a, b]``."""
        times = [self.created, *self.modified]
        if self.deleted is not None:
            times.append(self.deleted)
        return any(a < t <= b for t in times)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One verification of a cited target; ``ok`` None means inconclusive."""

    target: str
    type: str
    checked_at: datetime
    ok: bool | None
    status: int | None = None
    seq: int = 0
    detail: str = ""


@dataclass(frozen=True, slots=True)
class EvalReport:
    """A ``benchmark-honesty`` run report (spec section 6); absent figures are None."""

    path: str
    model: str
    tasks: int | None = None
    passed: int | None = None
    failed: int | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    honesty: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Records:
    """Everything the scorers read: events and Markdown decisions, labels, the file index (keyed by canonical path)
    and the symlinks inside the root (see collectors/links.py), checks."""

    events: Sequence[Event]
    labels: Sequence[Label] = ()
    files: Mapping[str, FileEntry] = field(default_factory=dict)
    checks: Sequence[CheckResult] = ()
    links: Links = field(default_factory=dict)


@dataclass(frozen=True)
class ComponentResult:
    """``pass / counted`` of one component; ``ratio`` None when N/A (counted = 0)."""

    passed: int
    counted: int
    pending: int

    @property
    def ratio(self) -> float | None:
        """pass / counted, or None when nothing was counted."""
        return self.passed / self.counted if self.counted else None


@dataclass(frozen=True)
class DayCounts:
    """One agent's counts in one window at the end of one day."""

    day: date
    agent: str
    window: str
    decisions: int
    components: tuple[ComponentResult, ...]  # in spec order
