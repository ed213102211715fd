"""The store's connection: opening (and migrating), and every transaction, read or write, begun or ended.

No other module of honestyd begins, commits or rolls back a transaction: writers take :meth:`Connection.transaction`
(or :meth:`Connection.group` for an ingest's run of them), the daemon's evaluations :meth:`Connection.reading`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Self

import sqlite_utils

from daemon.store.gate import Gate
from daemon.store.migrations import MIGRATIONS
from daemon.store.rows import FILE_COLUMNS, FILE_COLUMNS_BEFORE_009, FILE_COLUMNS_BEFORE_014


class Closing:
    """A holder of one SQLite connection, closed by :meth:`close` or at the end of a ``with`` block."""

    conn: sqlite3.Connection

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    @property
    def file(self) -> Path | None:
        """The database file this connection reads (None: an in-memory database)."""
        name = self.conn.execute("PRAGMA database_list").fetchone()[2]
        return Path(name) if name else None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Connection(Closing):
    """One SQLite database; construct with :meth:`open`. Not thread-safe: one writer.

    ``gate``, shared by the writer and a reader that runs often (the daemon's evaluations): see :class:`Gate`.
    """

    def __init__(self, conn: sqlite3.Connection, gate: Gate | None = None) -> None:
        #: The raw connection: for the store's own modules (and tests that stage faults), nobody else.
        self.conn = conn
        self.db = sqlite_utils.Database(conn)
        self.gate = gate
        #: Called after every COMMIT that went through (the ingester learns what is now durable).
        self.on_commit: Callable[[], None] | None = None
        #: Called when a transaction this store began is rolled back (what it staged will never be durable).
        self.on_rollback: Callable[[], None] | None = None
        #: True while the open transaction is all or nothing by its owner's rule (an ingest group, which any error
        #: rolls back whole): transaction() blocks inside it need no savepoints, which cost two statements each.
        self.grouped = False
        self._pre_009: bool | None = None
        self._pre_014: bool | None = None

    @classmethod
    def open(cls, path: Path | str, *, readonly: bool = False, gate: Gate | None = None) -> Self:
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

    # --- write transactions

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction (``BEGIN IMMEDIATE``: the write lock up front, so no upgrade deadlock); all or nothing.

        Inside an open one it is a savepoint (nothing, inside a :meth:`group`). An error rolls it back, calls
        :attr:`on_rollback` and propagates.
        """
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

    #: The name the writers used before :meth:`transaction`; the same thing.
    atomic = transaction

    @contextmanager
    def group(self) -> Iterator[Callable[[], None]]:
        """Transactions one after another that fail as one: each error rolls back the open one whole and propagates.

        Yields ``next``: commit the open transaction and begin the next, at a point where no savepoint is open (an
        ingest commits every so many lines). Leaving the block commits the last. :meth:`transaction` blocks inside
        take no savepoints (:attr:`grouped`): there is no partial transaction to keep. On an error (a refused write,
        a failed BEGIN or COMMIT) the open transaction, if SQLite left one, is rolled back and :attr:`on_rollback`
        called; what ``next`` committed stays.
        """
        ended = False
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            self.grouped = True
            yield self._next_in_group
            self.commit()
            ended = True
        finally:
            self.grouped = False
            if not ended:
                # Whether or not SQLite has rolled back already (SQLITE_FULL does, and leaves no transaction open).
                if self.conn.in_transaction:
                    self.conn.rollback()
                if self.on_rollback is not None:
                    self.on_rollback()

    def _next_in_group(self) -> None:
        self.commit()
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        """COMMIT the open transaction, once no gated reader holds a snapshot (see :class:`Gate`)."""
        with self.gate.committing() if self.gate is not None else nullcontext():
            self.conn.execute("COMMIT")
        if self.on_commit is not None:
            self.on_commit()

    def end_refused(self) -> None:
        """End the transaction a refused write left open (SQLITE_FULL or BUSY may leave a failed COMMIT's), or every
        later :meth:`transaction` would nest in it as a savepoint and never commit; nothing when none is open.
        Calls no :attr:`on_rollback`: whoever began it has been told already."""
        self.conn.rollback()

    # --- read transactions

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

    # --- the schema

    def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded; returns their names."""
        self.conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        done = {row[0] for row in self.conn.execute("SELECT name FROM migrations")}
        applied = []
        for name, migration in MIGRATIONS:
            if name in done:
                continue
            with self.transaction():
                migration(self.conn)
                self.conn.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (?, ?)",
                    (name, datetime.now(UTC).isoformat()),
                )
            applied.append(name)
        return applied

    def migrations(self) -> list[str]:
        """Names of the applied migrations, in order."""
        return [r[0] for r in self.conn.execute("SELECT name FROM migrations ORDER BY rowid")]

    def tables(self) -> set[str]:
        """The names of the tables in the database (an honestyd store has ``migrations``)."""
        return {str(r[0]) for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def checkpoint(self) -> tuple[int, int, int]:
        """``PRAGMA wal_checkpoint(TRUNCATE)``: fold the WAL into the database and truncate it."""
        row = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return (int(row[0]), int(row[1]), int(row[2]))

    def _before_009(self) -> bool:
        """True for a store opened read-only that an older honestyd wrote (only a writable open migrates): it is read
        as that version read it, with no symlinks recorded, rather than refused."""
        if self._pre_009 is None:
            self._pre_009 = "009_symlinks" not in self.migrations()
        return self._pre_009

    def _file_columns(self) -> str:
        if self._before_009():
            return FILE_COLUMNS_BEFORE_009
        if self._pre_014 is None:  # read-only, written before migration 014: no fingerprints (each file is read)
            self._pre_014 = "014_file_fingerprints" not in self.migrations()
        return FILE_COLUMNS_BEFORE_014 if self._pre_014 else FILE_COLUMNS
