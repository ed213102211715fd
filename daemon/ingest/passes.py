"""Passes over the state root: a full scan, one path, or a watcher's batch of paths in transaction groups.

:class:`Ingester` is what the daemon and the CLI hold; its parts are the file index (:mod:`daemon.ingest.index`), the
files parsed whole (:mod:`daemon.ingest.documents`) and the logs tailed (:mod:`daemon.ingest.logs`), over the state
they share (:mod:`daemon.ingest.state`). A new source is routed in :mod:`collectors.sources` and read by the part
its kind belongs to.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from collectors.links import LinkMap, named_entries, other_names
from collectors.safeopen import read_regular
from collectors.sources import LOGS, routes
from collectors.statedir import Confinement, FileInfo, link_target, stat_file, walk_tree
from collectors.walkahead import Walked
from daemon.config import Config
from daemon.ingest.documents import Documents
from daemon.ingest.logs import LogTailing
from daemon.ingest.state import Clock, IngestStats, Reader, Sightings, WallClock, system_clock
from daemon.rejectlog import RejectLog
from daemon.store import Store

#: Lines per transaction of a watcher's batch (and per transaction of one long log's lines).
BATCH_LINES = 5000


class Ingester(Documents, LogTailing):
    """Feeds one state root into one store. ``observed`` = True means a watcher saw the change now.

    ``read`` reads a file whole; ``wall_ns`` is the clock file times are set from (daemon/ingest/fingerprint.py).
    """

    def __init__(self, store: Store, root: Path, config: Config, clock: Clock = system_clock,
                 reject_log: RejectLog | None = None, sightings: Sightings | None = None, *,
                 read: Reader = read_regular, wall_ns: WallClock = time.time_ns) -> None:
        super().__init__(store, root, config, clock, reject_log, sightings, BATCH_LINES, read, wall_ns)

    def scan(self, *, observed: bool = False, walked: Walked | None = None) -> IngestStats:
        """One full pass over the root: index, tail, re-parse; deleted files are noticed. ``walked``: the root's walk
        done already (a start's, on a second core: collectors/walkahead.py), its stats dated from when it began."""
        self._new_pass()
        stats = IngestStats()
        seen: set[str] = set()
        unreadable = self.unreadable
        unreadable.begin_scan()
        if walked is not None:
            self._stat_at, self._stat_ns = walked.at, walked.at_ns
        else:
            self._stat_at, self._stat_ns = time.monotonic(), self.wall_ns()
        self._fingerprints = []
        complete = False
        try:
            if walked is not None:
                tree = walked.tree
                walked.replay(unreadable.failed)
            else:
                tree = walk_tree(self.root, on_error=unreadable.failed)
            links = LinkMap(tree.links)
            if links != self._links:
                with self.store.transaction():
                    self.store.put_links(tree.links)
                self._links = links
            entries = named_entries(tree.files, links, self._globs())
            paths = entries.paths
            sources = routes(self.config.globs, paths)
            self._logs = {entries.canonical(i) for i, source in enumerate(sources) if source in LOGS}
            # A FileInfo only for a file that is read: the rest are told unchanged from the walk's columns.
            self._unchanged = unchanged = self._unchanged_paths(
                entries, (i for i, source in enumerate(sources) if read_whole(source, paths[i])))
            for i, (path, source) in enumerate(zip(paths, sources, strict=True)):
                seen.add(path)
                if path in unchanged:  # read whole, and as its row recorded it: nothing to read or write
                    stats.files += 1
                    unreadable.read(path)
                else:
                    stats.merge(self._ingest_as(entries[i], source, observed))
            self._record_fingerprints()
            # Logs that vanished from their glob may have been rotated away: drain them. What a folder that cannot
            # be listed holds is not gone: it is neither drained nor deleted.
            for cursor in self.store.cursors():
                if cursor.path not in seen and not unreadable.hides(cursor.path):
                    stats.merge(self._tail(cursor.path, None))
            stats.merge(self._forget_missing(seen))
            complete = True
        finally:
            self._fingerprints = self._unchanged = None
            unreadable.end_scan(complete)
        self.reject_log.flush()
        return stats

    def _record_fingerprints(self) -> None:
        """Record the fingerprints this scan took of unchanged files (hints: a scan they are lost to reads again)."""
        if self._fingerprints:
            with self.store.transaction():
                self.store.put_fingerprints(self._fingerprints)
        self._fingerprints = []

    def ingest_path(self, rel: str, *, observed: bool = True) -> IngestStats:
        """Bring one path up to date (a watcher event): it may be new, changed or gone, or a symlink.

        A file's other names that sources are read under (through symlinks) are brought up to date with it; names
        that a symlink made meanwhile adds are read at the next scan.
        """
        self._stat_at, self._stat_ns = time.monotonic(), self.wall_ns()
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
            with self.store.transaction():
                self.store.put_link(location, target)
        else:
            if location not in links:
                return
            del links[location]
            with self.store.transaction():
                self.store.remove_link(location)
        self._links = LinkMap(links)

    def ingest_paths(self, paths: list[str], *, observed: bool = True) -> IngestStats:
        """Bring several paths up to date (a watcher's batch) in one transaction per ``BATCH_LINES`` lines.

        A fleet of busy logs gives a pass a few lines in each of many files; a transaction per file (and per
        index update) would write the same pages to the WAL a hundred times over. Any error, a refused write (the
        store full, or locked) among them, rolls back the whole open group and propagates (see ``Store.group``); the
        files' transaction() blocks take no savepoints inside it: there is no partial group to keep.
        Committed groups stay: retrying the paths later adds nothing twice, since each cursor moved with its rows.
        """
        self._new_pass()
        total = IngestStats()
        self._confinement = Confinement(self.root)
        try:
            with self.store.group() as next_transaction:
                self._next_transaction, self._group_lines = next_transaction, 0
                for rel in paths:
                    total.merge(self.ingest_path(rel, observed=observed))
                    self._group_check()
        finally:
            self._next_transaction = self._group_lines = None
            self._confinement = None
        self.reject_log.flush()
        return total

    def ingest_file(self, info: FileInfo, *, observed: bool = False) -> IngestStats:
        """Index one file and ingest it as its source says."""
        return self._ingest_as(info, self.source_of(info.path), observed)

    def _ingest_as(self, info: FileInfo, source: str | None, observed: bool) -> IngestStats:
        stats = IngestStats(files=1)
        if source in LOGS:
            self._logs.add(info.canonical)
            self._cursor(info.path)  # first: _tail reads it anyway, and a log with a cursor has its index row kept
            self._index(info, None, observed)
            stats.merge(self._tail(info.path, info))
        elif read_whole(source, info.path):
            stats.merge(self._whole_file(info, source, observed))
        else:
            self._index(info, None, observed)
        return stats


def read_whole(source: str | None, path: str) -> bool:
    """Whether a file of ``source`` at ``path`` is read whole (a Markdown file, a report), not tailed or only indexed.
    """
    return source not in LOGS and (source is not None or path.endswith(".md"))
