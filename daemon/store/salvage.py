"""Checking a store file and reading a damaged one (`honestyd store check`, `honestyd store rebuild`, the daemon's
start, the CLI's look at a ``--db``): each opens a connection of its own, never the writer's."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from collectors.safeopen import open_for_reading
from daemon.store.connection import Closing

#: Bytes read at a time when a store is read ahead of its check.
READ_AHEAD = 1 << 20


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
    read_ahead(path)
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


def read_ahead(path: Path) -> None:
    """Read the file at ``path`` once in order, so that a check of every page finds them in the page cache.

    A check reads the pages in the b-trees' order: on a cold page cache (after a reboot, or a host that gives its cache
    back), random reads, seconds per gigabyte, where reading the file in order first costs a fraction of that
    (docs/performance.md). The pages are the kernel's cache, not this process's memory. Anything but a regular file,
    or one that cannot be read, is left to the check to judge (opened without waiting: a FIFO there does not block).
    """
    try:
        with open_for_reading(str(path)) as f:
            _read_through(f.fileno())
    except OSError:  # not a regular file (RefusedFile), gone, unreadable
        return


def _read_through(fd: int) -> None:
    """Read the file open at ``fd`` to its end: in one ``sendfile`` to /dev/null where the kernel can (the bytes never
    come up to Python, and the thread does not wait for the GIL between chunks while a start's other threads hold
    it), else in chunks."""
    size = os.fstat(fd).st_size
    offset = 0
    sink = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    try:
        while offset < size and (sent := os.sendfile(sink, fd, offset, size - offset)) > 0:
            offset += sent
    except OSError:  # a file system sendfile cannot read from: the rest in chunks
        os.lseek(fd, offset, os.SEEK_SET)
        while os.read(fd, READ_AHEAD):
            pass
    finally:
        os.close(sink)


class Salvage(Closing):
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


def table_names(path: str) -> set[str] | None:
    """The tables of the SQLite file at ``path`` (empty: a database with none yet), or None when SQLite cannot tell.

    Opened immutable: no ``-wal`` or ``-shm`` file is made beside it (a look leaves nothing behind). A schema still in
    the WAL, or pages a writer is changing, may be missed or unreadable that way: the caller's own reading decides.
    """
    uri = "file:" + urllib.parse.quote(path) + "?mode=ro&immutable=1"
    try:
        conn = sqlite3.connect(uri, uri=True)
        try:
            return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        finally:
            conn.close()
    except sqlite3.Error:
        return None
