"""The running daemon's life: claim, start, loop, reload, shut down (uvicorn's shape).

Signal handlers only set flags; the main loop notices them. The start claims the port, the store's lock and a
sound store (daemon/lifecycle.py) before writing anything under the state root; shutdown goes in a fixed order —
stop watchers, drain pending file events (with a timeout), stop the scheduler, save the model, close HTTP, close
the store — and the process exits with :attr:`Daemon.exit_status`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from dataclasses import replace

from daemon import lifecycle, logsetup
from daemon.app.backend import HttpBackend
from daemon.app.chronicle import Chronicle
from daemon.app.evaluations import Evaluations
from daemon.app.reviewing import Reviewing
from daemon.app.scheduling import Scheduling
from daemon.app.storekeeping import StoreKeeping
from daemon.app.watching import Watching
from daemon.config import ConfigError, load_config
from daemon.executors import run_in
from daemon.lifecycle import StartupError

log = logging.getLogger("honestyd")

#: Seconds a thread may hold the GIL while another waits for it (CPython's default is 0.005). The loop needs it back
#: after every system call, a few per request: at the default, a burst of requests during an audit queued behind
#: those waits. Threads that do not wait for each other are not switched any more often.
SWITCH_INTERVAL = 0.0002
#: How long a start extends systemd's start timeout (Notifier.keep_extending): the loop's pings cannot tell a phase
#: that hangs in a thread from one that works, so past this such a start is killed; well past the largest start that
#: docs/deploy.md sizes.
START_EXTENDS_AT_MOST = 3600.0
#: The same for a stop: its drain and its waits are bounded, its cache write is not.
STOP_EXTENDS_AT_MOST = 1800.0


class Daemon(HttpBackend, Scheduling, Reviewing, Watching, Evaluations, Chronicle, StoreKeeping):
    """The running service. Drive it with :meth:`serve`; stop it with :meth:`handle_exit`.

    Made of one part per idea (each a module of daemon/app/, each building on those after it in this list): the
    HTTP backend, the scheduled jobs, the review queue, watching and ingest passes, evaluations, the history and
    changelog, the store; the state they share is :class:`daemon.app.state.DaemonState` (its constructor is this one's).
    """

    #: The task extending systemd's start or stop timeout while one is under way (see _extend).
    _extension: asyncio.Task[None] | None = None

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
        self._extend("start", START_EXTENDS_AT_MOST)  # until READY=1 (see _start)
        try:
            if not await self._claim():
                return
            try:
                await self._survives("start", self._start_then_loop(loop))
            finally:
                await self._shutdown()
        finally:
            self._extend(None)
            self._uninstall_signals(loop)

    def _extend(self, what: str | None, at_most: float = 0.0) -> None:
        """Extend systemd's timeout for ``what`` (the start, the stop) from the event loop until the next call, for at
        most ``at_most`` seconds (Notifier.keep_extending); None: no longer."""
        if self._extension is not None:
            self._extension.cancel()
            self._extension = None
        if what is not None and self.notifier.enabled:
            self._extension = asyncio.get_running_loop().create_task(self.notifier.keep_extending(what, at_most))

    async def _claim(self) -> bool:
        """Bind the port, lock the store, remove a stale model temp file, open the store (checked); False (logged,
        :attr:`exit_status` set, what was claimed let go) if one of them fails."""
        cfg = self._config
        try:
            if self._listeners is None:
                self._listeners = lifecycle.bind_listeners(cfg.daemon.listen)
            self._store_lock = lifecycle.StoreLock.acquire(cfg.db_path)
            removed = lifecycle.remove_stale_temp(cfg.db_path)
            self.keeper.prefetch(cfg)  # the model cache is read while the store is checked (nothing is written)
            if self._walk_ahead is not None:
                self._walk_ahead.prepare()  # and the early walk's answer decoded
            self.notifier.status("starting: checking the store")
            await asyncio.to_thread(self._open_store)
        except StartupError as exc:
            log.error("%s", exc)
            self.exit_status = exc.status
            self._release()
            return False
        if removed is not None:
            log.info("removed %s, left by a model cache write that did not finish", removed)
        return True

    async def _start_then_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        await self._start(loop)
        await self._main_loop()

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
        # The model loads (from the cache, or from the store) on its thread while the catch-up scans on its own.
        self.keeper.preload(cfg, self.clock)
        await self._scan()
        if self.should_exit:
            return
        await self._rescore()
        if self.should_exit:
            return
        self.metrics_cache.prefetch(self._snapshot)  # the first scrape's render (every agent) while HTTP starts
        await self._start_http()
        await self._start_observer()
        await self._track_logs()
        self._poll_task = loop.create_task(self._poll_logs())
        if self._walk_ahead is not None:  # what changed between the early walk and the watcher's start
            self._job_tasks.add(asyncio.ensure_future(self._tracked(self._changed_since_walk)()))
        self._start_scheduler()
        # The cache the start read was deleted as it was read: a crash from here on starts from this one.
        self._job_tasks.add(asyncio.ensure_future(self._tracked(self._write_cache)()))  # a stop waits for it
        self.started.set()
        self._extend(None)  # READY=1 ends the start's timeout; the watchdog takes over (_main_loop)
        self.notifier.ready(status=self._status())
        log.info("honestyd serving on http://%s:%s/ (state %s)", self._host(), self.port, cfg.state_root)

    def _release(self) -> None:
        """Let go of what _claim took (the last step of a shutdown, or of a start that failed)."""
        if self._walk_ahead is not None:
            self._walk_ahead.close()
            self._walk_ahead = None
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
        self._extend("stop", STOP_EXTENDS_AT_MOST)  # a drain, a writer waited for and a cache write can outlast it
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
        # A cache write under way finishes (bounded) before the jobs are waited for: _save_model may keep its cache.
        await self._settle_cache_write()
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
        await run_in(self.executors.model, self._record_methodology, old)
        self._schedule_intervals()
        self._request_rescore()
        log.info("configuration reloaded from %s", self.config_path)
        self.notifier.ready_after_reload(status=self._status())
        return True

    def _status(self) -> str:
        snap = self._snapshot
        if snap is None:
            return "no evaluation yet"
        agents = {a for w in snap.windows.values() for a in w.agents}
        return f"{len(agents)} agents scored at {snap.at:%Y-%m-%dT%H:%M:%SZ}"
