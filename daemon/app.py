"""``honestyd run``: one asyncio process that watches, ingests, scores, verifies and serves.

Lifecycle (uvicorn's shape): signal handlers only set flags; the main loop notices them.
Shutdown goes in a fixed order — stop watchers, drain pending file events (with a timeout),
stop the scheduler, close HTTP, close the store — and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import signal
import socket
import sqlite3
import sys
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from aiohttp import web
from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger
from prometheus_client import CollectorRegistry
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

from collectors.poll import LogPoller
from collectors.records import EvalReport
from daemon import changelog, lifecycle, limits, logsetup, modelcache, safefile
from daemon.api import HTTP_LIMITS, HTTP_LOG, ConnectionLimit, connection_budget, descriptor_limit, make_app
from daemon.config import COMPONENTS, Config, ConfigError, load_config
from daemon.gcpolicy import Freezer
from daemon.ingest import Clock, Ingester, IngestStats, store_full, system_clock
from daemon.lifecycle import StartupError
from daemon.limits import Exported, HeldBackLog
from daemon.live import LiveFeed
from daemon.metrics import make_registry
from daemon.notify import Notifier
from daemon.snapshot import Counters, Snapshot
from daemon.store import Gate, Store, quick_check
from scorers.history import DayCounts
from scorers.live import HistoryEvicted
from scorers.score import AgentResult, WindowResult

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

LABELS_FILE = "labels/api.jsonl"
#: Seconds between two writes of today's history rows (each evaluation would rewrite agents × windows rows).
HISTORY_EVERY = 60.0
#: Scheduled jobs that use the store and so wait while a lost one is rebuilt (the rescan is the one that rebuilds it).
_STORE_JOBS = ("_verify_sample", "_checkpoint")
#: Threads answering audits, histories and pages: pure Python under the GIL, so a second would answer no more of
#: them, only take the GIL from the loop more often and hold twice the objects the garbage collector walks.
REQUEST_THREADS = 1
#: Seconds a thread may hold the GIL while another waits for it (CPython's default is 0.005). The loop needs it back
#: after every system call, a few per request: at the default, a burst of requests during an audit queued for
#: tens of milliseconds. Threads that do not wait for each other are not switched any more often.
SWITCH_INTERVAL = 0.0002

P = ParamSpec("P")
T = TypeVar("T")


def _pool(threads: int, name: str) -> Callable[[], Executor]:
    return lambda: ThreadPoolExecutor(threads, thread_name_prefix=name)


@dataclass(frozen=True)
class Executors:
    """The daemon's worker threads, one pool per kind of work, so that no kind waits in another's queue.

    Sharing the loop's default pool, a crowd of audits queued ahead of every ingest pass and evaluation. ``ingest``
    is the store writer's (ingest passes, label writes, history and check writes, everything under the store lock;
    SQLite writes one at a time anyway); ``model`` the scoring model's (loads, syncs, evaluations, the model cache,
    changelog writes); ``requests`` HTTP request work (audits, histories, pages; their number is capped by
    ``[api] max_concurrent_audits``).
    """

    ingest: Executor = field(default_factory=_pool(1, "honestyd-ingest"))
    model: Executor = field(default_factory=_pool(1, "honestyd-model"))
    requests: Executor = field(default_factory=_pool(REQUEST_THREADS, "honestyd-http"))

    def shutdown(self) -> None:
        """Requests first (HTTP is closed), then the model, then the store writer; work still queued is dropped,
        and what runs finishes on its own (it cannot be interrupted)."""
        for executor in (self.requests, self.model, self.ingest):
            executor.shutdown(wait=False, cancel_futures=True)


async def _run_in(executor: Executor, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` on ``executor`` (asyncio.to_thread, on a pool of the caller's choosing)."""
    return await asyncio.get_running_loop().run_in_executor(executor, functools.partial(fn, *args, **kwargs))


@dataclass(frozen=True)
class Overrides:
    """Command-line flags that win over the config file, on start and on every reload."""

    state: Path | None = None
    db: Path | None = None
    listen: str | None = None

    def apply(self, config: Config) -> Config:
        """The config with these flags applied."""
        if self.state is not None:
            config = replace(config, state_root=self.state)
        if self.db is not None:
            config = replace(config, db_path=self.db)
        if self.listen is not None:
            config = replace(config, daemon=replace(config.daemon, listen=self.listen))
        return config


def parse_reviewers(text: str) -> dict[str, str]:
    """``reviewer:token`` pairs separated by commas or new lines → {token: reviewer}."""
    tokens: dict[str, str] = {}
    for item in text.replace("\n", ",").split(","):
        reviewer, sep, token = item.strip().partition(":")
        if sep and reviewer.strip() and token.strip():
            tokens[token.strip()] = reviewer.strip()
    return tokens


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


