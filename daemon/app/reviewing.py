"""The running daemon's review queue: reviews opened after evaluations, by alerts, closed by reviewers; all of it
appended to ``reviews/honestyd.jsonl`` and read back from the store like any source.

The files are the source of truth. Each event is appended through :mod:`daemon.safefile` (a regular file inside
the root, never through a symlink, never blocking on a FIFO) and applied to the queue at once, as *pending*, so the
next evaluation does not open it again; the ingest pass that reads it back stores it (exactly once: its cursor moves
with its row), and the store's copy replaces the pending one (the same id). A restart folds the stored events into the
same queue (daemon/reviews/queue.py), and the opening rule (daemon/reviews/rule.py) opens nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from collectors.reviews import ReviewEvent, packed, parse_review_event
from collectors.rfc3339 import parse_ts
from daemon import safefile
from daemon.app.watching import Watching
from daemon.executors import run_in
from daemon.reviews import events as ev
from daemon.reviews.alertmanager import Alert, Notification, review_target
from daemon.reviews.queue import Queue, Review, ReviewRefused
from daemon.reviews.rule import Condition, Key, due, firing, standing
from daemon.reviews.views import changelog_entries
from daemon.snapshot import ReviewCounts, Snapshot
from daemon.store import Store

log = logging.getLogger("honestyd")

#: The review file honestyd appends to (a source of its own: collectors/sources.py).
REVIEWS_FILE = "reviews/honestyd.jsonl"
#: Pending events sort after every stored line of the same time (read order), in the order they were written.
_PENDING_LINE = 1 << 62
#: The longest note a close may carry, in characters.
MAX_NOTE = 4000


class Reviewing(Watching):
    """The queue, kept up with the store, and every write to it (see the module)."""

    # --- the queue, from the store

    async def _review_sync(self, reader: Store) -> bool:
        """Read the review events stored since the last sync (on the model's thread) and take them in (on the loop,
        where every other change to the queue is made); True iff any arrived."""
        if reader is not self._review_reader:  # a store rebuilt: its rowids start again
            self._review_reader, self._review_mark, self._review_events = reader, 0, []
        rows = await run_in(self.executors.model, reader.review_events_after, self._review_mark)
        if not rows or reader is not self._review_reader:
            return False
        self._review_mark = rows[-1][0]
        self._review_events += [e for _, e in rows]
        for _, e in rows:
            self._review_pending.pop(e.id, None)
        return True

    def _refold(self) -> None:
        self.queue = Queue.fold([*self._review_events, *self._review_pending.values()])

    def review_counts(self) -> ReviewCounts:
        """The queue as /metrics counts it, now."""
        oldest = self.queue.oldest_open()
        return ReviewCounts(self.queue.open_counts(), oldest.age(self.clock()) if oldest is not None else 0.0,
                            self._config.alerts.review_stale.total_seconds())

    def _publish_reviews(self) -> None:
        """A new snapshot with the queue's counts (a close or an alert changes them between evaluations)."""
        if self._snapshot is not None:
            self._snapshot = replace(self._snapshot, reviews=self.review_counts())

    # --- writing events

    async def _append_reviews(self, events: list[dict[str, Any]]) -> list[ReviewEvent]:
        """Append ``events`` in one write and apply them as pending; raises OSError (logged) when the file is refused.
        ``events`` is emptied once encoded: the events read back from their lines take their place, their evidence
        held as text as the store gives it (:func:`~collectors.reviews.packed`; a start that opens a review for each of
        80 agents held ~7 MB of it as dicts). Call under :attr:`_review_lock`."""
        if not events:
            return []
        encoded = [ev.encode(e) for e in events]
        events.clear()
        try:
            await run_in(self.executors.ingest, safefile.append, self._config.state_root, REVIEWS_FILE,
                         b"".join(line for line, _ in encoded))
        except OSError as exc:
            log.error("review event not written: %s: %s", exc.filename, exc.strerror)
            raise
        written = []
        for line, _ in encoded:
            parsed = parse_review_event(line[:-1], REVIEWS_FILE, _PENDING_LINE + self._pending_seq)
            self._pending_seq += 1
            assert isinstance(parsed, ReviewEvent), parsed  # built by daemon/reviews/events.py: always valid
            parsed = parsed._replace(data=packed(dict(parsed.data)))
            self._review_pending[parsed.id] = parsed
            written.append(parsed)
        self._refold()
        self._publish_reviews()  # /metrics counts what the API lists from here on, not after the changelog's write
        self._on_path(REVIEWS_FILE)
        await run_in(self.executors.model, self._write_changelog,
                     list(changelog_entries(self.queue, {e.id for e in written})))
        for e in written:
            log.info("review %s %s (%s)", e.review, e.event, e.data.get("agent") or e.data.get("reviewer") or
                     e.data.get("alertname"))
        return written

    def _lock_reviews(self) -> asyncio.Lock:
        if self._review_lock is None:
            self._review_lock = asyncio.Lock()
        return self._review_lock

    # --- after each evaluation: the opening rule

    async def _after_evaluation(self, snap: Snapshot) -> Snapshot:
        """Bring the queue up to date with the store, open the reviews now due, and return ``snap`` with the queue's
        counts. Never raises: the reviews it could not open are tried again at the next evaluation, and the snapshot
        is published whatever happened to the queue (a fault there must not hold back the scores)."""
        try:
            return await self._review_evaluation(snap)
        except Exception:  # logged whole; the scores go out, the queue catches up at the next evaluation
            log.exception("review queue not brought up to date after the evaluation")
            return snap

    async def _review_evaluation(self, snap: Snapshot) -> Snapshot:
        reader = self.reader
        if reader is not None:
            first = self._review_reader is None
            if await self._review_sync(reader) or first:
                self._refold()
                if first:  # entries a stop between an append and its changelog line left out
                    await run_in(self.executors.model, self._write_changelog, list(changelog_entries(self.queue)))
        async with self._lock_reviews():
            now = firing(snap)
            todo = due(now, self.queue, self._firing)
            failed: set[Key] = set()
            if todo:
                # The evidence is referenced from the openings alone: _append_reviews lets it go once written.
                opened = ev.openings(todo, self.queue, snap.at, await run_in(self.executors.model, self._failing, todo),
                                     at_start=self._firing is None)
                try:
                    await self._append_reviews(opened)
                except OSError:
                    failed = {c.key for c in todo}
            self._firing = frozenset(now) - failed
        return replace(snap, reviews=self.review_counts())

    def _failing(self, conditions: Sequence[Condition]) -> dict[Key, ev.Failed | None]:
        """Each condition's failing decisions (the evidence), from the model: each audit is let go before the next is
        built (a first start below the threshold opens a review for each agent at once)."""
        feed = self.keeper.feed
        out: dict[Key, ev.Failed | None] = {}
        for c in conditions:
            found = feed.agent_result(c.agent, c.window) if feed is not None else None
            out[c.key] = ev.failed_rows(found[1]) if found is not None else None
        return out

    # --- what reviewers and Alertmanager do

    async def close_review(self, review_id: str, reviewer: str, note: str) -> Review:
        """Close an open review with a note: the ``closed`` event appended, the queue and /metrics updated.

        Raises :class:`ReviewRefused` (no such review, closed already, a note too long) and OSError (the file
        refused, logged)."""
        if len(note) > MAX_NOTE:
            raise ReviewRefused(400, f"note longer than {MAX_NOTE} characters")
        async with self._lock_reviews():
            review = self.queue.get(review_id)
            if review is None:
                raise ReviewRefused(404, f"no review {review_id!r}")
            if not review.is_open:
                raise ReviewRefused(409, f"review {review_id} is closed already")
            await self._append_reviews([ev.closing(review_id, self.clock(), reviewer, note)])
            self._publish_reviews()
            closed = self.queue.get(review_id)
        assert closed is not None
        return closed

    async def label_reviews(self, decision: str, value: str, reviewer: str) -> None:
        """A label was written: record it on every open review that lists the decision (its progress). A refused
        file is logged; the label itself stands."""
        async with self._lock_reviews():
            reviews = [r for r in self.queue.listing("open") if decision in r.failed_ids()]
            events = [ev.labelling(r.id, self.clock(), decision, value, reviewer) for r in reviews]
            try:
                await self._append_reviews(events)
            except OSError:
                return

    async def alert_notification(self, notification: Notification) -> dict[str, Any]:
        """Record an Alertmanager notification: a firing honesty alert opens (or joins) its agent's review, a resolved
        one is recorded on it, any other alert is acknowledged and ignored. Raises OSError (the file refused)."""
        recorded, ignored, touched = 0, 0, []
        async with self._lock_reviews():
            for alert in notification.alerts:
                review = await self._record_alert(alert)
                if review is None:
                    ignored += 1
                else:
                    recorded += 1
                    touched.append(review)
            self._publish_reviews()
        return {"ok": True, "alerts": len(notification.alerts), "recorded": recorded, "ignored": ignored,
                "reviews": sorted(set(touched))}

    async def _record_alert(self, alert: Alert) -> str | None:
        """The id of the review ``alert`` was recorded on (opened if need be); None when it is ignored."""
        target = review_target(alert)
        if target is None:
            return None
        agent, reason = target
        fingerprint, starts = alert.fingerprint, alert.starts_at
        if alert.status == "resolved":
            held = [r for r in self.queue.reviews.values() if any(a.fingerprint == fingerprint for a in r.alerts)]
            review = max(held, key=lambda r: r.since) if held else self.queue.open_for(agent, reason)
        else:
            review = self.queue.open_for(agent, reason)
            if review is None:
                latest = self.queue.latest_for(agent, reason)
                if latest is not None and latest.has_alert(fingerprint, "firing", starts):
                    return None  # a repeat of the alert its review was closed with: not a new slip
                review = await self._open_for_alert(agent, reason, starts)
        if review is None:
            return None
        if not review.has_alert(fingerprint, alert.status, starts):
            await self._append_reviews([ev.alerting(review.id, self.clock(), alert.alertname, alert.status,
                                                    fingerprint, starts)])
        return review.id

    async def _open_for_alert(self, agent: str, reason: str, starts: str) -> Review | None:
        """Open (or reopen) the review of a firing alert with the evidence of the latest evaluation; None for an agent
        that evaluation has no sufficient dashboard score for (the alert is acknowledged and ignored)."""
        snap = self._snapshot
        c = standing(snap, agent, reason) if snap is not None else None
        if c is None:
            log.warning("alert for agent %r (%s) ignored: no score of it in the latest evaluation", agent, reason)
            return None
        failing = await run_in(self.executors.model, self._failing, [c])
        [opened] = ev.openings([c], self.queue, self.clock(), failing, at_start=False, by=ev.BY_ALERT,
                               since=parse_ts(starts))
        await self._append_reviews([opened])
        return self.queue.get(opened["review"])

    # --- what the HTTP API and the pages read

    def review_list(self, state: str | None = None) -> list[Review]:
        """Open reviews first, oldest first, then the closed ones (``state``: only ``open`` or ``closed`` ones)."""
        return self.queue.listing(state)

    def review(self, review_id: str) -> Review | None:
        """One review, with its evidence and history."""
        return self.queue.get(review_id)
