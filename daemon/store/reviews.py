"""The review queue's events in the store (migration 012): written by an ingest pass, read back in rowid order."""

from __future__ import annotations

import json
from collections.abc import Iterable

from collectors.reviews import ReviewEvent, packed
from collectors.rfc3339 import from_us, to_us
from daemon.store.queries import Queries


class ReviewRows(Queries):
    """Typed writes and reads of ``review_events``."""

    def add_review_events(self, events: Iterable[ReviewEvent]) -> int:
        """Insert review events; replays (the same path, generation and line) are ignored. Returns how many were new."""
        cur = self.conn.executemany(
            "INSERT OR IGNORE INTO review_events (path, generation, line, id, ts_us, review, event, body)"
            " VALUES (?,?,?,?,?,?,?,?)",
            [(e.path, e.generation, e.line, e.id, to_us(e.ts), e.review, e.event,
              json.dumps(e.data, ensure_ascii=False)) for e in events],
        )
        return max(cur.rowcount, 0)

    def review_events_after(self, rowid: int) -> list[tuple[int, ReviewEvent]]:
        """(rowid, event) of the review events stored after ``rowid``, in rowid order; [] for a store an older
        honestyd wrote (opened read-only, so never migrated: it has no review events). Long lists among their fields
        (an opening's evidence) are held as text (:func:`~collectors.reviews.packed`): the daemon keeps them all."""
        if "review_events" not in self.tables():
            return []
        return [
            (r[0], ReviewEvent(r[4], from_us(r[5]), r[6], r[7], packed(json.loads(r[8])), r[1], r[3], r[2]))
            for r in self.conn.execute(
                "SELECT rowid, path, generation, line, id, ts_us, review, event, body FROM review_events"
                " WHERE rowid > ? ORDER BY rowid", (rowid,))
        ]
