"""JSON Lines sources (heartbeats, labels, reviews): tailed from their saved cursor, following rotation and truncation.

Each batch of lines is stored with the cursor moved past it, in one transaction: a crash keeps all of a batch or none
of it, and a replay after one adds nothing twice. A log renamed away (rotation) is drained where it now lives before
its new file is read; what rotation took unread is counted (daemon/skips.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import replace

from collectors.safeopen import RefusedFile, open_for_reading
from collectors.sources import LOGS
from collectors.statedir import FileInfo, inside
from collectors.tail import Cursor, Lines, advance, find_rotated, line_batches, matches, new_cursor
from daemon import gcpolicy
from daemon.ingest.parse import Parsed, parse_batch
from daemon.ingest.state import IngestState, IngestStats
from daemon.skips import vanished

log = logging.getLogger("honestyd.ingest")


class LogTailing(IngestState):
    """The steps of a pass for the JSON Lines sources (see the module)."""

    def _tail(self, rel: str, info: FileInfo | None) -> IngestStats:
        """Read what is new in one JSON Lines source, following rotation and truncation."""
        stats = IngestStats()
        source = self.source_of(rel) or "heartbeats"
        cursor = self._cursor(rel)
        seen = self.sightings(rel, self._stat_at) if self.sightings is not None else None
        if cursor is not None and seen is not None:
            self.losses.remember(rel, cursor)
        moved = cursor is not None and (info is None or (info.dev, info.ino) != (cursor.dev, cursor.ino))
        old = None
        if cursor is not None and moved:
            # Identity changed or the file is gone: finish the old file wherever it now lives.
            old = self._rotated_copy(rel, cursor)
            if old is not None:
                drained = self._read(old, cursor, source, stats)
                if seen is not None:
                    self.losses.remember(rel, drained)
        if cursor is not None and moved and old is None and info is not None and self._same_log(info, cursor):
            # The bytes read are all there under a new inode: a state copied or restored, or a writer that saves the
            # whole log through a temporary file. Read on from the cursor; a new generation would store every line
            # again (each a duplicate of its id: spec 1.1 drops them, the store would hold them twice).
            log.info("%s: the same log under a new inode; reading on after line %d", rel, cursor.line)
            cursor, moved, old = replace(cursor, dev=info.dev, ino=info.ino), False, info.abspath
        if seen is not None and (seen.generations or seen.moved_to):
            self.losses.count(rel, seen, info, cursor, old)
        if info is None:
            return stats
        if cursor is not None and moved:
            cursor = new_cursor(rel, info.dev, info.ino, cursor.generation + 1)
        if cursor is None:
            cursor = new_cursor(rel, info.dev, info.ino)
        self._read(info.abspath, cursor, source, stats)
        return stats

    @staticmethod
    def _same_log(info: FileInfo, cursor: Cursor) -> bool:
        """True iff the file ``info`` names holds what ``cursor`` read of another inode (head and marker match)."""
        if cursor.offset == 0:
            return False  # nothing read: nothing to recognise it by, and nothing to store twice
        try:
            f = open_for_reading(info.abspath)
        except OSError:  # gone, or no longer a regular file
            return False
        with f:
            st = os.fstat(f.fileno())
            return (st.st_dev, st.st_ino) == (info.dev, info.ino) and matches(f.fileno(), cursor)

    def _rotated_copy(self, rel: str, cursor: Cursor) -> str | None:
        """Where the cursor's file now lives under another name (rename rotation), if it may be drained as ``rel``."""
        root_real = os.path.realpath(self.root)
        directory = os.path.dirname(os.path.realpath(os.path.join(self.root, rel)))
        # A symlinked log re-pointed out of the root must not lead the drain there (spec 1: never read).
        if not inside(root_real, directory):
            return None
        old = find_rotated(directory, cursor)
        # A file that is itself a JSON Lines source (e.g. a new log given the freed inode, which ext4 does at once)
        # is read under its own name; draining it here as well would ingest its lines twice.
        if old is not None and self.source_of(os.path.relpath(old, root_real)) in LOGS:
            return None
        return old

    def _read(self, abspath: str, cursor: Cursor, source: str, stats: IngestStats) -> Cursor:
        try:
            f = open_for_reading(abspath)  # never a FIFO or device: one swapped in since the stat is not waited on
        except RefusedFile:
            return cursor
        except OSError as exc:
            if not vanished(exc):
                self.unreadable.failed(cursor.path, exc)
            return cursor
        self.unreadable.read(cursor.path)
        with f:
            fd = f.fileno()
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != (cursor.dev, cursor.ino):
                return cursor  # replaced between stat and open: the next pass sees the new one
            if not matches(fd, cursor):
                log.info("%s: truncated or rewritten; reading again from the start", cursor.path)
                cursor = new_cursor(cursor.path, cursor.dev, cursor.ino, cursor.generation + 1)
            line = cursor.line
            unread = line_batches(f, cursor.offset, self.batch_lines)
            read = True
            while read:
                # A batch's lines and rows are thousands of new objects, kept until its commit and gone after it, and
                # reading, parsing and storing them makes no cycles: a collection would only walk them again and again.
                with gcpolicy.paused(freeze=False):
                    cursor, line, read = self._batch(unread, cursor, fd, line, source, stats)
            if self._cursor(cursor.path) != cursor:  # a new or restarted file with no line yet: its cursor is stored
                cursor = self._commit(self._parse([], cursor, line, source), cursor, fd, cursor.offset, line, source,
                                      stats)
        return cursor

    def _batch(self, unread: Iterator[tuple[Lines, int]], cursor: Cursor, fd: int, line: int, source: str,
               stats: IngestStats) -> tuple[Cursor, int, bool]:
        """Parse and store the next batch of ``unread``, the lines after ``line`` (where ``cursor`` stands); returns
        the cursor and line after them, and whether there was one. Its objects die as it returns."""
        batch = next(unread, None)
        if batch is None:
            return cursor, line, False
        lines, end = batch
        line += len(lines)
        return self._commit(self._parse(lines, cursor, line, source), cursor, fd, end, line, source, stats), line, True

    def _parse(self, lines: list[tuple[bytes | None, bytes]], cursor: Cursor, last: int, source: str) -> Parsed:
        """Parse ``lines``, the last of which is line ``last`` of the cursor's file."""
        return parse_batch(lines, cursor.path, last - len(lines) + 1, cursor.generation, source,
                           self.config.github_repo)

    def _commit(
        self, parsed: Parsed, cursor: Cursor, fd: int, end: int, line: int, source: str, stats: IngestStats
    ) -> Cursor:
        """Store a parsed batch with the cursor moved to just after its last line (``end``, ``line``)."""
        moved = advance(cursor, fd, end, line)
        # Rows, rejects and the cursor in one transaction: a crash keeps all of this batch or none of it.
        # A refused write (sqlite3.OperationalError: SQLITE_FULL, or locked past busy_timeout) rolls the whole
        # batch back, cursor included, and propagates: the daemon keeps the path pending and retries it later.
        with self.store.transaction():
            if parsed.rows:
                self._count(stats, source, self.store.add_event_rows(parsed.rows, parsed.citations))
            if parsed.labels:
                self._count(stats, source, self.store.add_labels(parsed.labels))
            if parsed.reviews:
                self._count(stats, source, self.store.add_review_events(parsed.reviews))
            for reject in parsed.rejects:
                self._reject(reject, source, cursor.generation, stats)
            self._put_cursor(moved)
        if self._group_lines is not None:
            self._group_lines += len(parsed.rows) + len(parsed.labels) + len(parsed.rejects) + len(parsed.reviews)
            self._group_check()  # a long file does not hold one transaction open from start to end
        return moved
