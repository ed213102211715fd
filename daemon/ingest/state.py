"""What the parts of an ingest share: the store and root, what the store holds for each log tailed (kept between
passes), the counts staged in the open transaction, and the open transaction group."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from collectors.links import LinkMap
from collectors.poll import Seen
from collectors.records import Reject
from collectors.safeopen import read_regular
from collectors.sources import LOGS, source_of
from collectors.statedir import Confinement
from collectors.tail import Cursor
from daemon.config import Config
from daemon.rejectlog import RejectLog
from daemon.skips import RotationLosses, Unreadable
from daemon.store import Fingerprint, IndexRow, Store

T = TypeVar("T")
Clock = Callable[[], datetime]
#: What was seen of a log (its generations, where it was renamed to) since the last call for that path and before
#: the given ``time.monotonic()`` (daemon: the log poller's :meth:`~collectors.poll.LogPoller.take`, told of
#: renames by the watcher), so that a generation rotated away unread is counted as lost (daemon/skips.py).
Sightings = Callable[[str, float], Seen]
#: Reads a file whole, refusing anything but a regular file (:func:`collectors.safeopen.read_regular`).
Reader = Callable[[str], bytes]
#: The wall clock in nanoseconds since the epoch, the clock file times are set from (:func:`time.time_ns`).
WallClock = Callable[[], int]


def system_clock() -> datetime:
    """The wall clock, as an aware UTC datetime."""
    return datetime.now(UTC)


@dataclass
class IngestStats:
    """What one pass did (records by source, rejects by (source, reason))."""

    records: Counter[str] = field(default_factory=Counter)
    rejects: Counter[tuple[str, str]] = field(default_factory=Counter)
    files: int = 0
    deleted: int = 0

    def merge(self, other: IngestStats) -> None:
        """Add another pass's figures to these."""
        # Most figures merged are a single file's, with nothing rejected, and Counter.update is not free (several
        # merges per log and pass): the empty ones are skipped.
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


class IngestState:
    """The state an :class:`~daemon.ingest.passes.Ingester` keeps, and the small steps its parts all take."""

    def __init__(self, store: Store, root: Path, config: Config, clock: Clock, reject_log: RejectLog | None,
                 sightings: Sightings | None, batch_lines: int, read: Reader = read_regular,
                 wall_ns: WallClock = time.time_ns) -> None:
        self.store = store
        self.root = root
        self.config = config
        self.clock = clock
        #: Lines per transaction of a path batch, and per batch of one log's lines.
        self.batch_lines = batch_lines
        #: Rejected lines are logged through it: ``[limits] reject_log_per_minute`` per file, then a summary.
        self.reject_log = reject_log or RejectLog()
        self.sightings = sightings
        #: What could not be read (logged once each, retried at every rescan), and what rotation took unread.
        self.unreadable = Unreadable()
        self.losses = RotationLosses(root, self._is_log)
        self._stat_at = -math.inf  # time.monotonic() of the stat the file infos of this pass come from
        #: How files are read whole, and the wall clock before the stat of this pass's file infos (0: unknown, so no
        #: fingerprint recorded counts: daemon/ingest/fingerprint.py).
        self.read = read
        self.wall_ns = wall_ns
        self._stat_ns = 0
        #: (path, sha, mtime_ns, size, fingerprint) of the unchanged files read in this scan whose row holds no
        #: fingerprint that counts: recorded in one statement at the scan's end (None: at once, outside a scan).
        self._fingerprints: list[tuple[str, str, int, int, Fingerprint]] | None = None
        #: The paths this scan found unchanged by their fingerprints before it began (None: outside a scan).
        self._unchanged: set[str] | None = None
        #: Lines taken in the open transaction group of ingest_paths (None: no group open), and the group's step to
        #: the next transaction (see :meth:`daemon.store.Store.group`).
        self._group_lines: int | None = None
        self._next_transaction: Callable[[], None] | None = None
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
        #: keeping all of them would hold a row per file of the state in memory. The daemon is the store's only
        #: writer, and every write goes through here; a rollback drops them all (the store may have lost what was
        #: written since the last COMMIT), and each is read again at its next use.
        self._cursors: dict[str, Cursor | None] = {}
        self._rows: dict[str, IndexRow | None] = {}
        #: The symlinks inside the root as stored (kept with each scan and each watcher event on a link).
        self._links = LinkMap(store.links())
        #: Canonical paths of the files read as logs under some name (a log symlinked in from elsewhere is one too).
        self._logs: set[str] = set()

    def source_of(self, rel: str) -> str | None:
        """Which source a relative path belongs to (heartbeats, labels, briefs, findings, evals)."""
        return source_of(self.config.globs, rel)

    def _is_log(self, rel: str) -> bool:
        return source_of(self.config.globs, rel) in LOGS

    def _globs(self) -> tuple[str, ...]:
        return self.config.globs.all()

    # --- what is counted: committed, or dropped with a rollback

    def _new_pass(self) -> None:
        self.committed, self._staged = IngestStats(), IngestStats()

    def _on_commit(self) -> None:
        self.committed.merge(self._staged)
        self._staged = IngestStats()

    def _on_rollback(self) -> None:
        self._staged = IngestStats()  # rolled back: never to be counted, whoever commits next
        self._cursors.clear()
        self._rows.clear()

    def _count(self, stats: IngestStats, source: str, n: int) -> None:
        """``n`` records of ``source`` written in the open transaction."""
        stats.records[source] += n
        self._staged.records[source] += n

    def _reject(self, reject: Reject, source: str, generation: int, stats: IngestStats) -> None:
        self.reject_log.reject(reject, self.config.limits.reject_log_per_minute)
        self.store.add_rejects([reject], source, generation, self.clock())
        stats.rejects[(source, reject.reason)] += 1
        self._staged.rejects[(source, reject.reason)] += 1

    # --- what the store holds for the logs tailed here

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

    # --- the open group of ingest_paths

    def _group_check(self) -> None:
        """Inside :meth:`ingest_paths`, at a point with no savepoint open: commit once the group is big enough."""
        if self._group_lines is not None and self._group_lines >= self.batch_lines:
            assert self._next_transaction is not None  # a group is open: ingest_paths set both
            self._next_transaction()
            self._group_lines = 0
