"""What the running daemon holds: the configuration in force, its clock, the store and its lock, the model's keeper,
the counters and the flags its parts share. The parts (the modules beside this one) are the methods on it."""

from __future__ import annotations

import asyncio
import os
import socket
from collections import Counter
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any

from aiohttp import web
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from collectors.poll import LogPoller
from collectors.reviews import ReviewEvent
from collectors.walkahead import WalkAhead
from daemon import changelog, lifecycle
from daemon.app.options import Overrides
from daemon.cachewriter import CacheWrites
from daemon.config import Config
from daemon.executors import Executors
from daemon.gcpolicy import Freezer
from daemon.http.api import MetricsCache
from daemon.http.server import ConnectionLimit
from daemon.ingest import Clock, Ingester, system_clock
from daemon.limits import HeldBackLog
from daemon.modelkeeper import ModelKeeper
from daemon.notify import Notifier
from daemon.reviews.queue import Queue
from daemon.snapshot import Snapshot
from daemon.store import Store

#: No flag overrides the config file (the default of the constructor).
NO_OVERRIDES = Overrides()


class DaemonState:
    """The daemon's state, made once by the constructor; see :class:`daemon.app.Daemon` for what drives it."""

    def __init__(
        self,
        config: Config,
        *,
        config_path: Path | None = None,
        overrides: Overrides = NO_OVERRIDES,
        clock: Clock = system_clock,
        environ: Mapping[str, str] = os.environ,
        notifier: Notifier | None = None,
        listeners: list[socket.socket] | None = None,
        executors: Executors | None = None,
        walk_ahead: WalkAhead | None = None,
    ) -> None:
        self.overrides = overrides
        self.executors = executors or Executors()
        self.metrics_cache = MetricsCache(self.executors.metrics)  # /metrics bodies, rendered on their own thread
        self.config_path = config_path
        self._config = overrides.apply(config)
        self.clock = clock
        self.environ = environ
        self.notifier = notifier or Notifier(environ)
        self.should_exit = False
        self.force_exit = False
        self.reload_requested = False
        self._snapshot: Snapshot | None = None
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
        self._changed_during_pass = False  # a file event came while the pass under way ran (see _flush_then_next)
        self._rescore_dirty = False
        self._rescoring = 0  # evaluations running (the startup one and the scheduler's job)
        self.poller = LogPoller(self._config.state_root)
        self._poll_task: asyncio.Task[None] | None = None
        #: The scoring model (daemon/modelkeeper.py): loaded by the first evaluation, dropped when the store is lost.
        self.keeper = ModelKeeper(self.executors.model)
        #: The model cache written while running (daemon/cachewriter.py): periodically, and after the start's catch-up.
        self.cache_writes = CacheWrites()
        self._kept_in_flight = False  # the stop let the write under way finish and it wrote (Evaluations._save_model)
        self._history_written: tuple[date, float] | None = None
        self.freezer = Freezer()  # records that arrive stay out of the full collections (daemon/gcpolicy.py)
        self.held_back = HeldBackLog()  # names each agent [limits] hold back from /metrics once
        #: The changelog appender (it remembers the keys the file holds): made at the first write.
        self._changelog: changelog.Appender | None = None
        #: The review queue (daemon/app/reviewing.py): the events stored (up to the rowid mark, read on the reader
        #: last synced), those written and not read back yet, what fired at the previous evaluation (None: none yet).
        self.queue = Queue()
        self._review_events: list[ReviewEvent] = []
        self._review_pending: dict[str, ReviewEvent] = {}
        self._pending_seq = 0
        self._review_mark = 0
        self._review_reader: Store | None = None
        self._firing: frozenset[tuple[str, str]] | None = None
        self._review_lock: asyncio.Lock | None = None
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
        #: The start-up scan's walk, under way in another process since ``honestyd run`` began
        #: (collectors/walkahead.py): read by that scan, then asked what changed since once the watcher runs.
        self._walk_ahead = walk_ahead
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