class Daemon:
    """The running service. Drive it with :meth:`serve`; stop it with :meth:`handle_exit`."""

    def __init__(
        self,
        config: Config,
        *,
        config_path: Path | None = None,
        overrides: Overrides = Overrides(),
        clock: Clock = system_clock,
        environ: Mapping[str, str] = os.environ,
        notifier: Notifier | None = None,
        listeners: list[socket.socket] | None = None,
        executors: Executors | None = None,
    ) -> None:
        self.overrides = overrides
        self.executors = executors or Executors()
        self.config_path = config_path
        self._config = overrides.apply(config)
        self.clock = clock
        self.environ = environ
        self.notifier = notifier or Notifier(environ)
        self.should_exit = False
        self.force_exit = False
        self.reload_requested = False
        self._snapshot: Snapshot | None = None
        self.registry: CollectorRegistry = make_registry(lambda: self._snapshot)
        self.ingest_records: Counter[str] = Counter()
        self.ingest_rejects: Counter[tuple[str, str]] = Counter()
        self.checks: Counter[str] = Counter()
        self.check_failures: Counter[str] = Counter()
        self.scheduler_missed: Counter[str] = Counter()
        # Writes the store refused with SQLITE_FULL (exported as honesty_store_full_total).
        self.store_full = 0
        # When the store began refusing writes (monotonic; None while it accepts them): one log line per episode.
        self._store_failing_since: float | None = None
        self.pending: set[str] = set()
        self.full_rescan_pending = False
        # The pending full scan is the start-up catch-up (files dated by mtime, not by "seen now").
        self._pending_scan_unobserved = False
        self._flush_handle: asyncio.TimerHandle | None = None
        self._flush_task: asyncio.Task[None] | None = None
        self._rescore_dirty = False
        self._rescoring = 0  # evaluations running (the startup one and the scheduler's job)
        self.poller = LogPoller(self._config.state_root)
        self._poll_task: asyncio.Task[None] | None = None
        self.feed: LiveFeed | None = None
        self._history_written: tuple[date, float] | None = None
        self.freezer = Freezer()  # records that arrive stay out of the full collections (daemon/gcpolicy.py)
        self.held_back = HeldBackLog()  # names each agent [limits] hold back from /metrics once
        #: The changelog appender (it remembers the keys the file holds): made at the first write.
        self._changelog: changelog.Appender | None = None
        self._job_tasks: set[asyncio.Task[Any]] = set()
        self.store: Store | None = None
        #: A read-only connection of the evaluations' own: a feed sync reads committed rows without waiting for the
        #: store lock, which an ingest pass holds for its whole run (WAL readers never block the writer).
        self.reader: Store | None = None
        self.ingester: Ingester | None = None
        self.observer: Any = None
        self.scheduler: AsyncIOScheduler | None = None
        self.runner: web.AppRunner | None = None
        #: The HTTP server's connection cap (made when HTTP starts).
        self.connections: ConnectionLimit | None = None
        self.lock: asyncio.Lock | None = None
        self.port: int | None = None
        self.started = asyncio.Event()
        #: The listening sockets, bound before anything else (or handed in already bound: ``honestyd demo``).
        self._listeners = listeners
        self._store_lock: lifecycle.StoreLock | None = None
        #: (st_dev, st_ino) of the database file opened: each pass compares the path's with it (see _store_in_place).
        self._db_identity: tuple[int, int] | None = None
        #: The process's exit status (daemon/lifecycle.py): set by a claim that fails or a store found damaged.
        self.exit_status = 0
        #: Why /readyz answers 503 although an evaluation exists (None: it does not).
        self.unready: str | None = None
        #: The store went missing: until the state root is caught up again, no evaluation and no store-reading job.
        self._recovering = False
        #: False between closing a lost store and opening one at its path again.
        self._store_open = False
        self._store_lost_logged = False

    # --- the Backend protocol used by the HTTP API

    @property
    def snapshot(self) -> Snapshot | None:
        """The latest evaluation (None before the first)."""
        return self._snapshot

    @property
    def config(self) -> Config:
        """The configuration in force."""
        return self._config

    def now(self) -> datetime:
        """The daemon's clock."""
        return self.clock()

    def reviewers(self) -> dict[str, str]:
        """{token: reviewer} from the configured environment variable and credentials file."""
        api = self._config.api
        tokens = parse_reviewers(self.environ.get(api.reviewers_env, "")) if api.reviewers_env else {}
        if api.reviewers_file:
            try:
                tokens.update(parse_reviewers(Path(api.reviewers_file).read_text(encoding="utf-8")))
            except OSError as exc:
                log.warning("reviewers file %s: %s", api.reviewers_file, exc.strerror)
        return tokens

    def changelog_path(self) -> Path:
        """Where the dated changelog lives."""
        return self._config.state_root / self._config.changelog

    def changelog_text(self) -> str:
        """The changelog as it stands (empty when none yet, or when it is not a regular file inside the root)."""
        try:
            return changelog.changelog_text(self.changelog_path(), self._config.state_root)
        except OSError as exc:  # a FIFO there must not block the page (or the start), a symlink not be followed
            log.warning("changelog %s not read: %s", self.changelog_path(), exc.strerror)
            return ""

    async def history(self, agent: str) -> list[DayCounts]:
        """The stored daily counts of one agent."""
        assert self.lock is not None and self.store is not None
        if self._recovering:
            raise web.HTTPServiceUnavailable(text="the store is being rebuilt from the state root")
        store = self.store
        async with self.lock:
            return await _run_in(self.executors.ingest, store.history, agent)

    async def knows_decision(self, decision: str) -> bool | None:
        """Whether a record with this id is stored (None: the model is still loading, so it cannot tell yet)."""
        feed, db = self.feed, self._config.db_path
        if feed is None:
            return None

        def ask() -> bool | None:
            # A connection of its own: the evaluations' reader is in use outside the feed's lock too (evals()).
            with Store.open(db, readonly=True) as reader:
                return feed.knows(decision, reader)

        return await asyncio.to_thread(ask)

    async def append_label(self, label: dict[str, str]) -> None:
        """Append one label line to ``labels/api.jsonl`` (one write, O_APPEND) and ingest it.

        Raises OSError, logged as an ERROR naming the path: :class:`safefile.RefusedFile` when that name, or
        ``labels``, is not a regular file (a directory) inside the state root (a symlink, a FIFO, a device).
        """
        import json

        line = (json.dumps(label, ensure_ascii=False) + "\n").encode("utf-8")
        try:
            await _run_in(self.executors.ingest, safefile.append, self._config.state_root, LABELS_FILE, line)
        except OSError as exc:
            log.error("label not written: %s: %s", exc.filename, exc.strerror)
            raise
        self._on_path(LABELS_FILE)

    # --- signals and lifecycle

    def handle_exit(self, sig: int | None = None) -> None:
        """SIGTERM/SIGINT: ask the main loop to stop; a second signal forces it."""
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        self.should_exit = True

    def handle_reload(self) -> None:
        """SIGHUP: re-read the config file at the next tick."""
        self.reload_requested = True

    def run(self) -> int:
        """Run until stopped; returns the exit status (daemon/lifecycle.py)."""
        # The event loop shares the GIL with the worker threads, and waits up to a switch interval for it after
        # each system call: a shorter interval keeps /healthz and /metrics quick while audits and evaluations run.
        sys.setswitchinterval(SWITCH_INTERVAL)
        asyncio.run(self.serve())
        return self.exit_status

    async def serve(self) -> None:
        """Claim the port, the store's lock and a sound store (in that order, before writing anything under the state
        root); start everything, loop until asked to stop, then shut down in order. A claim that fails is one ERROR
        line and :attr:`exit_status` (daemon/lifecycle.py); a signal during the start stops it between two phases.
        """
        loop = asyncio.get_running_loop()
        self.lock = asyncio.Lock()
        self._install_signals(loop)
        try:
            if not await self._claim():
                return
            try:
                await self._start(loop)
                await self._main_loop()
            except sqlite3.DatabaseError as exc:
                if not lifecycle.store_damaged(exc):
                    raise
                self._store_damaged(exc, "start")
            finally:
                await self._shutdown()
        finally:
            self._uninstall_signals(loop)

    async def _claim(self) -> bool:
        """Bind the port, lock the store, remove a stale model temp file, open the store (checked); False (logged,
        :attr:`exit_status` set, what was claimed let go) if one of them fails."""
        cfg = self._config
        try:
            if self._listeners is None:
                self._listeners = lifecycle.bind_listeners(cfg.daemon.listen)
            self._store_lock = lifecycle.StoreLock.acquire(cfg.db_path)
            removed = lifecycle.remove_stale_temp(cfg.db_path)
            self.notifier.status("starting: checking the store")
            await asyncio.to_thread(self._open_store)
        except StartupError as exc:
            log.error("%s", exc)
            self.exit_status = exc.status
            self._release()
            return False
        if removed is not None:
            log.info("removed %s, left by a stop that did not finish", removed)
        return True

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
            if lifecycle.store_damaged(exc):
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

    async def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Catch up with the state root, evaluate, then serve and watch (returns early once asked to stop)."""
        cfg = self._config
        assert self.store is not None
        if self.should_exit:  # a signal while the store was being opened
            return
        self.notifier.status("starting: catching up with the state directory")
        log.info("catching up with the state root %s", cfg.state_root)
        self.ingester = self._new_ingester(self.store)
        await asyncio.to_thread(self._record_methodology, None)
        await self._scan()
        if self.should_exit:
            return
        await self._rescore()
        if self.should_exit:
            return
        await self._start_http()
        self._start_observer(loop)
        await self._track_logs()
        self._poll_task = loop.create_task(self._poll_logs())
        self._start_scheduler()
        self.started.set()
        self.notifier.ready(status=self._status())
        log.info("honestyd serving on http://%s:%s/ (state %s)", self._host(), self.port, cfg.state_root)

    def _release(self) -> None:
        """Let go of what _claim took (the last step of a shutdown, or of a start that failed)."""
        for sock in self._listeners or ():
            sock.close()
        if self.reader is not None:
            self.reader.close()
        if self.store is not None:
            self.store.close()
        if self._store_lock is not None:
            self._store_lock.release()

    def _install_signals(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            loop.add_signal_handler(signal.SIGTERM, self.handle_exit, signal.SIGTERM)
            loop.add_signal_handler(signal.SIGINT, self.handle_exit, signal.SIGINT)
            loop.add_signal_handler(signal.SIGHUP, self.handle_reload)
        except (NotImplementedError, RuntimeError):  # not the main thread (tests drive serve() directly)
            pass

    @staticmethod
    def _uninstall_signals(loop: asyncio.AbstractEventLoop) -> None:
        """Back to the default handlers once serve() returns: a caller that goes on (the demo) must stay stoppable."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)

    async def _main_loop(self) -> None:
        interval = self.notifier.watchdog_interval()
        last_ping = time.monotonic()
        while not self.should_exit:
            await asyncio.sleep(0.1)
            if self.reload_requested:
                self.reload_requested = False
                await self.reload()
            logsetup.flush()  # the counts of repeated log lines whose period has ended
            if interval is not None and time.monotonic() - last_ping >= interval:
                # Pinged from the loop that does the work: a wedged loop stops the pings.
                self.notifier.watchdog()
                last_ping = time.monotonic()

    async def _shutdown(self) -> None:
        self.notifier.stopping()
        log.info("shutting down")
        if self.observer is not None:
            self.observer.stop()
            await asyncio.to_thread(self.observer.join, 5)
        if self._poll_task is not None:
            self._poll_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poll_task
            self._on_changed_logs()  # the last appends join the drain
        if self._flush_handle is not None:
            self._flush_handle.cancel()
        try:
            await asyncio.wait_for(self._flush(), self._config.daemon.drain_timeout)
        except TimeoutError:
            log.warning("drain timed out; %d paths left for the next start's rescan", len(self.pending))
        if self.ingester is not None:
            self.ingester.reject_log.flush(everything=True)  # rejects only counted so far get their summary line
        if self._job_tasks:
            # A job may be mid-evaluation in a worker thread: let it finish before the store closes. Wait before
            # the scheduler shuts down, which cancels running job tasks (the thread would go on, store closed under
            # it); no new job starts meanwhile, since should_exit is set (see _tracked).
            await asyncio.wait(set(self._job_tasks), timeout=self._config.daemon.drain_timeout)
        if self.scheduler is not None:
            self.scheduler.shutdown(wait=False)
        await self._save_model()
        if self.connections is not None:
            await self.connections.stop()
        if self.runner is not None:
            await self.runner.cleanup()
        self.executors.shutdown()
        self._release()
        log.info("stopped")

    async def _save_model(self) -> None:
        """Write the model cache (daemon/modelcache.py), once every job that could change the model is done."""
        feed, store = self.feed, self.store
        if feed is None or store is None or feed.at is None or not self._config.daemon.model_cache:
            return
        if self.exit_status == lifecycle.EXIT_STORE_DAMAGED or self._recovering:
            return  # a model of a store that is damaged or gone is no cache for the next start
        path = modelcache.path_for(self._config.db_path)
        self.notifier.status(f"writing the model cache {path}")
        started = time.monotonic()
        try:
            size = await _run_in(self.executors.model, modelcache.save, feed, path, store.store_id())
        except Exception as exc:  # whatever it was (a full disk, no memory left), the stop goes on; the next start
            log.warning("model cache %s not written: %s", path, exc)  # builds the model from the store
            return
        log.info("model cache %s written: %.1f MB in %.1f s", path, size / 1e6, time.monotonic() - started)

    async def reload(self) -> bool:
        """Re-read the config file; a bad file is rejected (keys named) and the old config stays."""
        if self.config_path is None:
            log.info("SIGHUP: no config file to re-read")
            return False
        self.notifier.reloading()
        try:
            new = self.overrides.apply(await asyncio.to_thread(load_config, self.config_path))
        except ConfigError as exc:
            for error in exc.errors:
                log.error("reload rejected: %s", error)
            self.notifier.ready_after_reload(status="reload rejected; previous config still in force")
            return False
        old = self._config
        if (new.state_root, new.db_path, new.daemon.listen) != (old.state_root, old.db_path, old.daemon.listen):
            log.warning("state root, database and listen address change only on restart")
            new = replace(new, state_root=old.state_root, db_path=old.db_path,
                          daemon=replace(new.daemon, listen=old.daemon.listen))
        self._config = new
        assert self.ingester is not None
        self.ingester.config = new
        await _run_in(self.executors.model, self._record_methodology, old)
        self._schedule_intervals()
        self._request_rescore()
        log.info("configuration reloaded from %s", self.config_path)
        self.notifier.ready_after_reload(status=self._status())
        return True

    # --- ingest

    def _observed_clock(self) -> datetime:
        return self.clock()

    def _on_path(self, rel: str | None, *, settled: bool = False) -> None:
        """A watcher saw ``rel`` change (None: something big moved; rescan all). Coalesce, then ingest.

        ``settled``: the change was found by the log poller, which looks only once a debounce: it has waited its
        debounce already, and a pass may start at once.
        """
        if rel is None:
            self.full_rescan_pending = True
        else:
            self.pending.add(rel)
            if rel not in self.poller and self.ingester is not None and \
                    self.ingester.source_of(rel) in ("heartbeats", "labels"):
                self.poller.track(rel)
        self._schedule_flush(0.0 if settled else self._config.daemon.debounce)

    def _schedule_flush(self, delay: float) -> None:
        """One pass at a time: paths that change during a pass wait for the next, started a debounce after it.

        Starting a pass per debounce whatever the state queued passes on the lock faster than a busy daemon ran
        them, and every evaluation waited behind all of them (the soak's metrics fell minutes behind). A pass
        already due later is brought forward to ``delay`` from now.
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
        self._flush_task = asyncio.get_running_loop().create_task(self._flush_then_next())

    async def _flush_then_next(self) -> None:
        try:
            await self._flush()
        finally:
            self._flush_task = None
            # Not while the store refuses writes, or is gone: then the next file event or rescan retries (see _flush).
            if (self.pending or self.full_rescan_pending) and self._store_failing_since is None \
                    and not self._recovering:
                # A debounce's gap for the evaluation of this pass; the poller's next look (a debounce apart, see
                # _on_path) brings it forward when logs have grown meanwhile.
                self._schedule_flush(self._config.daemon.debounce)

    async def _flush(self) -> None:
        """One ingest pass, once the store is in place (see _store_in_place); a damaged store stops the daemon."""
        if self.ingester is None or not await self._store_in_place():
            return
        try:
            await self._ingest_pass()
        except sqlite3.DatabaseError as exc:
            if not lifecycle.store_damaged(exc):
                raise
            self._store_damaged(exc, "ingest")
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
                    stats = await _run_in(self.executors.ingest, ingester.scan, observed=observed)
                except sqlite3.OperationalError as exc:
                    stats, error = ingester.committed, exc  # the files committed before the refusal still count
                    self.full_rescan_pending = True  # the whole pass again, next time
                else:
                    self._pending_scan_unobserved = False
            else:
                stats, left, error = await _run_in(self.executors.ingest, self._ingest_paths, ingester, paths)
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
        assert self.lock is not None and self.ingester is not None
        async with self.lock:
            try:
                stats = await _run_in(self.executors.ingest, self.ingester.scan)
            except sqlite3.OperationalError as exc:
                # Start serving anyway (the operator sees the log line and the metric); the rescan job retries.
                self.full_rescan_pending = self._pending_scan_unobserved = True
                self._store_refused(exc, "start-up scan")
                stats = self.ingester.committed
            except sqlite3.DatabaseError as exc:
                if not lifecycle.store_damaged(exc):
                    raise
                self._store_damaged(exc, "start-up scan")
                return
        self._count(stats)

    def _store_refused(self, exc: sqlite3.OperationalError, what: str) -> None:
        """Count and log a write the store refused (an ERROR line once per episode, DEBUG after). Hold the lock."""
        assert self.store is not None
        # SQLite may leave a failed COMMIT's transaction open (SQLITE_FULL/BUSY): end it, or every later
        # atomic() would nest in it as a savepoint and never commit. A no-op when no transaction is open.
        self.store.conn.rollback()
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
            self.feed = None
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
            async with self.lock:
                await _run_in(self.executors.ingest, self._open_store)
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

    def _count(self, stats: IngestStats) -> None:
        self.ingest_records.update(stats.records)
        self.ingest_rejects.update(stats.rejects)
        if stats.records or stats.rejects or stats.deleted:
            log.info("ingested %d records, %d rejects, %d deletions", sum(stats.records.values()),
                     sum(stats.rejects.values()), stats.deleted)

    # --- scoring

    def _counters(self) -> Counters:
        ingester = self.ingester
        return Counters(Counter(self.ingest_records), Counter(self.ingest_rejects), Counter(self.checks),
                        Counter(self.check_failures), Counter(self.scheduler_missed), self.store_full,
                        unreadable_files=len(ingester.unreadable) if ingester is not None else None,
                        lost_lines=ingester.losses.lines if ingester is not None else 0,
                        lost_bytes=ingester.losses.bytes if ingester is not None else 0)

    def _request_rescore(self) -> None:
        self._rescore_dirty = True
        # A running evaluation sees the flag and goes once more; asking the scheduler would only log a skipped run.
        if self._rescoring:
            return
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.modify_job("rescore", next_run_time=datetime.now(UTC))

    async def _rescore(self) -> None:
        """Bring the scoring model up to date with the store and evaluate every window now.

        The model is loaded once (and again after a reload changes the config) on a read connection of its
        own, so a long first load never holds up ingest; afterwards each pass applies only what was committed
        since, and only the decisions that can have changed are re-evaluated (scorers/live.py).
        """
        if self._recovering:  # no model of a half-filled store: evaluated once it has caught up (see _flush)
            self._rescore_dirty = True
            return
        self._rescoring += 1
        try:
            await self._rescore_while_dirty()
        except sqlite3.DatabaseError as exc:
            if not lifecycle.store_damaged(exc):
                raise
            self._store_damaged(exc, "evaluation")
        finally:
            self._rescoring -= 1

    async def _rescore_while_dirty(self) -> None:
        assert self.lock is not None and self.store is not None
        self._rescore_dirty = True
        store = self.store
        while self._rescore_dirty:  # changes that arrive during an evaluation get one more
            self._rescore_dirty = False
            config = self._config
            feed = self.feed
            # The cache is for the first load only: it is read once, and a rebuild is for another configuration.
            cache = modelcache.path_for(config.db_path) if feed is None and config.daemon.model_cache else None
            if feed is not None and feed.config is not config:
                if await _run_in(self.executors.model, feed.adopt, config):
                    log.info("reload: scoring model kept (what changed is read only when windows are summed)")
                else:
                    # Let go of the old model before building the new one: memory holds one model, not two. Until it
                    # is built the snapshot's numbers are served, and audits show them without rows.
                    log.info("reload: the rules read what changed (or a window grew past what the model let go);"
                             " rebuilding the scoring model from the store")
                    self.feed = feed = None
            if feed is None:
                feed = await _run_in(self.executors.model, _load_feed, config, cache, self.clock())
            reader = self.reader
            assert reader is not None
            evals = await _run_in(self.executors.model, _sync_feed, feed, reader)
            self.feed = feed
            at = self.clock()
            try:
                windows = await _run_in(self.executors.model, feed.evaluate, at)
            except HistoryEvicted as exc:
                log.warning("the clock stepped back past what the scoring model keeps (%s); rebuilding it", exc)
                self.feed = None
                self._rescore_dirty = True
                continue
            exported = await _run_in(self.executors.model, _export, feed, windows, config, self.held_back)
            snap = Snapshot(at=at, config=config, windows=windows, counters=self._counters(), evals=evals,
                            model=feed.size, exported=exported,
                            labels_unmatched=feed.unmatched)
            self._snapshot = snap
            if self.unready is not None and not self._recovering and self.exit_status == 0:
                log.warning("store %s rebuilt from the state root and evaluated: ready again", config.db_path)
                self.unready = None
            self.freezer.after_evaluation()
            if self._history_due(snap):
                async with self.lock:
                    try:
                        await _run_in(self.executors.ingest, self._write_history, store, snap, feed.marks[3])
                    except sqlite3.OperationalError as exc:
                        # Today's counts are rewritten by a later evaluation; a full store must not stop scoring.
                        self._store_refused(exc, "history")
            await _run_in(self.executors.model, self._write_changelog, changelog.drop_entries(snap))

    def _history_due(self, snap: Snapshot) -> bool:
        """Today's history rows are written at most once a minute, and at the first evaluation of a day (each write
        replaces agents × windows × components rows; evaluations come as often as every event, and a busy log adds
        a feed row per ingest pass). Asked before taking the store lock, which a pass may hold.
        """
        written = self._history_written
        return written is None or written[0] != snap.at.date() or time.monotonic() - written[1] >= HISTORY_EVERY

    def _write_history(self, store: Store, snap: Snapshot, applied: int) -> None:
        """Today's history rows, and the change feed the model has applied dropped (see _history_due)."""
        _store_history(store, snap)
        _prune_changes(store, applied)
        self._history_written = (snap.at.date(), time.monotonic())

    async def audit(self, agent: str, window: str) -> tuple[datetime, AgentResult] | None:
        """One agent's result with every audit row, built on request from the model (not kept per snapshot)."""
        feed = self.feed
        if feed is None:
            return None
        return await _run_in(self.executors.requests, self._audit_rows, feed, agent, window)

    def _audit_rows(self, feed: LiveFeed, agent: str, window: str) -> tuple[datetime, AgentResult] | None:
        found = feed.agent_result(agent, window)
        if found is not None:
            self.freezer.after_audit()  # its rows live until it is answered: no collection walks them meanwhile
        return found

    # --- changelog

    def _write_changelog(self, entries: list[changelog.Entry]) -> None:
        if not entries:
            return
        path = self.changelog_path()
        if self._changelog is None or self._changelog.path != path:  # a reload may move it
            self._changelog = changelog.Appender(path, self._config.state_root)
        try:
            written = self._changelog.append(entries)
        except OSError as exc:
            log.error("changelog %s: %s", path, exc)
            return
        for entry in written:
            log.info("changelog: %s", entry.key)

    def _record_methodology(self, old: Config | None) -> None:
        """At start (``old`` None: compare with the file's last fingerprint) and on reload."""
        previous = changelog.last_methodology_fingerprint(self.changelog_text())
        if previous == changelog.methodology_fingerprint(self._config):
            return  # already recorded (an unchanged restart, or `tune --apply` logged it before the reload)
        self._write_changelog(changelog.methodology_entries(old, self._config, self.clock(), previous=previous))

    async def _digest(self) -> None:
        if self._snapshot is not None:
            await _run_in(self.executors.model, self._write_changelog, [changelog.digest_entry(self._snapshot)])

    # --- scheduled jobs

    def _start_scheduler(self) -> None:
        scheduler = AsyncIOScheduler(timezone=UTC)
        scheduler.add_listener(self._on_job_event, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES | EVENT_JOB_ERROR)
        defaults: dict[str, Any] = {"coalesce": True, "max_instances": 1, "misfire_grace_time": 30}
        cfg = self._config
        jobs: list[tuple[str, Callable[[], Awaitable[None]], Any]] = [
            ("rescore", self._rescore, IntervalTrigger(seconds=cfg.daemon.rescore_interval.total_seconds())),
            ("rescan", self._rescan_job, IntervalTrigger(seconds=cfg.daemon.rescan_interval.total_seconds())),
            ("watcher", self._watch_observer, IntervalTrigger(seconds=2)),
            ("verify", self._verify_sample, self._daily(cfg.verify.daily_at)),
            ("digest", self._digest, CronTrigger(hour=23, minute=55, timezone=UTC)),
            ("checkpoint", self._checkpoint, IntervalTrigger(hours=1)),
        ]
        for job_id, fn, trigger in jobs:
            scheduler.add_job(self._tracked(fn), trigger, id=job_id, name=job_id, **defaults)
        scheduler.start()
        self.scheduler = scheduler

    def _tracked(self, fn: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
        """A job that shutdown can wait for, and that does not start once shutdown has begun."""

        async def job() -> None:
            if self.should_exit or (self._recovering and getattr(fn, "__name__", "") in _STORE_JOBS):
                return
            task = asyncio.current_task()
            assert task is not None
            self._job_tasks.add(task)
            try:
                await fn()
            except sqlite3.DatabaseError as exc:
                if not lifecycle.store_damaged(exc):
                    raise
                self._store_damaged(exc, getattr(fn, "__name__", "job").strip("_"))
            finally:
                self._job_tasks.discard(task)

        return job

    @staticmethod
    def _daily(at: str) -> CronTrigger:
        hour, minute = (int(x) for x in at.split(":"))
        return CronTrigger(hour=hour, minute=minute, timezone=UTC)

    def _schedule_intervals(self) -> None:
        if self.scheduler is None:
            return
        cfg = self._config
        self.scheduler.reschedule_job("rescore", trigger=IntervalTrigger(
            seconds=cfg.daemon.rescore_interval.total_seconds()))
        self.scheduler.reschedule_job("rescan", trigger=IntervalTrigger(
            seconds=cfg.daemon.rescan_interval.total_seconds()))
        self.scheduler.reschedule_job("verify", trigger=self._daily(cfg.verify.daily_at))

    def _on_job_event(self, event: JobExecutionEvent) -> None:
        if event.code == EVENT_JOB_ERROR:
            log.error("job %s failed: %r", event.job_id, event.exception)
            return
        # Missed or coalesced runs are counted, never silently lost.
        self.scheduler_missed[event.job_id] += 1

    async def _rescan_job(self) -> None:
        self.full_rescan_pending = True
        await self._flush()
        await self._track_logs()

    async def _track_logs(self) -> None:
        """Poll every log the store has a cursor for (the watcher adds logs that appear later)."""
        assert self.lock is not None and self.store is not None
        if self._recovering:
            return
        async with self.lock:
            cursors = await _run_in(self.executors.ingest, self.store.cursors)
        for cursor in cursors:
            if cursor.path not in self.poller:
                self.poller.track(cursor.path, seen=False)  # an append since the scan read it is not left waiting

    async def _poll_logs(self) -> None:
        """Every debounce, hand the logs whose size or time changed to the next pass (see collectors/poll.py)."""
        while not self.should_exit:
            await asyncio.sleep(max(self._config.daemon.debounce, MIN_POLL))
            self._on_changed_logs()

    def _on_changed_logs(self) -> None:
        for rel in self.poller.changed():
            self._on_path(rel, settled=True)

    async def _watch_observer(self) -> None:
        if self.observer is not None and not self.observer.is_alive() and not self.should_exit:
            log.error("file watcher thread died; restarting it and rescanning")
            self._start_observer(asyncio.get_running_loop())
            await self._rescan_job()

    async def _checkpoint(self) -> None:
        assert self.lock is not None and self.store is not None
        store = self.store
        async with self.lock:
            await _run_in(self.executors.ingest, store.checkpoint)

    async def _locked(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the store writer's thread, holding the store lock (SQLite writes one at a time anyway)."""
        assert self.lock is not None
        async with self.lock:
            return await _run_in(self.executors.ingest, fn)

    async def _verify_sample(self, now: datetime | None = None) -> None:
        """The daily verification sample as of ``now`` (default: the daemon's clock), its results stored under the
        store lock (daemon/verify/once.py, as ``honestyd verify`` does)."""
        from daemon.verify.once import verify_once

        assert self.store is not None
        cfg = self._config
        now = self.clock() if now is None else now
        summary = await verify_once(self.store, cfg, cfg.state_root, now, self.clock, sample_day=now.date(),
                                    environ=self.environ, access=self._locked)
        self.checks.update(summary.checked)
        self.check_failures.update(summary.failed)
        log.info("verification sample: %s", summary.as_dict())
        self._request_rescore()

    # --- watchers and HTTP

    def _start_observer(self, loop: asyncio.AbstractEventLoop) -> None:
        observer = Observer()
        observer.schedule(_Watcher(self._config.state_root, loop, self._on_path, self.poller.moved),
                          str(self._config.state_root),
                          recursive=True, event_filter=list(WATCHED_EVENTS))
        observer.daemon = True
        observer.start()
        self.observer = observer

    def _host(self) -> str:
        return self._config.daemon.listen.rpartition(":")[0].strip("[]")

    async def _start_http(self) -> None:
        # HTTP_LIMITS: header size limits and the idle/slow-client cut-off; HTTP_LOG: malformed requests logged as
        # one rate-limited line, not a traceback each (see daemon/api.py). They are keyword arguments of the request
        # handler, passed straight through: an unknown one would make aiohttp drop them all, access_log=None
        # included, with only a warning.
        runner = web.AppRunner(make_app(self, executor=self.executors.requests), access_log=None, logger=HTTP_LOG,
                               **HTTP_LIMITS)
        await runner.setup()
        # No more connections than the descriptor limit leaves room for (see ConnectionLimit); a failed accept()
        # is one line, not a traceback (and repeats are counted: daemon/logsetup.py).
        limit = descriptor_limit()
        budget = connection_budget(limit)
        if budget < self._config.api.max_connections:
            log.warning("[api] max_connections = %d, but a descriptor limit of %d leaves room for %d connections:"
                        " holding at most that many (raise LimitNOFILE= to allow more)",
                        self._config.api.max_connections, limit, budget)
        asyncio.get_running_loop().set_exception_handler(logsetup.loop_exception_handler)
        assert self._listeners, "serve() binds the listening sockets first"
        sockets = self._listeners
        for sock in sockets:  # bound by _claim, before anything was ingested or written
            await web.SockSite(runner, sock).start()
        self.port = int(sockets[0].getsockname()[1])
        self.runner = runner
        assert runner.server is not None
        self.connections = ConnectionLimit(runner.server, lambda: min(self._config.api.max_connections, budget))
        self.connections.take_over(sockets)

    def _status(self) -> str:
        snap = self._snapshot
        if snap is None:
            return "no evaluation yet"
        agents = {a for w in snap.windows.values() for a in w.agents}
        return f"{len(agents)} agents scored at {snap.at:%Y-%m-%dT%H:%M:%SZ}"


def _sync_feed(feed: LiveFeed, reader: Store) -> tuple[EvalReport, ...]:
    """Apply what the store committed to the model, and read the benchmark reports, on the evaluations' reader."""
    feed.sync(reader)
    return tuple(reader.evals())


def _load_feed(config: Config, cache: Path | None = None, at: datetime | None = None) -> LiveFeed:
    """A model of the store, read on a connection of its own (ingest goes on meanwhile): from the model cache at
    ``cache`` when there is a usable one (the sync that follows applies what was committed since), else built (the
    records it would let go at its first evaluation, ``at`` or later, are left in the store: see LiveFeed.load).
    """
    with Store.open(config.db_path, readonly=True) as reader:
        feed = None if cache is None else modelcache.load(cache, config, reader, freeze=True)
        if feed is None:
            feed = LiveFeed(config)
            feed.load(reader, at)
    # The model is millions of long-lived objects: a full collection walking them all paused the loop's worker
    # threads for most of a second. Frozen, the collector leaves them alone; new objects are collected as usual.
    gc.collect()
    gc.freeze()
    return feed


def _export(feed: LiveFeed, windows: Mapping[str, WindowResult], config: Config, held_back: HeldBackLog) -> Exported:
    """The agents this evaluation exports as series ([limits]); those newly held back are logged once."""
    listed = {a for w in windows.values() for a in w.agents}
    exported = limits.select(listed, config.limits, feed.latest_decisions)
    held_back.note(exported, listed)
    return exported


def _store_history(store: Store, snap: Snapshot) -> None:
    """Today's counts per exported agent and window (rewritten by every evaluation until the day ends).

    Agents held back by [limits] get no rows: the rows are a time series per agent like /metrics, and would grow the
    store by agents × windows × components rows a day."""
    day = snap.at.date()
    counts = [
        DayCounts(day, agent, window, a.decisions, tuple(a.components[c] for c in COMPONENTS))
        for window, result in snap.windows.items()
        for agent, a in snap.exported.items(result.agents)
    ]
    with store.atomic():
        store.put_history(counts)


def _prune_changes(store: Store, applied: int) -> None:
    with store.atomic():
        store.prune_changes(applied)


def warped_clock(origin: datetime, since: float, rate: float) -> Clock:
    """A clock ``rate`` times faster than the system's that read ``origin`` at the Unix time ``since`` (benchmark
    hook: ``bench/soak.py --days-per-minute`` runs weeks in minutes, its writers on the same function). Computed,
    not read from a file: the file clock, read at every look at the clock (each log of each ingest pass), was ~4 %
    of the soak daemon's samples, a cost no daemon on the system clock pays."""

    def now() -> datetime:
        return origin + timedelta(seconds=(time.time() - since) * rate)

    return now


def file_clock(path: Path) -> Clock:
    """A clock read from a file holding one RFC 3339 time (test hook: time is a parameter)."""
    from collectors.rfc3339 import parse_ts

    def now() -> datetime:
        return parse_ts(path.read_text(encoding="utf-8").strip())

    return now


