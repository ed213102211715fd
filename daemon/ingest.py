"""Exactly-once ingestion of a state directory into the store.

One pass (:meth:`Ingester.scan`) walks the root in read order, updates the file index,
tails every JSON Lines source from its saved cursor and re-parses changed Markdown and
report files. Rows, rejects and the cursor that produced them are committed in one
transaction per batch, so a crash at any point loses nothing and doubles nothing.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple, TypeVar

from collectors.evals import parse_eval
from collectors.jsonl import parse_event, parse_label, strip_ending
from collectors.links import LinkMap, named_entries, other_names
from collectors.markdown import decode, front_matter_ts, parse_markdown
from collectors.poll import Seen
from collectors.records import Event, Label, Reject
from collectors.safeopen import RefusedFile, open_for_reading, read_regular
from collectors.statedir import Confinement, FileInfo, glob_match, inside, link_target, stat_file, walk_tree
from collectors.tail import Cursor, advance, complete_lines, find_rotated, matches, new_cursor
from daemon.config import Config
from daemon.rejectlog import RejectLog
from daemon.skips import RotationLosses, Unreadable, vanished
from daemon.store import CitationRow, EventRow, IndexRow, Store, event_rows

log = logging.getLogger("honestyd.ingest")

BATCH_LINES = 5000
#: The JSON Lines sources: tailed by cursor; an append to one is not a modification (spec 1.4, v2.3).
LOGS = ("heartbeats", "labels")
T = TypeVar("T")
Clock = Callable[[], datetime]
#: What was seen of a log (its generations, where it was renamed to) since the last call for that path and before
#: the given ``time.monotonic()`` (daemon: the log poller's :meth:`~collectors.poll.LogPoller.take`, told of
#: renames by the watcher), so that a generation rotated away unread is counted as lost (daemon/skips.py).
Sightings = Callable[[str, float], Seen]


def system_clock() -> datetime:
    """The wall clock, as an aware UTC datetime."""
    return datetime.now(UTC)


def store_full(exc: BaseException) -> sqlite3.Error | None:
    """The SQLITE_FULL error behind ``exc`` (database or disk full, or ``max_page_count`` reached), else None.

    The chain is walked because SQLite rolls a transaction back itself on SQLITE_FULL, so the ROLLBACK in
    :meth:`Store.atomic` then fails with "no transaction is active", raised with the real error as its context.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, sqlite3.Error) and getattr(seen, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


class Parsed(NamedTuple):
    """What a batch of lines holds: event rows for the store (see :func:`daemon.store.event_rows`), labels, rejects."""

    rows: list[EventRow]
    citations: list[CitationRow]
    labels: list[Label]
    rejects: list[Reject]


def parse_line(data: bytes | None, snippet: bytes, path: str, line: int, generation: int, source: str,
               repo: str) -> Event | Label | Reject:
    """One line of a heartbeat log or a labels file as a record, or the reason it is refused."""
    if data is None:
        return Reject(path, line, "oversized", snippet.decode("utf-8", "replace")[:200])
    data = strip_ending(data)
    if source == "labels":
        return parse_label(data, path, line, generation)
    return parse_event(data, path, line, repo, generation)


def parse_batch(lines: list[tuple[bytes | None, bytes]], path: str, first: int, generation: int, source: str,
                repo: str) -> Parsed:
    """Parse consecutive lines of one source, the first being line ``first`` (pure)."""
    events: list[Event] = []
    labels: list[Label] = []
    rejects: list[Reject] = []
    for n, (data, snippet) in enumerate(lines, first):
        parsed = parse_line(data, snippet, path, n, generation, source, repo)
        if isinstance(parsed, Event):
            events.append(parsed)
        elif isinstance(parsed, Label):
            labels.append(parsed)
        else:
            rejects.append(parsed)
    rows, citations = event_rows(events)
    return Parsed(rows, citations, labels, rejects)


@dataclass
class IngestStats:
    """What one pass did (records by source, rejects by (source, reason))."""

    records: Counter[str] = field(default_factory=Counter)
    rejects: Counter[tuple[str, str]] = field(default_factory=Counter)
    files: int = 0
    deleted: int = 0

    def merge(self, other: IngestStats) -> None:
        """Add another pass's figures to these."""
        # Most figures merged are a single file's, with nothing rejected: Counter.update is not free (four merges
        # per log per pass, a few % of a busy daemon's ingest), so the empty ones are skipped.
        if other.records:
            self.records.update(other.records)
        if other.rejects:
            self.rejects.update(other.rejects)
        self.files += other.files
        self.deleted += other.deleted


def _read_through(cache: dict[str, T], key: str, load: Callable[[str], T]) -> T:
    """``cache[key]``, loaded on a miss."""
    try:
        return cache[key]
    except KeyError:
        value = cache[key] = load(key)
        return value


class Ingester:
    """Feeds one state root into one store. ``observed`` = True means a watcher saw the change now."""

    def __init__(self, store: Store, root: Path, config: Config, clock: Clock = system_clock,
                 reject_log: RejectLog | None = None, sightings: Sightings | None = None) -> None:
        self.store = store
        self.root = root
        self.config = config
        self.clock = clock
        #: Rejected lines are logged through it: ``[limits] reject_log_per_minute`` per file, then a summary.
        self.reject_log = reject_log or RejectLog()
        self.sightings = sightings
        #: What could not be read (logged once each, retried at every rescan), and what rotation took unread.
        self.unreadable = Unreadable()
        self.losses = RotationLosses(root, self._is_log)
        self._stat_at = -math.inf  # time.monotonic() of the stat the file infos of this pass come from
        #: Lines taken in the open transaction group of ingest_paths (None: no group open).
        self._group_lines: int | None = None
        #: Records and rejects the current (or last) pass has committed: when a refused write ends a pass early,
        #: what its earlier transactions committed still counts (their cursors moved, so a retry skips them).
        self.committed = IngestStats()
        self._staged = IngestStats()  # counted since the last COMMIT: committed by the next, or rolled back
        store.on_commit = self._on_commit
        store.on_rollback = self._on_rollback
        self._confinement: Confinement | None = None  # the directories resolved in this ingest_paths
        #: The cursor and index row the store holds for each log tailed here (a path with an entry in _cursors),
        #: so that a log appended to all day is not looked up again in every pass (two of the five statements per
        #: log and pass). A Markdown file's row is not kept: it is read at a scan and when the file changes, and
        #: keeping all of them held 12 MB of the daemon's peak on the benchmark's state of 21,840 files. The daemon
        #: is the store's only writer, and every write goes through here; a rollback drops them all (the store
        #: may have lost what was written since the last COMMIT), and each is read again at its next use.
        self._cursors: dict[str, Cursor | None] = {}
        self._rows: dict[str, IndexRow | None] = {}
        #: The symlinks inside the root as stored (kept with each scan and each watcher event on a link).
        self._links = LinkMap(store.links())
        #: Canonical paths of the files read as logs under some name (a log symlinked in from elsewhere is one too).
        self._logs: set[str] = set()

    def source_of(self, rel: str) -> str | None:
        """Which source a relative path belongs to (heartbeats, labels, briefs, findings, evals)."""
        g = self.config.globs
        for name in ("heartbeats", "labels", "briefs", "findings", "evals"):
            if glob_match(getattr(g, name), rel):
                return name
        return None

    def _is_log(self, rel: str) -> bool:
        return self.source_of(rel) in LOGS

    def _globs(self) -> tuple[str, ...]:
        g = self.config.globs
        return (g.heartbeats, g.labels, g.briefs, g.findings, g.evals)

    # --- whole passes

    def scan(self, *, observed: bool = False) -> IngestStats:
        """One full pass over the root: index, tail, re-parse; deleted files are noticed."""
        self._new_pass()
        stats = IngestStats()
        seen: set[str] = set()
        unreadable = self.unreadable
        unreadable.begin_scan()
        self._stat_at = time.monotonic()
        complete = False
        try:
            tree = walk_tree(self.root, on_error=unreadable.failed)
            links = LinkMap(tree.links)
            if links != self._links:
                with self.store.atomic():
                    self.store.put_links(tree.links)
                self._links = links
            entries = named_entries(tree.files, links, self._globs())
            self._logs = {e.canonical for e in entries if self.source_of(e.path) in LOGS}
            for info in entries:
                seen.add(info.path)
                stats.merge(self.ingest_file(info, observed=observed))
            # Logs that vanished from their glob may have been rotated away: drain them. What a folder that cannot
            # be listed holds is not gone: it is neither drained nor deleted.
            for cursor in self.store.cursors():
                if cursor.path not in seen and not unreadable.hides(cursor.path):
                    stats.merge(self._tail(cursor.path, None))
            stats.merge(self._forget_missing(seen))
            complete = True
        finally:
            unreadable.end_scan(complete)
        self.reject_log.flush()
        return stats

    def ingest_path(self, rel: str, *, observed: bool = True) -> IngestStats:
        """Bring one path up to date (a watcher event): it may be new, changed or gone, or a symlink.

        A file's other names that sources are read under (through symlinks) are brought up to date with it; names
        that a symlink made meanwhile adds are read at the next scan.
        """
        self._stat_at = time.monotonic()
        info = stat_file(self.root, rel, self._confinement)
        if info is None or info.canonical != rel or rel in self._links.links:
            self._refresh_link(rel)  # only for what may be or have been a symlink: no syscall for a plain file
        if info is None:
            stats = IngestStats()
            try:
                os.lstat(os.path.join(self.root, rel))
            except PermissionError:
                return stats  # in a folder that cannot be searched: not gone (the rescan reports the folder)
            except OSError:
                pass
            if self.source_of(rel) in LOGS:
                stats.merge(self._tail(rel, None))
            index = self._row(rel)
            if index is not None and index.deleted is None:
                stats.merge(self._delete(rel))
        else:
            stats = self.ingest_file(info, observed=observed)
        for name in self._other_source_names(rel):
            stats.merge(self.ingest_path(name, observed=observed))
        return stats

    def _other_source_names(self, rel: str) -> list[str]:
        """The names other than ``rel`` that a source glob matches and that name the canonical path ``rel``."""
        links = self._links
        if not links or links.resolve(rel) != rel:
            return []
        return other_names(links, rel, self._globs())

    def _refresh_link(self, rel: str) -> None:
        """Store what the symlink at ``rel`` now leads to, or that there is none there any more."""
        root_real = os.path.realpath(self.root)
        full = os.path.join(self.root, rel)
        directory = (self._confinement or Confinement(self.root)).canonical_dir(os.path.dirname(full))
        if directory is None or any(part.startswith(".") for part in rel.split("/")):
            return  # not a location inside the root: never walked, never stored
        name = rel.rpartition("/")[2]
        location = f"{directory}/{name}" if directory else name
        links = dict(self._links.links)
        if os.path.islink(full):
            target = link_target(root_real, full)
            if location in links and links[location] == target:
                return
            links[location] = target
            with self.store.atomic():
                self.store.put_link(location, target)
        else:
            if location not in links:
                return
            del links[location]
            with self.store.atomic():
                self.store.remove_link(location)
        self._links = LinkMap(links)

    def ingest_paths(self, paths: list[str], *, observed: bool = True) -> IngestStats:
        """Bring several paths up to date (a watcher's batch) in one transaction per ``BATCH_LINES`` lines.

        A fleet of busy logs gives a pass a few lines in each of many files; a transaction per file (and per
        index update) would write the same pages to the WAL a hundred times over. Any error, a refused write (the
        store full, or locked) among them, rolls back the whole open group and propagates; so the files' atomic()
        blocks take no savepoints inside a group (``Store.grouped``): there is no partial group to keep.
        Committed groups stay: retrying the paths later adds nothing twice, since each cursor moved with its rows.
        """
        self._new_pass()
        total = IngestStats()
        self._confinement = Confinement(self.root)
        ended = False
        try:
            self._begin_group()
            self.store.grouped = True
            for rel in paths:
                total.merge(self.ingest_path(rel, observed=observed))
                self._group_check()
            self._end_group()
            ended = True
        finally:
            self._group_lines = None
            self._confinement = None
            self.store.grouped = False
            if not ended:
                # Whether or not SQLite has rolled back already (SQLITE_FULL does, and leaves no transaction open).
                if self.store.conn.in_transaction:
                    self.store.conn.rollback()
                self._on_rollback()
        self.reject_log.flush()
        return total

    def _new_pass(self) -> None:
        self.committed, self._staged = IngestStats(), IngestStats()

    def _on_commit(self) -> None:
        self.committed.merge(self._staged)
        self._staged = IngestStats()

    def _on_rollback(self) -> None:
        self._staged = IngestStats()  # rolled back: never to be counted, whoever commits next
        self._cursors.clear()
        self._rows.clear()

    def _cursor(self, rel: str) -> Cursor | None:
        return _read_through(self._cursors, rel, self.store.cursor)

    def _put_cursor(self, cursor: Cursor) -> None:
        self.store.put_cursor(cursor)
        self._cursors[cursor.path] = cursor

    def _row(self, rel: str) -> IndexRow | None:
        if rel in self._cursors or rel in self._logs:
            return _read_through(self._rows, rel, self.store.index_rows_get)
        return self.store.index_rows_get(rel)

    def _put_file(self, row: IndexRow) -> None:
        self.store.put_file(row)
        if row.path in self._cursors or row.path in self._logs:
            self._rows[row.path] = row

    def _count(self, stats: IngestStats, source: str, n: int) -> None:
        """``n`` records of ``source`` written in the open transaction."""
        stats.records[source] += n
        self._staged.records[source] += n

    def _begin_group(self) -> None:
        self.store.conn.execute("BEGIN IMMEDIATE")
        self._group_lines = 0

    def _end_group(self) -> None:
        self.store.commit()
        self._group_lines = None

    def _group_check(self) -> None:
        """Inside :meth:`ingest_paths`, at a point with no savepoint open: commit once the group is big enough."""
        if self._group_lines is not None and self._group_lines >= BATCH_LINES:
            self._end_group()
            self._begin_group()

    def ingest_file(self, info: FileInfo, *, observed: bool = False) -> IngestStats:
        """Index one file and ingest it as its source says."""
        source = self.source_of(info.path)
        stats = IngestStats(files=1)
        if source in LOGS:
            self._logs.add(info.canonical)
            self._cursor(info.path)  # first: _tail reads it anyway, and a log with a cursor has its index row kept
            self._index(info, None, observed)
            stats.merge(self._tail(info.path, info))
        elif source is not None or info.path.endswith(".md"):
            stats.merge(self._whole_file(info, source, observed))
        else:
            self._index(info, None, observed)
        return stats

    # --- the file index

    def _index(self, info: FileInfo, fm_created: datetime | None, observed: bool, sha: str | None = None) -> bool:
        """Update the index entry of a file, and the row of the name it was read under if that is another (a name
        through a symlink); True iff the name's row is new or changed. Call inside atomic()."""
        if info.path == info.canonical:
            return self._index_row(info.path, None, info, fm_created, observed, sha)
        changed = self._index_row(info.path, info.canonical, info, fm_created, observed, sha)
        self._index_row(info.canonical, None, info, fm_created, observed, sha)
        return changed

    def _index_row(self, path: str, canonical: str | None, info: FileInfo, fm_created: datetime | None,
                   observed: bool, sha: str | None) -> bool:
        """Update the row of ``path``: an index entry (``canonical`` None), or a name of the file ``canonical``."""
        row = self._row(path)
        seen_at = self.clock() if observed else info.mtime
        changed = row is None or row.deleted is not None or (row.mtime_ns, row.size, row.sha, row.canonical) != (
            info.mtime_ns, info.size, sha, canonical
        )
        if not changed:
            return False
        # Only an entry of the index has modifications, and a log none (spec 1.4, v2.3: an append is no modification).
        keeps_changes = canonical is None and path not in self._logs  # ingest_file notes a log before this
        if row is None or row.deleted is not None:
            created = fm_created or seen_at
            with self.store.atomic():
                self._put_file(IndexRow(path, created, None, info.mtime_ns, info.size, sha, fm_created is not None,
                                        canonical))
                # Batch semantics (spec 1.4): an mtime that differs from created is a modification.
                if keeps_changes and not observed and info.mtime != created:
                    self.store.add_file_change(path, info.mtime)
            return True
        created = fm_created or row.created
        with self.store.atomic():
            self._put_file(IndexRow(path, created, None, info.mtime_ns, info.size, sha, fm_created is not None,
                                    canonical))
            if keeps_changes:
                self.store.add_file_change(path, seen_at)
        return True

    def _forget_missing(self, seen: set[str]) -> IngestStats:
        stats = IngestStats()
        for path, row in self.store.index_rows().items():
            if row.deleted is None and path not in seen and not self.unreadable.hides(path):
                stats.merge(self._delete(path))
                if row.canonical is None and self._links.resolve(path) != path:
                    # Its directory is a symlink now: the path names another file, and is no entry of its own.
                    with self.store.atomic():
                        self.store.remove_file(path)
                    self._rows.pop(path, None)
        return stats

    def _delete(self, path: str) -> IngestStats:
        row = self._row(path)
        if row is None:
            return IngestStats()
        with self.store.atomic():
            self._put_file(IndexRow(path, row.created, self.clock(), row.mtime_ns, row.size, row.sha,
                                    row.front_matter, row.canonical))
            # Deleting a brief or finding removes its decision (spec 1.2); logs keep their records.
            self.store.remove_document(path)
            if self.source_of(path) == "evals":
                self.store.remove_eval(path)
        return IngestStats(deleted=1)

    # --- Markdown files and reports: parsed whole, replaced on change

    def _whole_file(self, info: FileInfo, source: str | None, observed: bool) -> IngestStats:
        stats = IngestStats()
        try:
            raw = read_regular(info.abspath)  # a FIFO or device swapped in since the walk is never read or waited on
        except RefusedFile:
            return stats  # not a regular file any more: the next pass sees what it is now
        except OSError as exc:
            if not vanished(exc):
                self.unreadable.failed(info.path, exc)
            return stats
        self.unreadable.read(info.path)
        sha = hashlib.sha256(raw).hexdigest()
        fm_created = None
        if info.path.endswith(".md"):
            text = decode(raw, info.path)
            fm_created = front_matter_ts(text) if isinstance(text, str) else None
        row = self._row(info.path)
        canonical = None if info.path == info.canonical else info.canonical
        if row is not None and row.deleted is None and row.sha == sha and row.mtime_ns == info.mtime_ns and \
                row.canonical == canonical:
            return stats
        with self.store.atomic():
            self._index(info, fm_created, observed, sha)
            if source in ("briefs", "findings"):
                self.store.remove_document(info.path)
                kind = "brief" if source == "briefs" else "finding"
                parsed = parse_markdown(raw, info.path, kind, info.mtime, self.config.github_repo)
                self._record(parsed, source, 0, stats)
            elif source == "evals":
                self.store.remove_document(info.path)  # a fixed report drops its earlier reject
                report = parse_eval(raw, info.path)
                if isinstance(report, Reject):
                    self.store.remove_eval(info.path)
                    self._reject(report, source, 0, stats)
                else:
                    self.store.put_eval(report, sha)
                    self._count(stats, source, 1)
        return stats

    def _record(self, parsed: Event | Label | Reject, source: str, generation: int, stats: IngestStats) -> None:
        if isinstance(parsed, Reject):
            self._reject(parsed, source, generation, stats)
        elif isinstance(parsed, Label):
            self._count(stats, source, self.store.add_labels([parsed]))
        else:
            self._count(stats, source, self.store.add_events([parsed]))

    def _reject(self, reject: Reject, source: str, generation: int, stats: IngestStats) -> None:
        self.reject_log.reject(reject, self.config.limits.reject_log_per_minute)
        self.store.add_rejects([reject], source, generation, self.clock())
        stats.rejects[(source, reject.reason)] += 1
        self._staged.rejects[(source, reject.reason)] += 1

    # --- JSON Lines: tail from the cursor

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
            lines: list[tuple[bytes | None, bytes]] = []
            end = cursor.offset
            for raw in complete_lines(f, cursor.offset):
                line += 1
                end = raw.end
                lines.append((raw.data, raw.snippet))
                if len(lines) >= BATCH_LINES:
                    cursor = self._commit(self._parse(lines, cursor, line, source), cursor, fd, end, line, source,
                                          stats)
                    lines = []
            if lines or end != cursor.offset or self._cursor(cursor.path) != cursor:
                cursor = self._commit(self._parse(lines, cursor, line, source), cursor, fd, end, line, source, stats)
        return cursor

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
        with self.store.atomic():
            if parsed.rows:
                self._count(stats, source, self.store.add_event_rows(parsed.rows, parsed.citations))
            if parsed.labels:
                self._count(stats, source, self.store.add_labels(parsed.labels))
            for reject in parsed.rejects:
                self._reject(reject, source, cursor.generation, stats)
            self._put_cursor(moved)
        if self._group_lines is not None:
            self._group_lines += len(parsed.rows) + len(parsed.labels) + len(parsed.rejects)
            self._group_check()  # a long file does not hold one transaction open from start to end
        return moved
