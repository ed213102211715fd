"""The store as the running daemon holds it: opened after a check, its writes run under one lock, the writes it
refuses counted (ingest pauses, nothing is dropped), damage stopping the daemon (exit status 3), and a database
deleted or replaced under it rebuilt from the state root."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from daemon import lifecycle
from daemon.app.state import DaemonState
from daemon.executors import run_in
from daemon.ingest import Ingester
from daemon.lifecycle import StartupError
from daemon.store import Gate, Store, quick_check, store_damaged, store_full

log = logging.getLogger("honestyd")

T = TypeVar("T")


class StoreKeeping(DaemonState):
    """Opening the store, and what the daemon does when it refuses a write, is damaged, or goes missing."""

    def _open_store(self) -> None:
        """Open the store (and the evaluations' reader) after SQLite's quick check of every page: a damaged file is
        refused here, before the methodology entry or any other record that this daemon runs is written."""
        cfg = self._config
        db = cfg.db_path
        gate = Gate()  # the evaluations' snapshots out of the writer's COMMITs: the WAL starts over
        try:
            problems = quick_check(db, readonly=False)
            if problems:
                raise StartupError(lifecycle.EXIT_STORE_DAMAGED,
                                   lifecycle.damaged_message(db, problems[0], cfg.state_root, self.config_path))
            store = Store.open(db, gate=gate)
        except sqlite3.Error as exc:
            if store_damaged(exc):
                raise StartupError(lifecycle.EXIT_STORE_DAMAGED,
                                   lifecycle.damaged_message(db, str(exc), cfg.state_root, self.config_path)) from None
            raise StartupError(lifecycle.EXIT_STORE_UNUSABLE, f"cannot open the store {db}: {exc}; check [store] path"
                                                              " (or --db) and its folder's permissions") from None
        try:
            self.reader = Store.open(db, readonly=True, gate=gate)
        except BaseException:
            store.close()
            raise
        self.store = store
        self._db_identity = lifecycle.file_identity(db)
        self._store_open = True

    def _observed_clock(self) -> datetime:
        return self.clock()

    def _new_ingester(self, store: Store, previous: Ingester | None = None) -> Ingester:
        """The ingester of ``store``; one made for a store opened again keeps what the last one counted and logged
        (unreadable paths, rotation losses, the reject log's budget), so counters never go back."""
        cfg = self._config
        ingester = Ingester(store, cfg.state_root, cfg, self._observed_clock,
                            reject_log=previous.reject_log if previous is not None else None,
                            sightings=self.poller.take)
        if previous is not None:  # the totals only: what the old one followed belongs to the store that went
            ingester.unreadable = previous.unreadable
            ingester.losses.lines, ingester.losses.bytes = previous.losses.lines, previous.losses.bytes
        return ingester

    async def _locked(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the store writer's thread, holding the store lock (SQLite writes one at a time anyway)."""
        assert self.lock is not None
        async with self.lock:
            return await run_in(self.executors.ingest, fn)

    def _store_refused(self, exc: sqlite3.OperationalError, what: str) -> None:
        """Count and log a write the store refused (an ERROR line once per episode, DEBUG after). Hold the lock."""
        assert self.store is not None
        # SQLite may leave a failed COMMIT's transaction open (SQLITE_FULL/BUSY): end it, or every later
        # atomic() would nest in it as a savepoint and never commit. A no-op when no transaction is open.
        self.store.end_refused()
        full = store_full(exc)
        if full is not None:
            self.store_full += 1
        first = self._store_failing_since is None
        if first:
            self._store_failing_since = time.monotonic()
        log.log(logging.ERROR if first else logging.DEBUG,
                "%s (%s refused: %s); pending work is kept and retried at the next file event or rescan",
                "store full: ingest paused" if full is not None else "store write failed", what, full or exc)

    def _store_accepted(self) -> None:
        if self._store_failing_since is not None:
            log.warning("store accepts writes again: ingest resumed after %.1f s",
                        time.monotonic() - self._store_failing_since)
            self._store_failing_since = None

    async def _survives(self, what: str, work: Awaitable[None]) -> bool:
        """Await ``work``; False if it found the store damaged (then the daemon stops: see _store_damaged)."""
        try:
            await work
        except sqlite3.DatabaseError as exc:
            if not store_damaged(exc):
                raise
            self._store_damaged(exc, what)
            return False
        return True

    def _store_damaged(self, exc: sqlite3.DatabaseError, what: str) -> None:
        """A query found the database damaged while running: one ERROR line saying what to do, /readyz 503, and a
        stop with exit status 3, which systemd does not restart (a restart would fail the same way)."""
        if self.exit_status != lifecycle.EXIT_STORE_DAMAGED:
            cfg = self._config
            log.error("%s", lifecycle.damaged_message(cfg.db_path, f"{what}: {exc}", cfg.state_root, self.config_path))
        self.exit_status = lifecycle.EXIT_STORE_DAMAGED
        self.unready = "store damaged"
        self.should_exit = True

    async def _store_in_place(self) -> bool:
        """True iff the database file the daemon has open is still the one at its path. One that was deleted or
        replaced under the running daemon is noticed here, at the next pass: then /readyz answers 503, the store is
        reopened (created afresh if gone) and caught up with the whole state root, and the model is rebuilt."""
        if self.exit_status == lifecycle.EXIT_STORE_DAMAGED:
            return False
        if self._store_open and lifecycle.file_identity(self._config.db_path) == self._db_identity:
            return True
        if self.should_exit:
            return False  # a stop does not rebuild: the next start catches up anyway
        if self._store_open:
            await self._lose_store()
        return await self._reopen_store()

    async def _lose_store(self) -> None:
        """The database at the path is not the one open: say so, go unready, and close the old connections."""
        assert self.lock is not None
        db = self._config.db_path
        gone = not db.is_file()
        log.error("store %s was %s while honestyd ran: /readyz answers 503 until a store there has caught up with"
                  " the state root %s; the link checks and history it held %s", db, "deleted" if gone else "replaced",
                  self._config.state_root, "are lost (they cannot be re-derived)" if gone else "stay in that file")
        self.unready = "store lost: rebuilding it from the state root"
        self._recovering = True
        while self._rescoring:  # an evaluation may be reading the old file: let it finish
            await asyncio.sleep(0.02)
        async with self.lock:
            # Closed before a new file is opened at the path: closing the last connection of a WAL database removes
            # its -wal and -shm by name, which would then be the new store's.
            for old in (self.reader, self.store):
                if old is not None:
                    old.close()
            self._store_open = False
            self.keeper.drop()
            self._history_written = None

    async def _reopen_store(self) -> bool:
        """Open the store at the path again (taking its lock again if the lock file went too); False, logged once,
        while that fails (the next file event or rescan retries), and a stop when another honestyd took it."""
        assert self.lock is not None
        cfg = self._config
        db = cfg.db_path
        try:
            if self._store_lock is None or not self._store_lock.in_place():
                if self._store_lock is not None:
                    self._store_lock.release()
                self._store_lock = lifecycle.StoreLock.acquire(db)
            if not db.is_file():  # the pieces of the deleted store would be read as the new one's
                for suffix in ("-wal", "-shm"):
                    db.with_name(db.name + suffix).unlink(missing_ok=True)
            await self._locked(self._open_store)
        except StartupError as exc:
            if exc.status in (lifecycle.EXIT_STORE_DAMAGED, lifecycle.EXIT_STORE_LOCKED):
                log.error("%s", exc)
                self.exit_status, self.should_exit = exc.status, True
            elif not self._store_lost_logged:
                self._store_lost_logged = True
                log.error("%s; retrying at the next file event or rescan", exc)
            return False
        assert self.store is not None
        self._store_lost_logged = False
        self.ingester = self._new_ingester(self.store, self.ingester)
        self.full_rescan_pending = self._pending_scan_unobserved = True  # a catch-up, as at a start
        log.warning("store %s opened again; catching up with the state root %s", db, cfg.state_root)
        return True
