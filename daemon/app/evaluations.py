"""The running daemon's evaluations: asked for after every ingest pass (a flag, so requests made during one are one
more), each bringing the model up to date and evaluating it (daemon/modelkeeper.py), then publishing the snapshot that
/metrics, the API and the pages read (after the review queue has had its say: daemon/app/reviewing.py), and writing
its history rows."""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter
from datetime import UTC, datetime

from daemon import lifecycle
from daemon.app.chronicle import Chronicle
from daemon.executors import run_in
from daemon.snapshot import Counters, Snapshot

log = logging.getLogger("honestyd")


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
                        await run_in(self.executors.ingest, self._write_history, store, snap, feed.marks[3])
                    except sqlite3.OperationalError as exc:
                        # Today's counts are rewritten by a later evaluation; a full store must not stop scoring.
                        self._store_refused(exc, "history")

    async def _after_evaluation(self, snap: Snapshot) -> Snapshot:
        """What follows an evaluation before its snapshot is published (the review queue: daemon/app/reviewing.py)."""
        return snap

    async def _save_model(self) -> None:
        """Write the model cache (daemon/modelcache.py), once every job that could change the model is done."""
        store = self.store
        if store is None or not self._config.daemon.model_cache:
            return
        if self.exit_status == lifecycle.EXIT_STORE_DAMAGED or self._recovering:
            return  # a model of a store that is damaged or gone is no cache for the next start
        await self.keeper.save(self._config, store, self.notifier.status)
