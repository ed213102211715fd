"""What the running daemon writes down about its evaluations: today's history rows in the store (at most once a
minute), and the changelog's entries (a methodology change at start and on reload, agents dropping, the digest)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from daemon import changelog
from daemon.app.storekeeping import StoreKeeping
from daemon.config import COMPONENTS, Config
from daemon.executors import run_in
from daemon.snapshot import Snapshot
from daemon.store import Store
from scorers.history import DayCounts

log = logging.getLogger("honestyd")

#: Seconds between two writes of today's history rows (each evaluation would rewrite agents × windows rows).
HISTORY_EVERY = 60.0


class Chronicle(StoreKeeping):
    """The history rows and the changelog."""

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
            await run_in(self.executors.model, self._write_changelog, [changelog.digest_entry(self._snapshot)])

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
    with store.transaction():
        store.put_history(counts)


def _prune_changes(store: Store, applied: int) -> None:
    with store.transaction():
        store.prune_changes(applied)
