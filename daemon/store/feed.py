"""What the daemon's live model reads to keep up with the store: the marks, the change feed, the rows since a mark.

The model loads the store once (:meth:`Feed.events_up_to` and the rest up to :meth:`Feed.feed_marks`), then applies
what was committed since its marks at each sync; ids it let go are recalled by :meth:`Feed.events_with_ids`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from datetime import datetime

from collectors.records import Event, Label
from collectors.rfc3339 import from_us, to_us
from daemon.store.queries import CitationPair, Queries
from daemon.store.rows import ReadRow

#: An event whose id a record dated after the parameter also carries (an id goes with all its records).
_ON_A_NEWER = "e.id IN (SELECT id FROM events WHERE ts_us > ?)"


class Feed(Queries):
    """Reads by rowid and by the change feed (see the module)."""

    def feed_marks(self) -> tuple[int, int, int, int]:
        """The newest (event rowid, label rowid, check seq, change seq): where the daemon's model is up to."""
        row = self.conn.execute(
            "SELECT (SELECT coalesce(max(rowid), 0) FROM events), (SELECT coalesce(max(rowid), 0) FROM labels),"
            # The feed's mark is the last seq handed out, not max(seq): the daemon prunes what it applied, and an
            # emptied feed must not read as "nothing applied yet" to a model cache holding this mark (AUTOINCREMENT
            # never hands a seq out twice, so the two agree whenever the newest row is still there).
            " (SELECT coalesce(max(seq), 0) FROM checks),"
            " coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'changes'), 0)"
        ).fetchone()
        return int(row[0]), int(row[1]), int(row[2]), int(row[3])

    def store_id(self) -> str:
        """The random id this store was given when it was created (migration 008)."""
        return str(self.conn.execute("SELECT value FROM store_meta WHERE key = 'store_id'").fetchone()[0])

    def feed_kept_after(self, seq: int) -> bool:
        """True iff the change feed still holds every row after ``seq``, and ``seq`` was handed out here: what a
        model holding that mark needs to catch up (the daemon prunes the feed up to what its model applied).
        """
        top = self.feed_marks()[3]
        low = self.conn.execute("SELECT min(seq) FROM changes").fetchone()[0]
        if seq > top:
            return False
        return seq == top if low is None else low <= seq + 1

    def heartbeat_top(self, upto: int) -> int:
        """The largest rowid ≤ ``upto`` of a heartbeat event (rows that are never removed)."""
        row = self.conn.execute("SELECT coalesce(max(rowid), 0) FROM events WHERE line > 0 AND rowid <= ?",
                                (upto,)).fetchone()
        return int(row[0])

    def changes_since(self, seq: int) -> list[tuple[int, str, str, int | None]]:
        """(seq, what, path, rid) of the change feed after ``seq``: ("events", path, removed rowid),
        ("files", path, None) for an added or updated index row, ("modified", path, at_us) for a modification.
        """
        return [(r[0], r[1], r[2], r[3]) for r in self.conn.execute(
            "SELECT seq, what, path, rid FROM changes WHERE seq > ? ORDER BY seq", (seq,))]

    def labels_since(self, rowid: int) -> Iterator[tuple[int, Label]]:
        """(rowid, label) of the labels stored after ``rowid`` (labels are never deleted: rowids only grow), streamed:
        a load reads every label, and a list of them all would be freed again among what the load keeps."""
        for r in self.conn.execute(
                "SELECT rowid, path, generation, line, ts_us, decision, value, reviewer FROM labels WHERE rowid > ?"
                " ORDER BY rowid", (rowid,)):
            yield r[0], Label(from_us(r[4]), r[5], r[6], r[7], r[1], r[3], r[2])

    def ids_only_before(self, horizon: datetime, upto: int) -> Iterator[str]:
        """The ids all of whose events (rowid ≤ ``upto``) are dated up to ``horizon``: streamed, not held."""
        cut = to_us(horizon)
        for (rid,) in self.conn.execute(
                "SELECT DISTINCT id FROM events WHERE rowid <= ? AND ts_us <= ?"
                " AND id NOT IN (SELECT id FROM events WHERE ts_us > ?)", (upto, cut, cut)):
            yield rid

    def events_with_ids(self, ids: Collection[str]) -> list[Event]:
        """Every stored event carrying one of ``ids``, in rowid order: one scan of the table whatever their number
        (migration 006 dropped the index on ``id``: every insert paid for it, and only this rare recall reads by id).
        """
        wanted = (json.dumps(sorted(ids)),)
        return [e for _, e in self._select_events("e.id IN (SELECT value FROM json_each(?))", wanted)]

    def labels_on(self, decisions: Collection[str]) -> list[Label]:
        """The labels on these decisions, in rowid order (one scan, no index: see :meth:`events_with_ids`)."""
        return [
            Label(from_us(r[3]), r[4], r[5], r[6], r[0], r[2], r[1])
            for r in self.conn.execute(
                "SELECT path, generation, line, ts_us, decision, value, reviewer FROM labels"
                " WHERE decision IN (SELECT value FROM json_each(?)) ORDER BY rowid", (json.dumps(sorted(decisions)),)
            )
        ]

    def has_id_above(self, record_id: str, rowid: int) -> bool:
        """True iff an event with this id has a rowid above ``rowid``: a range of the primary key, not the whole
        table (there is no index on id: see :meth:`events_with_ids`)."""
        row = self.conn.execute("SELECT 1 FROM events WHERE rowid > ? AND id = ? LIMIT 1", (rowid, record_id))
        return row.fetchone() is not None

    def let_go_count(self) -> int:
        """How many id hashes the let-go table holds (migration 013)."""
        return int(self.conn.execute("SELECT count(*) FROM let_go").fetchone()[0])

    def was_let_go(self, id_hash: int, upto_us: int) -> bool:
        """True iff an id with this 64-bit hash was let go by a model, up to a horizon no later than ``upto_us``: a
        lookup of the let-go table's primary key (see :meth:`Writes.add_let_go`)."""
        row = self.conn.execute("SELECT 1 FROM let_go WHERE hash = ? AND upto_us <= ?", (id_hash, upto_us))
        return row.fetchone() is not None

    def events_up_to(self, upto: int, *, newer_than: datetime | None = None) -> Iterator[tuple[int, Event]]:
        """(rowid, event) of the events with rowid ≤ ``upto``, in rowid order, streamed (a model's load). With
        ``newer_than``: only those dated after it, or sharing an id with one that is (an id goes with all its
        records: see :meth:`ids_only_before`)."""
        return self._select_events(*self._up_to(upto, newer_than))

    def event_rows_up_to(self, upto: int, *, newer_than: datetime | None = None
                         ) -> Iterator[tuple[ReadRow, list[CitationPair]]]:
        """The events of :meth:`events_up_to` as rows and their citations (see :meth:`_select_rows`): a model's
        load builds its own records from them, without an Event per row in between."""
        return self._select_rows(*self._up_to(upto, newer_than))

    def heartbeat_rows_up_to(self, upto: int, *, after: int = 0, newer_than: datetime | None = None
                             ) -> Iterator[tuple[ReadRow, list[CitationPair]]]:
        """The heartbeat rows of :meth:`event_rows_up_to` dated after ``newer_than`` (all when None), from rowid
        ``after`` on. Such rows are never changed or removed, so any later read transaction gives the same ones: what a
        reader in another process may take (daemon/coldread.py); :meth:`other_rows_up_to` gives the rest."""
        if newer_than is None:
            return self._select_rows("e.line > 0 AND e.rowid > ? AND e.rowid <= ?", [after, upto])
        return self._select_rows("e.line > 0 AND e.rowid > ? AND e.rowid <= ? AND e.ts_us > ?",
                                 [after, upto, to_us(newer_than)])

    def other_rows_up_to(self, upto: int, *, newer_than: datetime | None = None
                         ) -> Iterator[tuple[ReadRow, list[CitationPair]]]:
        """The rows of :meth:`event_rows_up_to` that :meth:`heartbeat_rows_up_to` leaves out: the Markdown decisions,
        and the heartbeat rows up to ``newer_than`` kept because their id is on a newer record."""
        if newer_than is None:
            return self._select_rows("e.line = 0 AND e.rowid <= ?", [upto])
        cut = to_us(newer_than)
        return self._select_rows(f"e.rowid <= ? AND ((e.line = 0 AND (e.ts_us > ? OR {_ON_A_NEWER}))"
                                 f" OR (e.line > 0 AND e.ts_us <= ? AND {_ON_A_NEWER}))", [upto, cut, cut, cut, cut])

    @staticmethod
    def _up_to(upto: int, newer_than: datetime | None) -> tuple[str, list[int]]:
        """The condition and parameters of :meth:`events_up_to`."""
        if newer_than is None:
            return "e.rowid <= ?", [upto]
        cut = to_us(newer_than)
        return f"e.rowid <= ? AND (e.ts_us > ? OR {_ON_A_NEWER})", [upto, cut, cut]

    def events_between(self, after: int, upto: int) -> Iterator[tuple[int, Event]]:
        """(rowid, event) of the events with ``after`` < rowid ≤ ``upto``, in rowid order (a model's sync)."""
        return self._select_events("e.rowid > ? AND e.rowid <= ?", (after, upto))

    def decisions_of(self, path: str) -> list[Event]:
        """The decision a Markdown file holds now (none, or one), as stored."""
        return [e for _, e in self._select_events("e.path = ? AND e.line = 0", (path,))]
