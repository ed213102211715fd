"""The running daemon's scheduled jobs (APScheduler, on the event loop): evaluate, rescan, watch the watcher, verify
the day's sample of cited sources, write the changelog's digest, checkpoint the WAL.

Each job runs at most once at a time; a missed or coalesced run is counted (``honesty_scheduler_missed_total``),
never lost silently; no job starts once shutdown has begun, and shutdown waits for those that run. A job reads the
time it runs at from the daemon's clock (injected: tests and benchmarks move it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from apscheduler.events import EVENT_JOB_ERROR, EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from daemon.app.reviewing import Reviewing

log = logging.getLogger("honestyd")

#: Scheduled jobs that use the store and so wait while a lost one is rebuilt (the rescan is the one that rebuilds it).
_STORE_JOBS = ("_verify_sample", "_checkpoint")


class Scheduling(Reviewing):
    """The scheduler and the jobs of their own (the others are methods of the parts they belong to)."""

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
            ("cache", self._write_cache, IntervalTrigger(seconds=cfg.daemon.cache_every.total_seconds())),
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
                await self._survives(getattr(fn, "__name__", "job").strip("_"), fn())
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
        self.scheduler.reschedule_job("cache", trigger=IntervalTrigger(seconds=cfg.daemon.cache_every.total_seconds()))

    def _on_job_event(self, event: JobExecutionEvent) -> None:
        if event.code == EVENT_JOB_ERROR:
            log.error("job %s failed: %r", event.job_id, event.exception)
            return
        # Missed or coalesced runs are counted, never silently lost.
        self.scheduler_missed[event.job_id] += 1

    async def _checkpoint(self) -> None:
        assert self.store is not None
        await self._locked(self.store.checkpoint)

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
