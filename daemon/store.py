"""The store: SQLite in WAL mode, the only module that writes SQL.

Every write goes through :meth:`Store.atomic`, so parsed rows, rejects and the file cursor
that produced them are committed together: a crash leaves either all of a batch or none of
it, and the unique keys (path, generation, line) make a replay harmless.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import sqlite_utils

from collectors.citations import Citation
from collectors.records import CheckResult, EvalReport, Event, FileEntry, Label, Reject
from collectors.rfc3339 import from_us, to_us
from collectors.tail import Cursor
from daemon.config import COMPONENTS
from scorers.context import Records
from scorers.history import DayCounts
from scorers.score import ComponentResult

#: How long a COMMIT waits for a gated reader's snapshot to end (see :class:`Gate`). A sync reads for milliseconds
#: in a steady state; a catch-up sync may read for seconds, and a pass must not stall behind it for that long.
GATE_WAIT_S = 1.0


class Gate:
    """Keeps the snapshots of a reader that runs often (the daemon's evaluations) out of the writer's COMMITs.

    SQLite checkpoints the WAL inside a COMMIT once it passes 1,000 pages, and can copy back only the frames every
    open snapshot has seen; a checkpoint cut short leaves the WAL to grow by the next transaction instead of starting
    over. Without the gate, an evaluation reading at each COMMIT grew the WAL by one ingest group per overlap.

    A COMMIT waits at most ``GATE_WAIT_S`` for a read, and once only for the same read: the COMMITs after one that
    gave up go ahead at once while that read lasts (a catch-up sync of seconds costs a pass one wait, not one each).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads = 0  # reads begun; the one holding the lock is number _reads
        self._gave_up_on = -1  # the read a COMMIT last stopped waiting for

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the gate for one read transaction."""
        with self._lock:
            self._reads += 1
            yield

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Hold the gate for one COMMIT, if it comes free in time (see the class)."""
        if self._gave_up_on == self._reads:  # the read that outlasted a COMMIT's wait may still be on
            held = self._lock.acquire(blocking=False)
        else:
            held = self._lock.acquire(timeout=GATE_WAIT_S)
        if not held:
            self._gave_up_on = self._reads
        try:
            yield
        finally:
            if held:
                self._lock.release()

    def locked(self) -> bool:
        """True while a read or a COMMIT holds the gate."""
        return self._lock.locked()


@dataclass(frozen=True)
class IndexRow:
    """The stored file-index state of one path (what the next scan compares against).

    ``canonical`` is None for an entry of the file index (a file under its canonical path); else the row is a name
    through a symlink that a source is read under, and ``canonical`` the file it names: the row records what was
    read (its hash, its deletion), and is no entry of the index (migration 009).
    """

    path: str
    created: datetime
    deleted: datetime | None
    mtime_ns: int
    size: int
    sha: str | None
    front_matter: bool
    canonical: str | None = None


Migration = Callable[[sqlite3.Connection], None]


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated DDL inside the caller's transaction (executescript would commit it)."""
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def _m001_initial(conn: sqlite3.Connection) -> None:
    _run_script(
        conn,
        """
        CREATE TABLE events (
            rowid INTEGER PRIMARY KEY,
            path TEXT NOT NULL, generation INTEGER NOT NULL, line INTEGER NOT NULL,
            id TEXT NOT NULL, ts_us INTEGER NOT NULL, agent TEXT NOT NULL, kind TEXT NOT NULL,
            thread TEXT, text TEXT NOT NULL, prompt TEXT, reason TEXT,
            alternatives TEXT NOT NULL, subject TEXT NOT NULL, corrects TEXT,
            UNIQUE (path, generation, line)
        );
        CREATE INDEX events_ts ON events (ts_us);
        CREATE INDEX events_id ON events (id);
        CREATE TABLE citations (
            event INTEGER NOT NULL REFERENCES events(rowid) ON DELETE CASCADE,
            seq INTEGER NOT NULL, type TEXT NOT NULL, target TEXT NOT NULL,
            PRIMARY KEY (event, seq)
        );
        CREATE INDEX citations_target ON citations (type, target);
        CREATE TABLE labels (
            path TEXT NOT NULL, generation INTEGER NOT NULL, line INTEGER NOT NULL,
            ts_us INTEGER NOT NULL, decision TEXT NOT NULL, value TEXT NOT NULL, reviewer TEXT NOT NULL,
            PRIMARY KEY (path, generation, line)
        );
        CREATE TABLE rejects (
            path TEXT NOT NULL, generation INTEGER NOT NULL, line INTEGER NOT NULL,
            source TEXT NOT NULL, reason TEXT NOT NULL, snippet TEXT NOT NULL, seen_us INTEGER NOT NULL,
            PRIMARY KEY (path, generation, line)
        );
        CREATE TABLE cursors (
            path TEXT PRIMARY KEY, dev INTEGER NOT NULL, ino INTEGER NOT NULL,
            generation INTEGER NOT NULL, offset INTEGER NOT NULL, line INTEGER NOT NULL,
            head_len INTEGER NOT NULL, head_sha TEXT NOT NULL, marker_sha TEXT NOT NULL
        );
        CREATE TABLE files (
            path TEXT PRIMARY KEY, created_us INTEGER NOT NULL, deleted_us INTEGER,
            mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, sha TEXT, front_matter INTEGER NOT NULL
        );
        CREATE TABLE file_changes (
            path TEXT NOT NULL, at_us INTEGER NOT NULL, PRIMARY KEY (path, at_us)
        );
        CREATE TABLE checks (
            seq INTEGER PRIMARY KEY, target TEXT NOT NULL, type TEXT NOT NULL,
            checked_us INTEGER NOT NULL, ok INTEGER, status INTEGER
        );
        CREATE INDEX checks_target ON checks (type, target, checked_us);
        CREATE TABLE evals (
            path TEXT PRIMARY KEY, model TEXT NOT NULL, report TEXT NOT NULL, sha TEXT NOT NULL
        );
        """
    )


def _m002_check_detail(conn: sqlite3.Connection) -> None:
    # Why a check failed ("forbidden address", "404", "ghost path") is what a reviewer reads first.
    conn.execute("ALTER TABLE checks ADD COLUMN detail TEXT NOT NULL DEFAULT ''")


def _m003_history(conn: sqlite3.Connection) -> None:
    # Daily per-component counts: weights-free, so any version can re-render past scores.
    conn.execute(
        "CREATE TABLE history (day TEXT NOT NULL, agent TEXT NOT NULL, window TEXT NOT NULL,"
        " component TEXT NOT NULL, passed INTEGER NOT NULL, counted INTEGER NOT NULL, pending INTEGER NOT NULL,"
        " decisions INTEGER NOT NULL, PRIMARY KEY (day, agent, window, component))"
    )


def _m004_citations_by_line(conn: sqlite3.Connection) -> None:
    # Citations keyed like their event, (path, generation, line): a batch of events and of citations
    # can then be inserted with two executemany calls, with no per-event rowid round trip.
    _run_script(
        conn,
        """
        CREATE TABLE citations_by_line (
            path TEXT NOT NULL, generation INTEGER NOT NULL, line INTEGER NOT NULL, seq INTEGER NOT NULL,
            type TEXT NOT NULL, target TEXT NOT NULL, PRIMARY KEY (path, generation, line, seq)
        ) WITHOUT ROWID;
        INSERT INTO citations_by_line
            SELECT e.path, e.generation, e.line, c.seq, c.type, c.target
            FROM citations c JOIN events e ON e.rowid = c.event;
        DROP TABLE citations;
        ALTER TABLE citations_by_line RENAME TO citations;
        CREATE INDEX citations_target ON citations (type, target)
        """,
    )


def _m005_change_feed(conn: sqlite3.Connection) -> None:
    # What the daemon's in-memory model cannot see by watching rowids grow: removed Markdown decisions
    # (their rowids may be handed out again) and file-index changes (a modification with its time, so the
    # model need not re-read every modification of a log that is appended to all day). Triggers write it in the same
    # transaction as the change itself, so whatever is committed is in the feed, however the write ended.
    conn.execute(
        "CREATE TABLE changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, what TEXT NOT NULL, path TEXT NOT NULL,"
        " rid INTEGER)"
    )
    # One statement each: a trigger body holds semicolons, which _run_script splits on.
    for name, when, what, path, rid in (
        ("events_removed", "AFTER DELETE ON events", "events", "old.path", "old.rowid"),
        ("files_added", "AFTER INSERT ON files", "files", "new.path", "NULL"),
        ("files_updated", "AFTER UPDATE ON files", "files", "new.path", "NULL"),
        ("files_changed", "AFTER INSERT ON file_changes", "modified", "new.path", "new.at_us"),
    ):
        conn.execute(
            f"CREATE TRIGGER {name} {when} BEGIN"
            f" INSERT INTO changes (what, path, rid) VALUES ('{what}', {path}, {rid}); END"
        )


def _m006_drop_unused_indexes(conn: sqlite3.Connection) -> None:
    # No query reads events by ts_us or by id (the model loads by rowid, documents go by path), yet every insert
    # kept both indexes: a fifth of the store's insert time on the benchmark's rows, and disk.
    conn.execute("DROP INDEX IF EXISTS events_ts")
    conn.execute("DROP INDEX IF EXISTS events_id")


def _m007_feed_file_changes_only(conn: sqlite3.Connection) -> None:
    # put_file was INSERT OR REPLACE, a delete and an insert: every index update of a log, one per ingest pass,
    # fed a 'files' row besides its 'modified' row, and each sync read the index row back to learn nothing new.
    # put_file now updates in place, and an update feeds a row only when what the model keeps (created, deleted)
    # changed; a modification alone arrives as its 'modified' row.
    conn.execute("DROP TRIGGER IF EXISTS files_updated")
    conn.execute(
        "CREATE TRIGGER files_updated AFTER UPDATE ON files"
        " WHEN old.created_us IS NOT new.created_us OR old.deleted_us IS NOT new.deleted_us BEGIN"
        " INSERT INTO changes (what, path, rid) VALUES ('files', new.path, NULL); END"
    )


def _m008_store_id(conn: sqlite3.Connection) -> None:
    # The daemon's model cache (daemon/modelcache.py) holds marks into this store's rowids and change feed: they
    # mean nothing in another store, even one with the same row counts. A random id per store tells them apart.
    conn.execute("CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("INSERT INTO store_meta (key, value) VALUES ('store_id', lower(hex(randomblob(16))))")


def _m009_symlinks(conn: sqlite3.Connection) -> None:
    # Spec v2.3: a path through a symlink names its target. The index holds each file once, under its canonical
    # path; a source read under another name keeps a row of its own marked with the file it names (files.canonical);
    # the symlinks inside the root are stored, so `score --db` and the daemon resolve paths without the state dir.
    conn.execute("ALTER TABLE files ADD COLUMN canonical TEXT")
    conn.execute("CREATE TABLE links (path TEXT PRIMARY KEY, target TEXT)")
    # The model must hear of a row turning from an index entry into a name, or back (see migration 007).
    conn.execute("DROP TRIGGER IF EXISTS files_updated")
    conn.execute(
        "CREATE TRIGGER files_updated AFTER UPDATE ON files"
        " WHEN old.created_us IS NOT new.created_us OR old.deleted_us IS NOT new.deleted_us"
        " OR old.canonical IS NOT new.canonical BEGIN"
        " INSERT INTO changes (what, path, rid) VALUES ('files', new.path, NULL); END"
    )
    for name, when, path in (
        ("links_added", "AFTER INSERT ON links", "new.path"),
        ("links_updated", "AFTER UPDATE ON links WHEN old.target IS NOT new.target", "new.path"),
        ("links_removed", "AFTER DELETE ON links", "old.path"),
    ):
        conn.execute(
            f"CREATE TRIGGER {name} {when} BEGIN INSERT INTO changes (what, path, rid) VALUES ('links', {path}, NULL);"
            " END"
        )


def _m010_logs_keep_no_modifications(conn: sqlite3.Connection) -> None:
    # Spec v2.3 (1.4): an append to a JSON Lines source is not a modification; a log keeps only created and deleted.
    # Every log tailed has a cursor (the globs are config, unknown here; the cursors are what was read as a log), and
    # up to now each of its ingest passes added a row here.
    conn.execute("DELETE FROM file_changes WHERE path IN (SELECT path FROM cursors)")


#: Named migrations, applied in order and recorded in the ``migrations`` table.
MIGRATIONS: Sequence[tuple[str, Migration]] = (
    ("001_initial", _m001_initial),
    ("002_check_detail", _m002_check_detail),
    ("003_history", _m003_history),
    ("004_citations_by_line", _m004_citations_by_line),
    ("005_change_feed", _m005_change_feed),
    ("006_drop_unused_indexes", _m006_drop_unused_indexes),
    ("007_feed_file_changes_only", _m007_feed_file_changes_only),
    ("008_store_id", _m008_store_id),
    ("009_symlinks", _m009_symlinks),
    ("010_logs_keep_no_modifications", _m010_logs_keep_no_modifications),
)

_EVENT_COLUMNS = (
    "path, generation, line, id, ts_us, agent, kind, thread, text, prompt, reason, alternatives, subject, corrects"
)


def _event(r: tuple[Any, ...], cites: list[Citation]) -> Event:
    """An event from a row of ``rowid`` followed by the event columns."""
    return Event(
        id=r[4], ts=from_us(r[5]), agent=r[6], kind=r[7], path=r[1], line=r[3] or None, generation=r[2],
        thread=r[8], text=r[9], citations=tuple(cites), prompt=r[10], reason=r[11],
        alternatives=_from_json_list(r[12]), subject=_from_json_list(r[13]), corrects=r[14],
    )


#: One ``events`` row in :data:`_EVENT_COLUMNS` order, and one ``citations`` row.
EventRow = tuple[str, int, int, str, int, str, str, str | None, str, str | None, str | None, str, str, str | None]
CitationRow = tuple[str, int, int, int, str, str]


def event_rows(events: Iterable[Event]) -> tuple[list[EventRow], list[CitationRow]]:
    """The rows :meth:`Store.add_events` inserts for ``events`` (ingest builds them once, while parsing)."""
    rows: list[EventRow] = []
    cites: list[CitationRow] = []
    for e in events:
        line = e.line or 0
        rows.append((e.path, e.generation, line, e.id, to_us(e.ts), e.agent, e.kind, e.thread, e.text, e.prompt,
                     e.reason, _json_list(e.alternatives), _json_list(e.subject), e.corrects))
        if e.citations:  # most events cite nothing: no generator for those
            cites.extend((e.path, e.generation, line, i, c.type, c.target) for i, c in enumerate(e.citations))
    return rows, cites


_FILE_COLUMNS = "path, created_us, deleted_us, mtime_ns, size, sha, front_matter, canonical"
#: The same for a store opened read-only before migration 009 (a daemon of the last version wrote it): no names.
_FILE_COLUMNS_BEFORE_009 = _FILE_COLUMNS.replace("canonical", "NULL")


def _index_row(r: tuple[Any, ...]) -> IndexRow:
    """An IndexRow from a row of :data:`_FILE_COLUMNS`."""
    return IndexRow(r[0], from_us(r[1]), from_us(r[2]) if r[2] is not None else None, r[3], r[4], r[5], bool(r[6]),
                    r[7])


def _json_list(items: tuple[str, ...]) -> str:
    return json.dumps(items) if items else "[]"


def _from_json_list(text: str) -> tuple[str, ...]:
    return tuple(json.loads(text)) if text != "[]" else ()


class Store:
    """One SQLite database; construct with :meth:`open`. Not thread-safe: one writer.

    ``gate``, shared by the writer and a reader that runs often (the daemon's evaluations): see :class:`Gate`.
    """

    def __init__(self, conn: sqlite3.Connection, gate: Gate | None = None) -> None:
        self.conn = conn
        self.db = sqlite_utils.Database(conn)
        self.gate = gate
        #: Called after every COMMIT that went through (the ingester learns what is now durable).
        self.on_commit: Callable[[], None] | None = None
        #: Called when a transaction atomic() began is rolled back (what it staged will never be durable).
        self.on_rollback: Callable[[], None] | None = None
        #: True while the open transaction is all or nothing by its owner's rule (an ingest group, which any error
        #: rolls back whole): atomic() blocks inside it need no savepoints, which cost two statements each.
        self.grouped = False
        self._pre_009: bool | None = None

    @classmethod
    def open(cls, path: Path | str, *, readonly: bool = False, gate: Gate | None = None) -> Store:
        """Open (creating and migrating unless ``readonly``) the database at ``path``; ``gate``: see the class."""
        if readonly:
            if str(path) != ":memory:" and not Path(path).exists():
                raise FileNotFoundError(f"no database at {path}")
            # Any thread may use it (the daemon's evaluations run in worker threads), one at a time.
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=5000")
        store = cls(conn, gate)
        if not readonly:
            store.migrate()
        return store

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One transaction (``BEGIN IMMEDIATE``: the write lock up front, so no upgrade deadlock)."""
        if self.conn.in_transaction:
            if self.grouped:
                yield
                return
            with self.db.atomic():
                yield
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.commit()
        except BaseException:
            # SQLite may already have rolled back (SQLITE_FULL does); a failed COMMIT leaves it open.
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            if self.on_rollback is not None:
                self.on_rollback()
            raise

    def commit(self) -> None:
        """COMMIT the open transaction, once no gated reader holds a snapshot (see :class:`Gate`)."""
        with self.gate.committing() if self.gate is not None else nullcontext():
            self.conn.execute("COMMIT")
        if self.on_commit is not None:
            self.on_commit()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One read transaction, holding the gate (nothing to do inside a transaction already open)."""
        conn = self.conn
        if conn.in_transaction:
            yield
            return
        with self.gate.reading() if self.gate is not None else nullcontext():
            conn.execute("BEGIN")
            try:
                yield
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded; returns their names."""
        self.conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        done = {row[0] for row in self.conn.execute("SELECT name FROM migrations")}
        applied = []
        for name, migration in MIGRATIONS:
            if name in done:
                continue
            with self.atomic():
                migration(self.conn)
                self.conn.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                    (name, datetime.now(UTC).isoformat()),
                )
            applied.append(name)
        return applied

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

    def history(self, agent: str) -> list[DayCounts]:
        """Every stored day of one agent, by day and window."""
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        for day, window, component, passed, counted, pending, decisions in self.conn.execute(
            "SELECT day, window, component, passed, counted, pending, decisions FROM history WHERE agent = ?"
            " ORDER BY day, window",
            (agent,),
        ):
            entry = rows.setdefault((day, window), {"decisions": decisions, "components": {}})
            entry["components"][component] = ComponentResult(passed, counted, pending)
        return [
            DayCounts(date.fromisoformat(day), agent, window, v["decisions"],
                      tuple(v["components"].get(c, ComponentResult(0, 0, 0)) for c in COMPONENTS))
            for (day, window), v in rows.items()
        ]

    def checkpoint(self) -> tuple[int, int, int]:
        """``PRAGMA wal_checkpoint(TRUNCATE)``: fold the WAL into the database and truncate it."""
        row = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return (int(row[0]), int(row[1]), int(row[2]))

    def migrations(self) -> list[str]:
        """Names of the applied migrations, in order."""
        return [r[0] for r in self.conn.execute("SELECT name FROM migrations ORDER BY rowid")]

    # --- writes (call inside atomic())

    def add_events(self, events: Sequence[Event]) -> int:
        """Insert events (heartbeat lines, or Markdown decisions with line 0); replays are ignored.

        Returns how many were new. A replayed event's citations are ignored by the same key.
        """
        return self.add_event_rows(*event_rows(events))

    def add_event_rows(self, rows: Sequence[EventRow], citation_rows: Sequence[CitationRow]) -> int:
        """:meth:`add_events` for rows already built by :func:`event_rows`."""
        cur = self.conn.executemany(
            f"INSERT OR IGNORE INTO events ({_EVENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows
        )
        self.conn.executemany(
            "INSERT OR IGNORE INTO citations (path, generation, line, seq, type, target) VALUES (?,?,?,?,?,?)",
            citation_rows,
        )
        return max(cur.rowcount, 0)

    def add_labels(self, labels: Iterable[Label]) -> int:
        """Insert labels; replays are ignored."""
        cur = self.conn.executemany(
            "INSERT OR IGNORE INTO labels (path, generation, line, ts_us, decision, value, reviewer)"
            " VALUES (?,?,?,?,?,?,?)",
            [(lb.path, lb.generation, lb.line, to_us(lb.ts), lb.decision, lb.value, lb.reviewer) for lb in labels],
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
        self.conn.execute(
            "INSERT INTO files (path, created_us, deleted_us, mtime_ns, size, sha, front_matter, canonical)"
            " VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (path) DO UPDATE SET created_us = excluded.created_us,"
            " deleted_us = excluded.deleted_us, mtime_ns = excluded.mtime_ns, size = excluded.size,"
            " sha = excluded.sha, front_matter = excluded.front_matter, canonical = excluded.canonical",
            (row.path, to_us(row.created), to_us(row.deleted) if row.deleted else None, row.mtime_ns, row.size,
             row.sha, int(row.front_matter), row.canonical),
        )

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

    # --- reads

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
        return {r[0]: _index_row(r) for r in self.conn.execute(f"SELECT {self._file_columns()} FROM files")}

    def index_rows_get(self, path: str) -> IndexRow | None:
        """The stored file-index state of one path."""
        r = self.conn.execute(f"SELECT {self._file_columns()} FROM files WHERE path = ?", (path,)).fetchone()
        return None if r is None else _index_row(r)

    def links(self) -> dict[str, str | None]:
        """The symlinks inside the root as the last pass saw them (collectors/links.py)."""
        if self._before_009():
            return {}
        return {r[0]: r[1] for r in self.conn.execute("SELECT path, target FROM links ORDER BY path")}

    def _before_009(self) -> bool:
        """True for a store opened read-only that an older honestyd wrote (only a writable open migrates): it is read
        as that version read it, with no symlinks recorded, rather than refused."""
        if self._pre_009 is None:
            self._pre_009 = "009_symlinks" not in self.migrations()
        return self._pre_009

    def _file_columns(self) -> str:
        return _FILE_COLUMNS_BEFORE_009 if self._before_009() else _FILE_COLUMNS

    def document_shas(self) -> dict[str, str | None]:
        """Content hashes of the indexed files (to skip re-parsing unchanged Markdown)."""
        return {r[0]: r[1] for r in self.conn.execute("SELECT path, sha FROM files")}

    def eval_shas(self) -> dict[str, str]:
        """Content hashes of the stored benchmark reports."""
        return {r[0]: r[1] for r in self.conn.execute("SELECT path, sha FROM evals")}

    def file_entries(self) -> dict[str, FileEntry]:
        """The file index as scorer records (created, modifications, deletion), by canonical path."""
        changes: dict[str, list[datetime]] = {}
        for path, at in self.conn.execute("SELECT path, at_us FROM file_changes ORDER BY path, at_us"):
            changes.setdefault(path, []).append(from_us(at))
        return {
            row.path: FileEntry(row.path, row.created, tuple(changes.get(row.path, ())), row.deleted)
            for row in self.index_rows().values() if row.canonical is None
        }

    def events(self, *, decisions_only: Sequence[str] | None = None) -> list[Event]:
        """Every stored event and Markdown decision (``decisions_only``: those kinds or Markdown)."""
        if decisions_only is None:
            return [e for _, e in self.iter_events()]
        kinds = ",".join("?" * len(decisions_only))
        return [e for _, e in self.iter_events(f"e.line = 0 OR e.kind IN ({kinds})", decisions_only)]

    def iter_events(self, where: str = "", params: Sequence[Any] = ()) -> Iterator[tuple[int, Event]]:
        """(rowid, event) of the stored events matching ``where`` (SQL over alias ``e``), in rowid order.

        Streams: one join with the citations, grouped as it goes, so a million events never sit in memory
        twice (the daemon's model slims each one as it arrives).
        """
        sql = (
            f"SELECT e.rowid, {', '.join('e.' + c.strip() for c in _EVENT_COLUMNS.split(','))}, c.type, c.target"
            " FROM events e LEFT JOIN citations c"
            " ON c.path = e.path AND c.generation = e.generation AND c.line = e.line"
            f"{' WHERE ' + where if where else ''} ORDER BY e.rowid, c.seq"
        )
        current: tuple[Any, ...] | None = None
        cites: list[Citation] = []
        for r in self.conn.execute(sql, list(params)):
            if current is None or r[0] != current[0]:
                if current is not None:
                    yield current[0], _event(current, cites)
                current, cites = r, []
            if r[15] is not None:
                cites.append(Citation(r[15], r[16]))
        if current is not None:
            yield current[0], _event(current, cites)

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

    def prune_changes(self, upto: int) -> None:
        """Drop the feed up to ``upto`` (the daemon has applied it)."""
        self.conn.execute("DELETE FROM changes WHERE seq <= ?", (upto,))

    def labels_since(self, rowid: int) -> list[tuple[int, Label]]:
        """(rowid, label) of the labels stored after ``rowid`` (labels are never deleted: rowids only grow)."""
        return [
            (r[0], Label(from_us(r[4]), r[5], r[6], r[7], r[1], r[3], r[2]))
            for r in self.conn.execute(
                "SELECT rowid, path, generation, line, ts_us, decision, value, reviewer FROM labels WHERE rowid > ?"
                " ORDER BY rowid", (rowid,)
            )
        ]

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
        return [e for _, e in self.iter_events("e.id IN (SELECT value FROM json_each(?))", (json.dumps(sorted(ids)),))]

    def labels_on(self, decisions: Collection[str]) -> list[Label]:
        """The labels on these decisions, in rowid order (one scan, no index: see :meth:`events_with_ids`)."""
        return [
            Label(from_us(r[3]), r[4], r[5], r[6], r[0], r[2], r[1])
            for r in self.conn.execute(
                "SELECT path, generation, line, ts_us, decision, value, reviewer FROM labels"
                " WHERE decision IN (SELECT value FROM json_each(?)) ORDER BY rowid", (json.dumps(sorted(decisions)),)
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

    def file_entry(self, path: str) -> FileEntry | None:
        """One path's file-index entry as scorer record, or None (a name through a symlink has none)."""
        row = self.index_rows_get(path)
        if row is None or row.canonical is not None:
            return None
        changes = tuple(from_us(r[0]) for r in self.conn.execute(
            "SELECT at_us FROM file_changes WHERE path = ? ORDER BY at_us", (path,)))
        return FileEntry(path, row.created, changes, row.deleted)

    def labels(self) -> list[Label]:
        """Every stored label."""
        return [
            Label(from_us(r[3]), r[4], r[5], r[6], r[0], r[2], r[1])
            for r in self.conn.execute(
                "SELECT path, generation, line, ts_us, decision, value, reviewer FROM labels"
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

    def rejects(self) -> list[dict[str, Any]]:
        """Every refused line or file, in read order."""
        cols = ("path", "generation", "line", "source", "reason", "snippet", "seen_us")
        return [
            dict(zip(cols, r, strict=True))
            for r in self.conn.execute(f"SELECT {', '.join(cols)} FROM rejects ORDER BY path, generation, line")
        ]

    def has_id_above(self, record_id: str, rowid: int) -> bool:
        """True iff an event with this id has a rowid above ``rowid``: a range of the primary key, not the whole
        table (there is no index on id: see :meth:`events_with_ids`)."""
        row = self.conn.execute("SELECT 1 FROM events WHERE rowid > ? AND id = ? LIMIT 1", (rowid, record_id))
        return row.fetchone() is not None

    def has_agent(self, agent: str) -> bool:
        """True iff an event by ``agent`` is stored (a scan until the first: for the CLI, not the daemon)."""
        return self.conn.execute("SELECT 1 FROM events WHERE agent = ? LIMIT 1", (agent,)).fetchone() is not None

    def counts(self) -> dict[str, int]:
        """Row counts of the main tables (for summaries and tests)."""
        return {
            t: self.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("events", "labels", "rejects", "files", "checks", "evals")
        }

    def copy_rows(self, table: str, rows: Sequence[Sequence[Any]]) -> int:
        """Insert rows salvaged from a damaged store (``honestyd store rebuild``) into ``table``, in the columns of
        :func:`copy_columns`; a row already there is left alone. Returns how many were new. Call inside atomic()."""
        columns = _COPYABLE[table]
        cur = self.conn.executemany(
            f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows)
        return max(cur.rowcount, 0)


# --- checking and salvaging a damaged file (`honestyd store check`, `honestyd store rebuild`, the daemon's start)


def quick_check(path: Path, *, thorough: bool = False, readonly: bool = True) -> list[str]:
    """What SQLite finds wrong with the database at ``path`` ([] when sound, or when there is no file yet).

    ``PRAGMA quick_check`` reads every page once (the daemon's start); ``thorough``: ``integrity_check``, which also
    compares every index with its table (``honestyd store check``). A file that is not a database at all is one
    problem, SQLite's message; one that cannot be opened (permissions, a folder there) raises OperationalError.
    ``readonly`` False: the caller is the store's writer (it holds the lock), and a read-write connection removes the
    ``-wal`` and ``-shm`` it finds empty when it closes, where a read-only one leaves them.
    """
    if not path.exists():
        return []
    conn = sqlite3.connect(f"file:{path}?mode={'ro' if readonly else 'rw'}", uri=True, isolation_level=None)
    try:
        rows = conn.execute(f"PRAGMA {'integrity_check' if thorough else 'quick_check'}(100)").fetchall()
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError as exc:  # SQLITE_CORRUPT, SQLITE_NOTADB: the answer, not a failure to ask
        return [str(exc)]
    finally:
        conn.close()
    found = [str(r[0]) for r in rows]
    return [] if found == ["ok"] else found


class Salvage:
    """A damaged store opened read-only, read row by row around what cannot be read.

    Rows are read in rowid order, a few hundred at a time; where a read fails, the next readable rowid is found by
    probing further and further ahead, then bisecting back (a damaged page holds a contiguous run of rowids), and the
    run skipped is recorded in :attr:`lost`, so a report can say what was given up. A table that cannot be read at all
    is lost from its first rowid.
    """

    BATCH = 256

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        #: table → the runs of rowids (first, last; last None: to the end) that could not be read.
        self.lost: dict[str, list[tuple[int, int | None]]] = {}

    @classmethod
    def open(cls, path: Path) -> Salvage:
        """Open the damaged file at ``path`` read-only."""
        return cls(sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None))

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> Salvage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def columns(self, table: str) -> set[str]:
        """The columns ``table`` has in this file (empty when its schema cannot be read)."""
        try:
            return {str(r[1]) for r in self.conn.execute(f"PRAGMA table_info({table})")}
        except sqlite3.DatabaseError:
            return set()

    def rows(self, table: str, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        """(rowid, *columns) of every readable row of ``table``, in rowid order."""
        sql = f"SELECT rowid, {', '.join(columns)} FROM {table} NOT INDEXED WHERE rowid > ? ORDER BY rowid LIMIT ?"
        after = _MIN_ROWID
        while True:
            try:
                batch = self.conn.execute(sql, (after, self.BATCH)).fetchall()
            except sqlite3.DatabaseError:
                try:  # one at a time up to the row that fails
                    batch = self.conn.execute(sql, (after, 1)).fetchall()
                except sqlite3.DatabaseError:
                    resume = self._next_readable(sql, after)
                    self.lost.setdefault(table, []).append(
                        (after + 1 if after != _MIN_ROWID else 1, resume if resume is not None else None))
                    if resume is None:
                        return
                    after = resume
                    continue
            if not batch:
                return
            yield from batch
            after = int(batch[-1][0])

    def _next_readable(self, sql: str, after: int) -> int | None:
        """The smallest ``x`` > ``after`` from which rows can be read again (``rowid > x``), or None."""

        def readable(x: int) -> bool:
            try:
                self.conn.execute(sql, (x, 1)).fetchall()
            except sqlite3.DatabaseError:
                return False
            return True

        low, step = after, 1
        while True:
            probe = min(low + step, _MAX_ROWID)
            if readable(probe):
                high = probe
                break
            if probe == _MAX_ROWID:
                return None
            low, step = probe, step * 2
        while high - low > 1:
            mid = (low + high) // 2
            if readable(mid):
                high = mid
            else:
                low = mid
        return high

    def citations(self, path: str, generation: int, line: int) -> list[tuple[int, str, str]] | None:
        """(seq, type, target) of one event's citations, or None when they cannot be read."""
        try:
            return [(int(r[0]), str(r[1]), str(r[2])) for r in self.conn.execute(
                "SELECT seq, type, target FROM citations WHERE path = ? AND generation = ? AND line = ? ORDER BY seq",
                (path, generation, line))]
        except sqlite3.DatabaseError:
            return None


_MIN_ROWID = -(2**63)
_MAX_ROWID = 2**63 - 1
#: What ``Store.copy_rows`` may write, and with which columns (salvaged rows of tables nothing re-derives).
_COPYABLE = {
    "labels": ("path", "generation", "line", "ts_us", "decision", "value", "reviewer"),
    "rejects": ("path", "generation", "line", "source", "reason", "snippet", "seen_us"),
    "checks": ("target", "type", "checked_us", "ok", "status", "detail"),
    "file_changes": ("path", "at_us"),
    "history": ("day", "agent", "window", "component", "passed", "counted", "pending", "decisions"),
}


def copy_columns(table: str) -> tuple[str, ...]:
    """The columns :meth:`Store.copy_rows` takes for ``table``."""
    return _COPYABLE[table]
