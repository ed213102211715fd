"""The store's reads: the typed queries every reader asks (the scorers' records, the file index, the cursors)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import date, datetime
from typing import Any

from collectors.citations import Citation
from collectors.records import CheckResult, ComponentResult, DayCounts, EvalReport, Event, FileEntry, Label, Records
from collectors.rfc3339 import from_us, to_us
from collectors.tail import Cursor
from daemon.config import COMPONENTS
from daemon.store.connection import Connection
from daemon.store.rows import READ_COLUMNS, IndexRow, ReadRow, StoredStat, event_of, index_row_of

#: A citation as read: (type, target).
CitationPair = tuple[str, str]


class Queries(Connection):
    """Typed reads of the store: records in, records out, no SQL for the caller."""

    def cursor(self, path: str) -> Cursor | None:
        """The saved cursor of a JSON Lines file."""
        row = self.conn.execute(
            "SELECT path, dev, ino, generation, offset, line, head_len, head_sha, marker_sha FROM cursors"
            " WHERE path = ?",
            (path,),
        ).fetchone()
        return Cursor(*row) if row else None

    def cursors(self) -> list[Cursor]:
        """Every saved cursor."""
        return [
            Cursor(*r)
            for r in self.conn.execute(
                "SELECT path, dev, ino, generation, offset, line, head_len, head_sha, marker_sha FROM cursors"
                " ORDER BY path"
            )
        ]

    def index_rows(self) -> dict[str, IndexRow]:
        """Every stored row: the file index, and the names sources are read under through a symlink."""
        return {r[0]: index_row_of(r) for r in self.conn.execute(f"SELECT {self._file_columns()} FROM files")}

    def stats_in_order(self) -> Iterator[StoredStat]:
        """Every stored row as a scan compares it, in path order (SQLite's byte order of UTF-8, Python's of code
        points: the same), read as it is iterated: take them all before writing (the writer's store: migrated)."""
        return iter(self.conn.execute(
            "SELECT path, deleted_us IS NULL AND sha IS NOT NULL, canonical, size, mtime_ns, ctime_ns, dev, ino,"
            " seen_ns FROM files ORDER BY path"))

    def live_paths(self) -> Iterator[tuple[str, str | None]]:
        """(path, canonical) of every stored row not deleted: what a scan may find gone (the writer's store: migrated),
        read as it is iterated (a row at a time, not every file's at once): take them all before writing."""
        return iter(self.conn.execute("SELECT path, canonical FROM files WHERE deleted_us IS NULL"))

    def index_rows_get(self, path: str) -> IndexRow | None:
        """The stored file-index state of one path."""
        r = self.conn.execute(f"SELECT {self._file_columns()} FROM files WHERE path = ?", (path,)).fetchone()
        return None if r is None else index_row_of(r)

    def links(self) -> dict[str, str | None]:
        """The symlinks inside the root as the last pass saw them (collectors/links.py)."""
        if self._before_009():
            return {}
        return {r[0]: r[1] for r in self.conn.execute("SELECT path, target FROM links ORDER BY path")}

    def document_shas(self) -> dict[str, str | None]:
        """Content hashes of the indexed files (to skip re-parsing unchanged Markdown)."""
        return {r[0]: r[1] for r in self.conn.execute("SELECT path, sha FROM files")}

    def eval_shas(self) -> dict[str, str]:
        """Content hashes of the stored benchmark reports."""
        return {r[0]: r[1] for r in self.conn.execute("SELECT path, sha FROM evals")}

    def file_entries(self) -> dict[str, FileEntry]:
        """The file index as scorer records (created, modifications, deletion), by canonical path."""
        return {entry.path: entry for entry in self.file_entries_read()}

    def file_entries_read(self) -> Iterator[FileEntry]:
        """The entries of :meth:`file_entries`, read as they are iterated: a load keeps each entry's path and times
        and drops the rest, and rows of every column, all held until the end, would leave their space freed among
        what it keeps (docs/performance.md, round 23)."""
        changes: dict[str, list[datetime]] = {}
        for path, at in self.conn.execute("SELECT path, at_us FROM file_changes ORDER BY path, at_us"):
            changes.setdefault(path, []).append(from_us(at))
        canonical = "" if self._before_009() else " WHERE canonical IS NULL"  # no names through symlinks before 009
        for path, created, deleted in self.conn.execute(f"SELECT path, created_us, deleted_us FROM files{canonical}"):
            yield FileEntry(path, from_us(created), tuple(changes.get(path, ())),
                            from_us(deleted) if deleted is not None else None)

    def file_entry(self, path: str) -> FileEntry | None:
        """One path's file-index entry as scorer record, or None (a name through a symlink has none)."""
        row = self.index_rows_get(path)
        if row is None or row.canonical is not None:
            return None
        changes = tuple(from_us(r[0]) for r in self.conn.execute(
            "SELECT at_us FROM file_changes WHERE path = ? ORDER BY at_us", (path,)))
        return FileEntry(path, row.created, changes, row.deleted)

    def events(self, *, decisions_only: Sequence[str] | None = None) -> list[Event]:
        """Every stored event and Markdown decision (``decisions_only``: those kinds or Markdown)."""
        if decisions_only is None:
            return [e for _, e in self._select_events()]
        kinds = ",".join("?" * len(decisions_only))
        return [e for _, e in self._select_events(f"e.line = 0 OR e.kind IN ({kinds})", decisions_only)]

    def _select_events(self, where: str = "", params: Sequence[Any] = ()) -> Iterator[tuple[int, Event]]:
        """(rowid, event) of the stored events matching ``where`` (SQL over alias ``e``), in rowid order, streamed."""
        for r, cites in self._select_rows(where, params):
            yield r[0], event_of(r, [Citation(kind, target) for kind, target in cites])

    def _select_rows(self, where: str = "", params: Sequence[Any] = ()) -> Iterator[tuple[ReadRow, list[CitationPair]]]:
        """(row, citations) of the stored events matching ``where`` (SQL over alias ``e``), in rowid order: the row as
        :data:`~daemon.store.rows.ReadRow` (read past its end, it holds the first citation's columns), and the
        (type, target) of each citation in order.

        Streams: one join with the citations, grouped as it goes, so a million events never sit in memory
        twice (the daemon's model slims each one as it arrives).
        """
        sql = (
            f"SELECT e.rowid, {', '.join('e.' + c.strip() for c in READ_COLUMNS.split(','))}, c.type, c.target"
            " FROM events e LEFT JOIN citations c"
            " ON c.path = e.path AND c.generation = e.generation AND c.line = e.line"
            f"{' WHERE ' + where if where else ''} ORDER BY e.rowid, c.seq"
        )
        current: ReadRow | None = None
        cites: list[CitationPair] = []
        for r in self.conn.execute(sql, list(params)):
            if current is None or r[0] != current[0]:
                if current is not None:
                    yield current, cites
                current, cites = r, []
            if r[15] is not None:
                cites.append(r[15:17])
        if current is not None:
            yield current, cites

    def labels(self) -> list[Label]:
        """Every stored label."""
        return [
            Label(from_us(r[3]), r[4], r[5], r[6], r[0], r[2], r[1])
            for r in self.conn.execute(
                "SELECT path, generation, line, ts_us, decision, value, reviewer FROM labels"
            )
        ]

    def checks_since(self, seq: int) -> list[CheckResult]:
        """The verification results stored after ``seq``."""
        return [
            CheckResult(r[1], r[2], from_us(r[3]), None if r[4] is None else bool(r[4]), r[5], r[0], r[6])
            for r in self.conn.execute(
                "SELECT seq, target, type, checked_us, ok, status, detail FROM checks WHERE seq > ? ORDER BY seq",
                (seq,),
            )
        ]

    def checks(self) -> list[CheckResult]:
        """Every stored verification result, in arrival order."""
        return self.checks_since(-1)

    def citation_targets(self) -> list[tuple[str, str]]:
        """Every distinct cited (type, target), sorted."""
        return [(r[0], r[1]) for r in self.conn.execute("SELECT DISTINCT type, target FROM citations ORDER BY 1, 2")]

    def recently_checked(self, since: datetime) -> set[tuple[str, str]]:
        """(type, target) pairs with a conclusive result checked after ``since`` (the check cache)."""
        return {
            (r[0], r[1])
            for r in self.conn.execute(
                "SELECT DISTINCT type, target FROM checks WHERE ok IS NOT NULL AND checked_us > ?", (to_us(since),)
            )
        }

    def evals(self) -> list[EvalReport]:
        """Every stored benchmark report."""
        out = []
        for path, report in self.conn.execute("SELECT path, report FROM evals ORDER BY path"):
            data = json.loads(report)
            out.append(EvalReport(path=path, **data))
        return out

    def load_records(self) -> Records:
        """Everything the scorers need."""
        return Records(self.events(), self.labels(), self.file_entries(), self.checks(), self.links())

    def history(self, agent: str) -> list[DayCounts]:
        """Every stored day of one agent, by day and window."""
        return _day_counts(self.conn.execute(
            "SELECT day, agent, window, component, passed, counted, pending, decisions FROM history WHERE agent = ?"
            " ORDER BY day, window", (agent,)))

    def history_since(self, day: date) -> list[DayCounts]:
        """Every agent's stored days from ``day`` on, by agent, day and window (the index's sparklines)."""
        return _day_counts(self.conn.execute(
            "SELECT day, agent, window, component, passed, counted, pending, decisions FROM history WHERE day >= ?"
            " ORDER BY agent, day, window", (day.isoformat(),)))

    def rejects(self) -> list[dict[str, Any]]:
        """Every refused line or file, in read order."""
        cols = ("path", "generation", "line", "source", "reason", "snippet", "seen_us")
        return [
            dict(zip(cols, r, strict=True))
            for r in self.conn.execute(f"SELECT {', '.join(cols)} FROM rejects ORDER BY path, generation, line")
        ]

    def has_agent(self, agent: str) -> bool:
        """True iff an event by ``agent`` is stored (a scan until the first: for the CLI, not the daemon)."""
        return self.conn.execute("SELECT 1 FROM events WHERE agent = ? LIMIT 1", (agent,)).fetchone() is not None

    def counts(self) -> dict[str, int]:
        """Row counts of the main tables (for summaries and tests)."""
        return {
            t: self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("events", "labels", "rejects", "files", "checks", "evals")
        }


def _day_counts(rows: Iterable[tuple[str, str, str, str, int, int, int, int]]) -> list[DayCounts]:
    """DayCounts of history rows (day, agent, window, component, passed, counted, pending, decisions)."""
    days: dict[tuple[str, str, str], dict[str, Any]] = {}
    for day, agent, window, component, passed, counted, pending, decisions in rows:
        entry = days.setdefault((day, agent, window), {"decisions": decisions, "components": {}})
        entry["components"][component] = ComponentResult(passed, counted, pending)
    return [
        DayCounts(date.fromisoformat(day), agent, window, v["decisions"],
                  tuple(v["components"].get(c, ComponentResult(0, 0, 0)) for c in COMPONENTS))
        for (day, agent, window), v in days.items()
    ]
