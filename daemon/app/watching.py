"""How the running daemon notices changes in the state root and turns them into ingest passes.

Two sources of changed paths: the watchdog observer (files appearing, moving, going, closed after a write) and the
log poller (appends to the logs it follows, found by size and time). Both hand paths to :meth:`Watching._on_path`,
which coalesces them: one pass at a time, the next a debounce after it, a full rescan when a directory moved.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from daemon.app.evaluations import Evaluations
from daemon.executors import run_in
from daemon.ingest import LOGS, Ingester, IngestStats

log = logging.getLogger("honestyd")
#: The file events the watcher asks inotify for (watchdog builds the mask from this list, so the kernel does
#: not even send the others): files appearing, moving, going, and closing after a write. Not modifications:
#: appends to logs are found by polling them (collectors/poll.py), since every append is an event watchdog
#: handles in Python; nor opens and read-only closes, two per log the daemon itself reads.
WATCHED_EVENTS = (FileCreatedEvent, FileMovedEvent, FileDeletedEvent, FileClosedEvent, DirCreatedEvent,
                  DirMovedEvent, DirDeletedEvent)
#: The shortest time between two polls of the logs (the poll runs every debounce, but not in a busy loop).
MIN_POLL = 0.02
#: Relative forms of watched paths kept by the watcher (cleared when full: rotation makes new names all day).
_REL_CACHE = 4096


class _Watcher(FileSystemEventHandler):
    """Hands changed paths (relative to the root) from watchdog's thread to the event loop.

    Appends are not among the events asked for (see WATCHED_EVENTS), but rotations and saves still come in
    bursts: the loop is woken once per batch of events (when the batch goes from empty to not), not once per
    event, and a path's relative form is worked out once.
    """

    def __init__(self, root: Path, loop: asyncio.AbstractEventLoop, deliver: Callable[[str | None], None],
                 moved: Callable[[str, str], None] | None = None) -> None:
        self.root = os.path.realpath(root)
        self.loop = loop
        self.deliver = deliver
        self.moved = moved  # told (from this thread) of each file renamed: the log poller counts rotations
        self._lock = threading.Lock()
        self._batch: set[str | None] = set()
        self._rels: dict[str, str | None] = {}

    def _rel(self, path: str | bytes) -> str | None:
        text = os.fsdecode(path)
        try:
            return self._rels[text]
        except KeyError:
            pass
        rel = os.path.relpath(text, self.root)
        hidden = rel.startswith("..") or any(part.startswith(".") for part in rel.split(os.sep))
        found = None if hidden else rel.replace(os.sep, "/")
        if len(self._rels) >= _REL_CACHE:
            self._rels.clear()
        self._rels[text] = found
        return found

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in ("opened", "closed_no_write"):
            return
        paths = [event.src_path, *([event.dest_path] if getattr(event, "dest_path", "") else [])]
        if event.event_type == "moved" and not event.is_directory and self.moved is not None:
            moved_from = self._rel(event.src_path)
            if moved_from is not None:
                self.moved(moved_from, os.fsdecode(event.dest_path))
        for path in paths:
            rel = self._rel(path)
            if rel is None:
                continue
            # A directory event (moved or deleted folder) may hide many files: rescan everything.
            target = None if event.is_directory and event.event_type != "modified" else rel
            if event.is_directory and event.event_type == "modified":
                continue
            with self._lock:
                wake = not self._batch
                self._batch.add(target)
            if wake:
                self.loop.call_soon_threadsafe(self._hand_over)

    def _hand_over(self) -> None:
        """On the loop: deliver the batch gathered since the last hand-over."""
        with self._lock:
            batch, self._batch = self._batch, set()
        for target in batch:
            self.deliver(target)


class Watching(Evaluations):
    """The watcher, the log poller, and the ingest passes they start."""

    async def _start_observer(self) -> None:
        """Start the watcher. On a thread: watchdog adds its inotify watches (a walk of the whole state root) in the
        caller's thread before its own start, which on a large root held the loop, and the first scrapes, for a
        second (docs/performance.md)."""
        observer = Observer()
        observer.schedule(_Watcher(self._config.state_root, asyncio.get_running_loop(), self._on_path,
                                   self.poller.moved),
                          str(self._config.state_root),
                          recursive=True, event_filter=list(WATCHED_EVENTS))
        observer.daemon = True
        await asyncio.to_thread(observer.start)
        self.observer = observer

    async def _watch_observer(self) -> None:
        if self.observer is not None and not self.observer.is_alive() and not self.should_exit:
            log.error("file watcher thread died; restarting it and rescanning")
            await self._start_observer()
            await self._rescan_job()

    async def _changed_since_walk(self) -> None:
        """Hand on what changed between the start's early walk (collectors/walkahead.py) and the watcher's start: the
        child walks the root again and compares (no store, no lock, no memory of this process)."""
        walk, self._walk_ahead = self._walk_ahead, None
        if walk is None:
            return
        found = await asyncio.to_thread(walk.changed_since)
        for rel in [None] if found is None else found:  # None: rescan it all
            self._on_path(rel)

    async def _rescan_job(self) -> None:
        self.full_rescan_pending = True
        await self._flush()
        await self._track_logs()

    async def _track_logs(self) -> None:
        """Poll every log the store has a cursor for (the watcher adds logs that appear later)."""
        assert self.lock is not None and self.store is not None
        if self._recovering:
            return
        cursors = await self._locked(self.store.cursors)
        for cursor in cursors:
            if cursor.path not in self.poller:
                self.poller.track(cursor.path, seen=False)  # an append since the scan read it is not left waiting

    async def _poll_logs(self) -> None:
        """Every debounce, hand the logs whose size or time changed to the next pass (see collectors/poll.py).

        The stats run on the poll's own thread: on the loop, hundreds of them a poll kept requests waiting for the
        GIL after each (docs/performance.md). A stop cancels this task; what the poll in flight found still joins
        the drain."""
        loop = asyncio.get_running_loop()
        while not self.should_exit:
            await asyncio.sleep(max(self._config.daemon.debounce, MIN_POLL))
            look = loop.run_in_executor(self.executors.poll, self.poller.changed)
            try:
                changed = await asyncio.shield(look)
            except asyncio.CancelledError:
                self._on_changed_logs(await look)
                raise
            self._on_changed_logs(changed)

    def _on_changed_logs(self, changed: list[str] | None = None) -> None:
        """Hand ``changed`` (None: the logs that changed by a poll made now, on the loop) to the next pass."""
        for rel in self.poller.changed() if changed is None else changed:
            self._on_path(rel, settled=True)

    def _on_path(self, rel: str | None, *, settled: bool = False) -> None:
        """A watcher saw ``rel`` change (None: something big moved; rescan all). Coalesce, then ingest.

        ``settled``: the change was found by the log poller, which looks only once a debounce: it has waited its
        debounce already, and a pass may start at once.
        """
        self._changed_during_pass |= self._flush_task is not None
        if rel is None:
            self.full_rescan_pending = True
        else:
            self.pending.add(rel)
            if rel not in self.poller and self.ingester is not None and \
                    self.ingester.source_of(rel) in LOGS:
                self.poller.track(rel)
        self._schedule_flush(0.0 if settled else self._config.daemon.debounce)

    def _schedule_flush(self, delay: float) -> None:
        """One pass at a time: paths that change during a pass wait for the next, started a debounce after it.

        Starting a pass per debounce whatever the state queued passes on the lock faster than a busy daemon ran
        them, and every evaluation waited behind all of them (docs/performance.md). A pass already due later is
        brought forward to ``delay`` from now.
        """
        if self._flush_task is not None or self.should_exit:
            return
        loop = asyncio.get_running_loop()
        if self._flush_handle is not None:
            if self._flush_handle.when() <= loop.time() + delay:
                return
            self._flush_handle.cancel()
        self._flush_handle = loop.call_later(delay, self._start_flush)

    def _start_flush(self) -> None:
        self._flush_handle = None
        self._changed_during_pass = False
        self._flush_task = asyncio.get_running_loop().create_task(self._flush_then_next())

    async def _flush_then_next(self) -> None:
        try:
            await self._flush()
        finally:
            self._flush_task = None
            # Not while the store refuses writes, or is gone: then the next file event or rescan retries (see _flush).
            # A file event that came while this pass ran is such an event: it found the pass under way and waited.
            refused = self._store_failing_since is not None and not self._changed_during_pass
            if (self.pending or self.full_rescan_pending) and not refused and not self._recovering:
                # A debounce's gap for the evaluation of this pass; the poller's next look (a debounce apart, see
                # _on_path) brings it forward when logs have grown meanwhile.
                self._schedule_flush(self._config.daemon.debounce)

    async def _flush(self) -> None:
        """One ingest pass, once the store is in place (see _store_in_place); a damaged store stops the daemon."""
        if self.ingester is None or not await self._store_in_place():
            return
        if not await self._survives("ingest", self._ingest_pass()):
            return
        if self._recovering and not self.full_rescan_pending:
            self._recovering = False  # the new store has caught up with the state root: evaluate it
            log.warning("store %s caught up with the state root; evaluating it", self._config.db_path)
            self._request_rescore()

    async def _ingest_pass(self) -> None:
        assert self.lock is not None and self.ingester is not None
        async with self.lock:
            paths, self.pending = sorted(self.pending), set()
            full, self.full_rescan_pending = self.full_rescan_pending, False
            if not paths and not full:
                return
            ingester = self.ingester
            left: list[str] = []
            error: sqlite3.OperationalError | None = None
            if full:
                observed = not self._pending_scan_unobserved
                try:
                    stats = await run_in(self.executors.ingest, ingester.scan, observed=observed)
                except sqlite3.OperationalError as exc:
                    stats, error = ingester.committed, exc  # the files committed before the refusal still count
                    self.full_rescan_pending = True  # the whole pass again, next time
                else:
                    self._pending_scan_unobserved = False
            else:
                stats, left, error = await run_in(self.executors.ingest, self._ingest_paths, ingester, paths)
                self.pending.update(left)
            if error is not None:
                # A refused write (store full, or locked past busy_timeout) rolled back its batch, cursor included:
                # the paths stay pending and the next file event or rescan retries them. Nothing is dropped.
                self._store_refused(error, "ingest")  # under the lock: it may end a transaction on the connection
            else:
                self._store_accepted()
        self._count(stats)
        self._request_rescore()

    @staticmethod
    def _ingest_paths(
        ingester: Ingester, paths: list[str]
    ) -> tuple[IngestStats, list[str], sqlite3.OperationalError | None]:
        """Ingest ``paths``; on a refused write, return what was committed before it and all the paths as still to
        do (see Ingester.ingest_paths: retrying a path whose rows were committed adds nothing twice)."""
        try:
            return ingester.ingest_paths(paths, observed=True), [], None
        except sqlite3.OperationalError as exc:
            return ingester.committed, paths, exc

    async def _scan(self) -> None:
        await self._survives("start-up scan", self._start_up_scan())

    async def _start_up_scan(self) -> None:
        assert self.lock is not None and self.ingester is not None
        ingester, root, walk = self.ingester, self._config.state_root, self._walk_ahead

        def scan() -> IngestStats:
            walked = walk.take(root) if walk is not None else None
            if walked is None:
                self._walk_ahead = None  # let go (take closed it): nothing to ask again once the watcher runs
            return ingester.scan(walked=walked)

        async with self.lock:
            try:
                stats = await run_in(self.executors.ingest, scan)
            except sqlite3.OperationalError as exc:
                # Start serving anyway (the operator sees the log line and the metric); the rescan job retries.
                self.full_rescan_pending = self._pending_scan_unobserved = True
                self._store_refused(exc, "start-up scan")
                stats = self.ingester.committed
        self._count(stats)

    def _count(self, stats: IngestStats) -> None:
        self.ingest_records.update(stats.records)
        self.ingest_rejects.update(stats.rejects)
        if stats.records or stats.rejects or stats.deleted:
            log.info("ingested %d records, %d rejects, %d deletions", sum(stats.records.values()),
                     sum(stats.rejects.values()), stats.deleted)
