"""The store's writes: each inserts, replaces or removes rows inside the caller's transaction.

Call them inside :meth:`~daemon.store.connection.Connection.transaction` (or an ingest's group); replays are
harmless: the unique keys (path, generation, line) ignore a row already stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from collectors.records import CheckResult, DayCounts, EvalReport, Event, Label, Reject
from collectors.rfc3339 import to_us
from collectors.tail import Cursor
from daemon.config import COMPONENTS
from daemon.store.queries import Queries
from daemon.store.rows import COPYABLE, EVENT_COLUMNS, CitationRow, EventRow, Fingerprint, IndexRow, event_rows


class Writes(Queries):
    """Typed writes of the store (see the module)."""

    def put_history(self, counts: Iterable[DayCounts]) -> None:
        """Insert or replace daily counts (today's are rewritten until the day ends)."""
        self.conn.executemany(
            "INSERT OR REPLACE INTO history (day, agent, window, component, passed, counted, pending, decisions)"
            " VALUES (?,?,?,?,?,?,?,?)",
            [
                (c.day.isoformat(), c.agent, c.window, name, r.passed, r.counted, r.pending, c.decisions)
                for c in counts
                for name, r in zip(COMPONENTS, c.components, strict=True)
            ],
        )

    def add_events(self, events: Sequence[Event]) -> int:
        """Insert events (heartbeat lines, or Markdown decisions with line 0); replays are ignored.

        Returns how many were new. A replayed event's citations are ignored by the same key.
        """
        return self.add_event_rows(*event_rows(events))

    def add_event_rows(self, rows: Sequence[EventRow], citation_rows: Sequence[CitationRow]) -> int:
        """:meth:`add_events` for rows already built by :func:`event_rows`."""
        cur = self.conn.executemany(
            f"INSERT OR IGNORE INTO events ({EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows
        )
        self.conn.executemany(
            "INSERT OR IGNORE INTO citations (path, generation, line, seq, type, target) VALUES (?,?,?,?,?,?)",
            citation_rows,
        )
        return max(cur.rowcount, 0)

    def add_labels(self, labels: Iterable[Label]) -> int:
        """Insert labels; replays are ignored."""
        cur = self.conn.executemany(
            "INSERT OR IGNORE INTO labels (path, generation, line, ts_us, decision, value, reviewer, note)"
            " VALUES (?,?,?,?,?,?,?,?)",
            [(lb.path, lb.generation, lb.line, to_us(lb.ts), lb.decision, lb.value, lb.reviewer, lb.note)
             for lb in labels],
        )
        return max(cur.rowcount, 0)

    def add_rejects(self, rejects: Iterable[Reject], source: str, generation: int, seen: datetime) -> int:
        """Record refused lines or files (a file's reject, line 0, is replaced when it is seen again)."""
        cur = self.conn.executemany(
            "INSERT OR REPLACE INTO rejects (path, generation, line, source, reason, snippet, seen_us)"
            " VALUES (?,?,?,?,?,?,?)",
            [(r.path, generation, r.line or 0, source, r.reason, r.snippet, to_us(seen)) for r in rejects],
        )
        return max(cur.rowcount, 0)

    def remove_document(self, path: str) -> None:
        """Forget the decision and reject of a Markdown file (deleted, or about to be re-parsed)."""
        self.conn.execute("DELETE FROM events WHERE path = ? AND line = 0", (path,))
        self.conn.execute("DELETE FROM citations WHERE path = ? AND line = 0", (path,))
        self.conn.execute("DELETE FROM rejects WHERE path = ? AND line = 0", (path,))

    def put_cursor(self, c: Cursor) -> None:
        """Save where a JSON Lines file has been read to."""
        self.conn.execute(
            "INSERT OR REPLACE INTO cursors (path, dev, ino, generation, offset, line, head_len, head_sha,"
            " marker_sha) VALUES (?,?,?,?,?,?,?,?,?)",
            (c.path, c.dev, c.ino, c.generation, c.offset, c.line, c.head_len, c.head_sha, c.marker_sha),
        )

    def put_file(self, row: IndexRow) -> None:
        """Insert or update a file-index entry (an update in place: see migration 007)."""
        fp = row.fingerprint or (None, None, None, None)
        self.conn.execute(
            "INSERT INTO files (path, created_us, deleted_us, mtime_ns, size, sha, front_matter, canonical, ctime_ns,"
            " dev, ino, seen_ns) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (path) DO UPDATE SET"
            " created_us = excluded.created_us, deleted_us = excluded.deleted_us, mtime_ns = excluded.mtime_ns,"
            " size = excluded.size, sha = excluded.sha, front_matter = excluded.front_matter,"
            " canonical = excluded.canonical, ctime_ns = excluded.ctime_ns, dev = excluded.dev, ino = excluded.ino,"
            " seen_ns = excluded.seen_ns",
            (row.path, to_us(row.created), to_us(row.deleted) if row.deleted else None, row.mtime_ns, row.size,
             row.sha, int(row.front_matter), row.canonical, *fp),
        )

    def put_fingerprints(self, rows: Iterable[tuple[str, str, int, int, Fingerprint]]) -> None:
        """Record (path, sha, mtime_ns, size, fingerprint): the stat a file's hash was taken after, on the row of that
        path only while it still holds that hash, mtime and size (no feed row: see migration 009's trigger)."""
        self.conn.executemany(
            "UPDATE files SET ctime_ns = ?, dev = ?, ino = ?, seen_ns = ? WHERE path = ? AND sha = ? AND mtime_ns = ?"
            " AND size = ?", ((*fp, path, sha, mtime_ns, size) for path, sha, mtime_ns, size, fp in rows))

    def remove_file(self, path: str) -> None:
        """Forget a path's row and its modifications (a name that now goes through a symlink: no file of the index).
        """
        self.conn.execute("DELETE FROM files WHERE path = ?", (path,))
        self.conn.execute("DELETE FROM file_changes WHERE path = ?", (path,))

    def put_links(self, links: Mapping[str, str | None]) -> None:
        """Make the stored symlinks ``links`` (location → target, None: leads out of the root or nowhere)."""
        stored = self.links()
        gone = [(p,) for p in stored if p not in links]
        if gone:
            self.conn.executemany("DELETE FROM links WHERE path = ?", gone)
        for path, target in links.items():
            if path not in stored or stored[path] != target:
                self.put_link(path, target)

    def put_link(self, path: str, target: str | None) -> None:
        """Store one symlink (in place: the change feed hears of a new target only)."""
        self.conn.execute("INSERT INTO links (path, target) VALUES (?, ?)"
                          " ON CONFLICT (path) DO UPDATE SET target = excluded.target", (path, target))

    def remove_link(self, path: str) -> None:
        """Forget one symlink (it is gone, or no longer a symlink)."""
        self.conn.execute("DELETE FROM links WHERE path = ?", (path,))

    def add_file_change(self, path: str, at: datetime) -> None:
        """Record that a file was seen modified at ``at``."""
        self.conn.execute("INSERT OR IGNORE INTO file_changes (path, at_us) VALUES (?, ?)", (path, to_us(at)))

    def put_eval(self, report: EvalReport, sha: str) -> None:
        """Insert or replace a benchmark report."""
        data = {k: getattr(report, k) for k in ("model", "tasks", "passed", "failed", "ci_low", "ci_high", "honesty")}
        self.conn.execute(
            "INSERT OR REPLACE INTO evals (path, model, report, sha) VALUES (?,?,?,?)",
            (report.path, report.model, json.dumps(data, sort_keys=True), sha),
        )

    def remove_eval(self, path: str) -> None:
        """Forget a deleted benchmark report."""
        self.conn.execute("DELETE FROM evals WHERE path = ?", (path,))

    def add_checks(self, checks: Iterable[CheckResult]) -> None:
        """Append verification results (their order of arrival breaks ties)."""
        self.conn.executemany(
            "INSERT INTO checks (target, type, checked_us, ok, status, detail) VALUES (?,?,?,?,?,?)",
            [
                (c.target, c.type, to_us(c.checked_at), None if c.ok is None else int(c.ok), c.status, c.detail)
                for c in checks
            ],
        )

    def prune_changes(self, upto: int) -> None:
        """Drop the feed up to ``upto`` (the daemon has applied it)."""
        self.conn.execute("DELETE FROM changes WHERE seq <= ?", (upto,))

    def add_let_go(self, hashes: Iterable[int], upto_us: int) -> None:
        """Note the hashes of ids the daemon's model let go up to ``upto_us`` (a hash noted already keeps the earlier
        horizon: a model whose horizon is that early must still find it; a false "let go" only costs a recall)."""
        self.conn.executemany(
            "INSERT INTO let_go (hash, upto_us) VALUES (?, ?)"
            " ON CONFLICT (hash) DO UPDATE SET upto_us = min(upto_us, excluded.upto_us)",
            ((h, upto_us) for h in hashes))

    def copy_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> int:
        """Insert rows salvaged from a damaged store (``honestyd store rebuild``) into ``table``, in the columns of
        :func:`~daemon.store.rows.copy_columns`; a row already there is left alone. Returns how many were new."""
        columns = COPYABLE[table]
        cur = self.conn.executemany(
            f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows)
        return max(cur.rowcount, 0)
