"""The running daemon's evaluations: asked for after every ingest pass (a flag, so requests made during one are one
more), each bringing the model up to date and evaluating it (daemon/modelkeeper.py), then publishing the snapshot that
/metrics, the API and the pages read (after the review queue has had its say: daemon/app/reviewing.py), and writing
its history rows."""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from datetime import UTC, datetime

from daemon import lifecycle, modelcache
from daemon.app.chronicle import Chronicle
from daemon.executors import run_in
from daemon.modelkeeper import LiveFeed
from daemon.snapshot import Counters, Snapshot
from daemon.store import Store

log = logging.getLogger("honestyd")

#: A clean stop keeps this run's last cache on disk when at most this many store rows were applied since it: the next
#: start catches them up from the store.
STOP_CATCH_UP = 10_000
#: Seconds a clean stop waits for a cache write under way (it then keeps that cache if it is at most STOP_CATCH_UP rows
#: behind) before ending it and writing the cache itself: with two drain_timeouts (10 s each by default) and a stop's
#: own write it must fit in STOP_EXTENDS_AT_MOST (daemon/app/service.py: how long a stop extends systemd's
#: TimeoutStopSec); see docs/reliability.md.
STOP_WAITS_FOR_WRITER = 60.0


class Evaluations(Chronicle):
    """Evaluating the model and publishing the snapshot."""

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
        """Bring the scoring model up to date with the store and evaluate every window now (see ModelKeeper)."""
        if self._recovering:  # no model of a half-filled store: evaluated once it has caught up (see _flush)
            self._rescore_dirty = True
            return
        self._rescoring += 1
        try:
            await self._survives("evaluation", self._rescore_while_dirty())
        finally:
            self._rescoring -= 1

    async def _rescore_while_dirty(self) -> None:
        assert self.lock is not None and self.store is not None
        self._rescore_dirty = True
        store = self.store
        while self._rescore_dirty:  # changes that arrive during an evaluation get one more
            self._rescore_dirty = False
            config = self._config
            reader = self.reader
            assert reader is not None
            done = await self.keeper.evaluate(config, reader, self.clock, self.held_back)
            if done is None:  # the clock stepped back past what the model keeps: it is rebuilt at the next turn
                self._rescore_dirty = True
                continue
            feed = done.feed
            await self._store_ids_let_go(feed, store)
            snap = Snapshot(at=done.at, config=config, windows=done.windows, counters=self._counters(),
                            evals=done.evals, model=feed.size, exported=done.exported, labels_unmatched=feed.unmatched,
                            labels=feed.labels)
            snap = await self._after_evaluation(snap)
            self._snapshot = snap
            if self.unready is not None and not self._recovering and self.exit_status == 0:
                log.warning("store %s rebuilt from the state root and evaluated: ready again", config.db_path)
                self.unready = None
            self.freezer.after_evaluation()
            if self._history_due(snap):
                async with self.lock:
                    try:
                        await run_in(self.executors.ingest, self._write_history, store, snap,
                                     self._prunable(feed.marks[3]))
                    except sqlite3.OperationalError as exc:
                        # Today's counts are rewritten by a later evaluation; a full store must not stop scoring.
                        self._store_refused(exc, "history")

    async def _after_evaluation(self, snap: Snapshot) -> Snapshot:
        """What follows an evaluation before its snapshot is published (the review queue: daemon/app/reviewing.py)."""
        return snap

    async def _store_ids_let_go(self, feed: LiveFeed, store: Store) -> None:
        """Move the hashes of the ids the model let go to the store's let-go table (migration 013): what RAM holds
        follows the window, not the history. A refused write leaves them in RAM for the next evaluation."""
        hashes, upto = await run_in(self.executors.model, feed.ids_let_go)
        if not hashes:
            return
        assert self.lock is not None
        async with self.lock:
            try:
                count = await run_in(self.executors.ingest, _add_let_go, store, hashes, upto)
            except sqlite3.OperationalError as exc:
                self._store_refused(exc, "ids let go")
                return
        await run_in(self.executors.model, feed.ids_stored, hashes, count)

    def _prunable(self, applied: int) -> int:
        """How far the change feed may be pruned: what the model applied, but not past the model cache's marks."""
        return self.cache_writes.prunable(applied) if self._config.daemon.model_cache else applied

    def _cache_wanted(self) -> bool:
        """Whether a model cache may be written now: on, and of a store neither damaged nor gone."""
        return (self.store is not None and self._config.daemon.model_cache and not self._recovering
                and self.exit_status != lifecycle.EXIT_STORE_DAMAGED)

    async def _write_cache(self) -> None:
        """Write the model cache while running on (daemon/cachewriter.py: a forked writer; scoring goes on)."""
        if self._cache_wanted() and self.reader is not None and not self.should_exit:
            await self.cache_writes.write(self.keeper, self._config, self.reader)

    async def _settle_cache_write(self) -> None:
        """At a stop, before its jobs are waited for: let a cache write under way finish (at most
        STOP_WAITS_FOR_WRITER seconds; none when no cache is wanted), so that _save_model may keep its cache."""
        wanted = self._cache_wanted()
        if wanted and self.cache_writes.writer is not None:
            self.notifier.status("stopping: waiting for the model cache writer in flight")
        self._kept_in_flight = await self.cache_writes.settle(STOP_WAITS_FOR_WRITER if wanted else 0)

    async def _save_model(self) -> None:
        """Write the model cache (daemon/modelcache.py), once every job that could change the model is done."""
        await self.cache_writes.stop()  # the stop's write replaces one under way (they share the temporary file)
        store = self.store
        if store is None or not self._cache_wanted():
            if self.cache_writes.written is not None:  # one written while running, of a store since found damaged or
                modelcache.path_for(self._config.db_path).unlink(missing_ok=True)  # lost: no cache for the next start
            return
        feed, path = self.keeper.feed, modelcache.path_for(self._config.db_path)
        behind = None if feed is None else self.cache_writes.behind(feed, path)
        if behind is not None and behind <= STOP_CATCH_UP and self._kept_in_flight:
            log.info("model cache %s: kept the cache written by the writer in flight at the stop, %d rows behind%s",
                     path, behind, " (the next start catches them up)" if behind else "")
            return
        if behind == 0:  # nothing applied since the forked writer's
            log.info("model cache %s not written again: the model is as the last write left it", path)
            return
        if behind is not None and behind <= STOP_CATCH_UP:
            # What a start after SIGKILL does, and as quick: pickling the whole model again would make the stop
            # take seconds per million records for a start no faster.
            log.info("model cache %s kept: the next start catches up the %d rows applied since it was written", path,
                     behind)
            return
        await self.keeper.save(self._config, store, self.notifier.status)


def _add_let_go(store: Store, hashes: list[int], upto_us: int) -> int:
    """Write the hashes (in transactions of 100,000: the WAL stays small); returns the table's count after."""
    for start in range(0, len(hashes), 100_000):
        with store.transaction():
            store.add_let_go(hashes[start:start + 100_000], upto_us)
    return store.let_go_count()
