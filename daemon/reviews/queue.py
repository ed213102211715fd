"""The review queue, folded from its events (pure): the same events always make the same queue.

Events apply in the order of their ``ts``, ties broken by read order (path, generation, line), so a restart (which
reads the files again in read order) and a second reader see the same queue as the daemon that wrote it, whatever
order the lines arrived in. An event whose id was applied already is skipped (a file read twice is one set of
events); one that does not fit the review's state is skipped too: a second ``opened`` of an id, ``reopened`` of an
open review, ``closed`` of a closed one, anything about an unknown review (those lines are valid, and the file keeps
them; they change nothing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from collectors.reviews import Listed, ReviewEvent, entry_ids, listed


class ReviewRefused(Exception):
    """A change the queue refuses: ``status`` is the HTTP answer (404 no such review, 409 closed already, 400 bad)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Label(NamedTuple):
    """A 👍/👎 given to one of the review's decisions while the review was open."""

    value: str
    reviewer: str
    at: datetime


@dataclass(frozen=True)
class AlertSeen:
    """An Alertmanager notification recorded on the review: which alert, firing or resolved, since when."""

    alertname: str
    status: str
    fingerprint: str
    starts_at: str
    at: datetime


@dataclass
class Review:
    """One review: whose, why, the evidence gathered when it (last) opened, and what reviewers and alerts said.

    Built by :meth:`Queue.fold` only; a queue's reviews are not changed once it is built (a new queue is folded).
    """

    id: str
    agent: str
    reason: str
    opened_at: datetime
    since: datetime
    evidence: Mapping[str, Any]
    state: str = "open"
    closed_at: datetime | None = None
    closed_by: str | None = None
    note: str = ""
    rounds: int = 1
    labels: dict[str, Label] = field(default_factory=dict)
    alerts: list[AlertSeen] = field(default_factory=list)
    history: list[ReviewEvent] = field(default_factory=list)

    @property
    def is_open(self) -> bool:
        """True while no reviewer has closed it (since it last opened)."""
        return self.state == "open"

    def failed_ids(self) -> list[str]:
        """The ids of the decisions the evidence lists (those that failed a component in the window)."""
        failed = self.evidence.get("failed")
        if isinstance(failed, Listed):  # (as the store gives it: kept as text, with its ids)
            return list(failed.ids)
        return entry_ids(listed(failed))

    def progress(self) -> tuple[int, int]:
        """(labelled, listed): how many of the evidence's decisions a reviewer has labelled."""
        ids = self.failed_ids()
        return sum(1 for d in set(ids) if d in self.labels), len(set(ids))

    def age(self, now: datetime) -> float:
        """Seconds it has been open since it last opened (until its close, once closed); never negative."""
        end = self.closed_at if self.closed_at is not None and not self.is_open else now
        return max(0.0, (end - self.since).total_seconds())

    def has_alert(self, fingerprint: str, status: str, starts_at: str) -> bool:
        """True iff this notification (the same alert, status and start) is recorded already."""
        return any((a.fingerprint, a.status, a.starts_at) == (fingerprint, status, starts_at) for a in self.alerts)


def _text(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key, "")
    return value if isinstance(value, str) else ""


def _apply(reviews: dict[str, Review], e: ReviewEvent) -> bool:
    """Apply one event to the reviews; False when it does not fit (see the module)."""
    review = reviews.get(e.review)
    if e.event == "opened":
        if review is not None:
            return False
        reviews[e.review] = Review(e.review, e.data["agent"], e.data["reason"], e.ts, e.ts, e.data, history=[e])
        return True
    if review is None:
        return False
    if e.event == "reopened":
        if review.is_open:
            return False
        review.state, review.since, review.evidence = "open", e.ts, e.data
        review.closed_at, review.closed_by, review.note = None, None, ""
        review.rounds += 1
    elif e.event == "closed":
        if not review.is_open:
            return False
        review.state, review.closed_at, review.closed_by = "closed", e.ts, e.data["reviewer"]
        review.note = _text(e.data, "note")
    elif e.event == "labelled":
        review.labels[e.data["decision"]] = Label(e.data["value"], e.data["reviewer"], e.ts)
    else:  # alert
        seen = AlertSeen(e.data["alertname"], e.data["status"], _text(e.data, "fingerprint"),
                         _text(e.data, "starts_at"), e.ts)
        if review.has_alert(seen.fingerprint, seen.status, seen.starts_at):
            return False
        review.alerts.append(seen)
    review.history.append(e)
    return True


class Queue:
    """Every review, by id; build one with :meth:`fold`."""

    def __init__(self, reviews: Mapping[str, Review] | None = None) -> None:
        self.reviews: Mapping[str, Review] = dict(reviews or {})

    @classmethod
    def fold(cls, events: Iterable[ReviewEvent]) -> Queue:
        """The queue the events make, applied in (ts, read order), each id once (see the module)."""
        reviews: dict[str, Review] = {}
        applied: set[str] = set()
        for e in sorted(events, key=lambda e: (e.ts, e.path, e.generation, e.line)):  # then read order
            if e.id in applied:
                continue
            applied.add(e.id)
            _apply(reviews, e)
        return cls(reviews)

    def get(self, review_id: str) -> Review | None:
        """The review with this id, if any."""
        return self.reviews.get(review_id)

    def open_for(self, agent: str, reason: str) -> Review | None:
        """The open review of (agent, reason), if any (there is at most one: see daemon/reviews/rule.py)."""
        return next((r for r in self.reviews.values() if r.is_open and (r.agent, r.reason) == (agent, reason)), None)

    def keys(self, *, open_only: bool = False) -> set[tuple[str, str]]:
        """The (agent, reason) of every review, open or closed (``open_only``: of the open ones)."""
        return {(r.agent, r.reason) for r in self.reviews.values() if r.is_open or not open_only}

    def latest_for(self, agent: str, reason: str) -> Review | None:
        """The review of (agent, reason) that opened last, open or closed; None when there never was one."""
        found = [r for r in self.reviews.values() if (r.agent, r.reason) == (agent, reason)]
        return max(found, key=lambda r: (r.since, r.id)) if found else None

    def of_agent(self, agent: str) -> list[Review]:
        """The agent's open reviews, oldest first."""
        return sorted((r for r in self.reviews.values() if r.is_open and r.agent == agent),
                      key=lambda r: (r.since, r.id))

    def listing(self, state: str | None = None) -> list[Review]:
        """Open reviews first, oldest first; then the closed ones, most recently closed first (``state``: only the
        ``open`` or the ``closed`` ones)."""
        opened = sorted((r for r in self.reviews.values() if r.is_open), key=lambda r: (r.since, r.id))
        closed = sorted((r for r in self.reviews.values() if not r.is_open),
                        key=lambda r: (r.closed_at or r.since, r.id), reverse=True)
        return opened if state == "open" else closed if state == "closed" else opened + closed

    def open_counts(self) -> dict[str, int]:
        """Open reviews by agent, every agent that has a review listed (0 once all of its reviews are closed)."""
        counts: dict[str, int] = {}
        for r in self.reviews.values():
            counts[r.agent] = counts.get(r.agent, 0) + int(r.is_open)
        return counts

    def oldest_open(self) -> Review | None:
        """The review open the longest (since it last opened), if any."""
        opened = self.listing("open")
        return opened[0] if opened else None
