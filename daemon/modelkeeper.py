"""The daemon's scoring model (:mod:`scorers.live`) and its keeper: loaded, kept in step with the store, evaluated.

:class:`LiveFeed` is the model and the store marks it reflects. It is loaded once (on start, from the model cache when
there is a usable one, and again after a reload changes the config), then fed what each ingest pass committed:
events and labels by growing rowid, checks by growing seq, and, from the store's change feed (migrations 005 and
009), the Markdown decisions removed, the file-index entries and the symlinks changed. Everything is read in one
read transaction with the marks that say where the feed is up to, so a record is applied exactly once however the
reads interleave with the writer. :class:`ModelKeeper` is what the running daemon holds: the one feed, built,
adopted or rebuilt, synced and evaluated on the model's worker thread, and written to the model cache at a stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Executor, Future
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collectors.records import EvalReport, Event, Label
from collectors.rfc3339 import from_us, to_us
from daemon import coldread, coldsplit, gcpolicy, limits
from daemon.config import Config
from daemon.executors import run_in
from daemon.limits import Exported, HeldBackLog
from daemon.store import Store
from scorers.live import HistoryEvicted, LiveModel
from scorers.live.columns import Columns
from scorers.live.records import id_hash
from scorers.live.sums import Split
from scorers.progress import LabelTally
from scorers.score import AgentResult, WindowResult, window_width

if TYPE_CHECKING:  # modelcache imports LiveFeed from this module
    from daemon.modelcache import CacheRead

log = logging.getLogger("honestyd")

Marks = tuple[int, int, int, int]


class LiveFeed:
    """One :class:`LiveModel` and the store marks it reflects; thread-safe (one lock around the model)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.model = LiveModel(config, evict=True)
        self.marks: Marks = (0, 0, 0, 0)
        self.at: datetime | None = None
        #: Records applied by the last :meth:`sync` (events, labels, checks, documents and files touched).
        self.applied = 0
        #: (records held, ids let go) after the last evaluation: LiveModel.size, for /metrics.
        self.size = (0, 0)
        #: Visible labels on ids no record carries, after the last evaluation (honesty_labels_unmatched).
        self.unmatched = 0
        #: Per agent, the current labels on its decisions after the last evaluation (honesty_labels).
        self.labels: dict[str, LabelTally] = {}
        #: The largest rowid of a heartbeat event applied (those rows are never removed: see sync).
        self._heartbeat_top = 0
        self._lock = threading.Lock()

    @property
    def heartbeat_top(self) -> int:
        """The largest rowid of a heartbeat event applied."""
        return self._heartbeat_top

    def __getstate__(self) -> dict[str, Any]:
        """The feed as the model cache pickles it (daemon/modelcache.py): everything but the lock."""
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("labels", {})  # a cache written before the tally was kept: counted at the evaluation
        self._lock = threading.Lock()

    @contextmanager
    def holding(self) -> Iterator[Marks]:
        """The feed held still (no sync or evaluation meanwhile), with the marks it reflects: for pickling it."""
        with self._lock:
            yield self.marks

    def adopt(self, config: Config) -> bool:
        """Take ``config`` if the model's kept outcomes stay right under it (:meth:`LiveModel.reconfigure`); False:
        the rules would decide differently, and only a new model built from the store is right."""
        with self._lock:
            if not self.model.reconfigure(config):
                return False
            self.config = config
            return True

    def load(self, store: Store, at: datetime | None = None, *, freeze_every: int = gcpolicy.FREEZE_READ,
             read_elsewhere: Callable[[coldread.Request], coldread.Reader | None] | None = coldread.start) -> None:
        """Read the store (use a connection of its own: this may take a while on a big store). ``at``: the time the
        model will first be evaluated at, or later; the records the model would let go then (see
        :meth:`LiveModel.let_go`) stay in the store, only their ids are read. The records are frozen out of the
        collector as they are read, ``freeze_every`` at a time (each is kept: its collections would only walk them
        again and again). ``read_elsewhere`` may read the heartbeat rows in another process meanwhile (see
        daemon/coldread.py; None: all are read here)."""
        with self._lock, store.reading():
            marks = store.feed_marks()
            horizon = None
            if at is not None:
                horizon = self.model.horizon_at(at)
                old = store.ids_only_before(horizon, marks[0])
                self.model.let_go(horizon, old)
            # With a lookup, should an id read share its 64-bit hash with one let go. An id goes with all its
            # records: an old record whose id is also on a newer one is read (events_up_to's newer_than).
            lookup = functools.partial(_stored_under, store)
            file = store.file
            vocabulary, decision_kinds = self.model.read_plan()
            # The heartbeat rows may be read by another process too (daemon/coldread.py): the rest is read first.
            reader = None if file is None or read_elsewhere is None else read_elsewhere(
                coldread.Request(file, marks[0], horizon, vocabulary, decision_kinds, os.getpid()))
            if reader is None:
                rows = store.event_rows_up_to(marks[0], newer_than=horizon)
            else:
                rows = store.other_rows_up_to(marks[0], newer_than=horizon)

            def read_here(after: int, until: int) -> None:
                self.model.add_rows(store.heartbeat_rows_up_to(until, after=after, newer_than=horizon), lookup)
                gc.freeze()  # kept: a collection would only walk them again

            def keep(columns: Columns) -> None:
                self.model.add_columns((columns,), lookup)
                gc.freeze()

            with contextlib.closing(reader) if reader is not None else contextlib.nullcontext():
                self.model.add_rows(gcpolicy.frozen_as_read(rows, freeze_every), lookup)
                self._heartbeat_top = store.heartbeat_top(marks[0])
                labels = (label for rowid, label in store.labels_since(0) if rowid <= marks[1])
                self.model.add_labels(gcpolicy.frozen_as_read(labels, freeze_every))
                self.model.add_checks(c for c in store.checks_since(0) if c.seq <= marks[2])
                self.model.put_links(store.links())
                self.model.put_files(store.file_entries_read())
                if reader is not None:
                    coldread.share(reader, marks[0], read_here, keep)
                    log.info("a cold load: %d of its rows read on a second core", reader.rows)
            self.model.loaded()
            self.marks = marks

    @contextmanager
    def _asking(self, store: Store) -> Iterator[None]:
        """The model asks ``store`` about the ids it let go and moved there (see :meth:`ids_let_go`), for this call."""
        self.model.let_go_elsewhere = functools.partial(_was_let_go, store)
        try:
            yield
        finally:
            self.model.let_go_elsewhere = None

    def ids_let_go(self) -> tuple[list[int], int]:
        """The hashes of the ids let go that only the model holds, and its horizon (microseconds): for the store's
        let-go table (:meth:`Store.add_let_go`), after which :meth:`ids_stored` lets the model forget them."""
        with self._lock:
            return self.model.ids_let_go(), to_us(self.model.evicted_to)

    def ids_stored(self, hashes: list[int], count: int) -> None:
        """These hashes of :meth:`ids_let_go` are in the store's let-go table, ``count`` ids in all: RAM lets go."""
        with self._lock:
            self.model.ids_kept_elsewhere(hashes, count)

    def sync(self, store: Store) -> int:
        """Apply what the store committed since the last load or sync; returns how many records that was."""
        with self._lock, store.reading(), self._asking(store):
            events, labels, checks, changes = self.marks
            new = store.feed_marks()
            feed = [c for c in store.changes_since(changes) if c[0] <= new[3]]
            documents = {path for _, what, path, _ in feed if what == "events"}
            files = {path for _, what, path, _ in feed if what == "files"}
            modified: dict[str, list[int]] = {}
            for _, what, path, at_us in feed:
                if what == "modified" and at_us is not None:
                    modified.setdefault(path, []).append(at_us)
            # New rows. SQLite gives a new row max(rowid) + 1: once Markdown rows at the top are removed, rowids
            # below the old maximum are handed out again, down to the largest surviving row. Heartbeat rows are never
            # removed, so after a removal every row above the largest heartbeat rowid seen is read again.
            start = self._heartbeat_top if documents else events
            rows = list(store.events_between(start, new[0]))
            heartbeats = [e for _, e in rows if e.line is not None]
            self._heartbeat_top = max([self._heartbeat_top, *(rowid for rowid, e in rows if e.line is not None)])
            documents |= {e.path for _, e in rows if e.line is None}
            lookup = functools.partial(_stored_under, store)
            self.model.add_events(heartbeats, lookup)
            for path in sorted(documents):
                decisions = store.decisions_of(path)
                self.model.replace_document(path, decisions, lookup)
            new_labels = [label for rowid, label in store.labels_since(labels) if rowid <= new[1]]
            self.model.add_labels(new_labels)
            new_checks = [c for c in store.checks_since(checks) if c.seq <= new[2]]
            self.model.add_checks(new_checks)
            relinked = any(what == "links" for _, what, _, _ in feed)
            if relinked:  # rare (a symlink made, re-pointed or removed): the map is small, read whole
                self.model.put_links(store.links())
            for path in sorted(files | set(modified)):
                times = (from_us(us) for us in modified.get(path, ()))
                known = self.model.file_state(path)
                if path not in files and known is not None:
                    # A modification alone (an appended log, every pass): the store feeds a 'files' row whenever
                    # created or deleted changes, so the model's are current; no need to read the row back.
                    self.model.add_file_times(path, times, known[1])
                    continue
                row = store.index_rows_get(path)
                if row is None or row.canonical is not None:  # a name through a symlink is no entry of the index
                    self.model.put_file(path, None)
                elif known is None or known[0] != row.created:
                    self.model.put_file(path, store.file_entry(path))  # new to the model, or re-created: read whole
                else:  # a log appended to all day has a modification per ingest pass: only those are read
                    self.model.add_file_times(path, times, row.deleted)
            self.marks = new
            self.applied = len(heartbeats) + len(documents) + len(new_labels) + len(new_checks) + len(files) + len(
                modified) + relinked
            return self.applied

    def evaluate(self, at: datetime, store: Store | None = None, *,
                 split: Split | None = coldsplit.forked) -> dict[str, WindowResult]:
        """Every configured window at ``at`` (``store``: where the ids the model moved out are asked about; without
        one, :meth:`ids_stored` must not have been called). ``split``: where an evaluation that rebuilds the model
        (the first one) may work out part of the rules' outcomes (daemon/coldsplit.py: a forked copy, on a second
        core)."""
        with self._lock, contextlib.ExitStack() as stack:
            if store is not None:  # each question a read of its own: a read transaction held would hold up COMMITs
                stack.enter_context(self._asking(store))
            if self.at is None:  # the first one indexes every record: no collections, and the indexes frozen after
                stack.enter_context(gcpolicy.paused(freeze=True))
            windows = self.model.evaluate(at, split=split)
            self.at = at
            self.size = self.model.size()
            self.unmatched = self.model.unmatched_labels
            self.labels = self.model.label_tally()
            return windows

    def latest_decisions(self, agents: Collection[str]) -> dict[str, datetime]:
        """Each agent's latest decision time as of the last evaluation (what [limits] max_agents ranks by)."""
        with self._lock:
            return self.model.latest_decisions(agents)

    def knows(self, record_id: str, store: Store) -> bool | None:
        """Whether honestyd has stored a record with this id (None: not evaluated yet, it cannot tell). The model
        answers for what it holds or let go; the store for rows it has not applied yet, all of them above the last
        heartbeat row applied (a new row's rowid is above every surviving one): a range of the primary key."""
        with self._lock:
            if self.at is None:
                return None
            with store.reading(), self._asking(store):
                return self.model.holds_id(record_id) or store.has_id_above(record_id, self._heartbeat_top)

    def shows_label(self, decision: str, reviewer: str, ts: datetime) -> bool:
        """Whether the last evaluation saw this reviewer's label of time ``ts`` on the decision (so its audit rows
        and scores count it)."""
        with self._lock:
            if self.at is None or self.at < ts:
                return False
            return any(lb.reviewer == reviewer and lb.ts == ts for lb in self.model.visible_labels(decision))

    def unlabelled_failures(self, window: str) -> dict[str, int]:
        """Per agent, the decisions of the window that fail a component and carry no label (the index's count)."""
        with self._lock:
            if self.at is None:
                return {}
            return self.model.unlabelled_failures(window_width(self.config, window))

    def agent_result(self, agent: str, window: str) -> tuple[datetime, AgentResult] | None:
        """One agent's result with its audit rows, and the time it is for (the last evaluation's)."""
        with self._lock:
            if self.at is None:
                return None
            found = self.model.agent_result(agent, window)
            return None if found is None else (self.at, found)


def _was_let_go(store: Store, record_id: str, horizon: datetime) -> bool:
    """Whether the store's let-go table holds ``record_id``'s hash, let go up to ``horizon`` or before."""
    return store.was_let_go(id_hash(record_id), to_us(horizon))


def _stored_under(store: Store, ids: Collection[str]) -> tuple[list[Event], list[Label]]:
    """Every stored event with one of ``ids`` and every label on one of them (the model recalls records it let go:
    :meth:`LiveModel.add_events`); asked inside the sync's read transaction, so it sees what the sync reads."""
    return store.events_with_ids(ids), store.labels_on(ids)


def sync_feed(feed: LiveFeed, reader: Store) -> tuple[EvalReport, ...]:
    """Apply what the store committed to the model, and read the benchmark reports, on the evaluations' reader."""
    feed.sync(reader)
    return tuple(reader.evals())


def load_feed(config: Config, cache: Path | None = None, at: datetime | None = None,
              read: Future[CacheRead | None] | None = None) -> LiveFeed:
    """A model of the store, read on a connection of its own (ingest goes on meanwhile): from the model cache at
    ``cache`` when there is a usable one (the sync that follows applies what was committed since), else built (the
    records it would let go at its first evaluation, ``at`` or later, are left in the store: see LiveFeed.load).
    ``read``: the cache's read already under way (:meth:`ModelKeeper.prefetch`), taken instead of ``cache``.
    """
    from daemon import modelcache  # imported here: modelcache imports LiveFeed from this module

    with Store.open(config.db_path, readonly=True) as reader:
        if read is not None:
            feed = modelcache.accept(read.result(), reader)
        else:
            feed = None if cache is None else modelcache.load(cache, config, reader)
        if feed is None:
            feed = LiveFeed(config)
            feed.load(reader, at)
    # The model's objects live as long as it does (its columns are few objects, its shared tables' tuples are not):
    # frozen, no collection walks them again; new objects are collected as usual.
    gc.collect()
    gc.freeze()
    return feed


def export(feed: LiveFeed, windows: Mapping[str, WindowResult], config: Config, held_back: HeldBackLog) -> Exported:
    """The agents this evaluation exports as series ([limits]); those newly held back are logged once."""
    listed = {a for w in windows.values() for a in w.agents}
    exported = limits.select(listed, config.limits, feed.latest_decisions)
    held_back.note(exported, listed)
    return exported


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of the model: the feed evaluated, when, every window, what it exports, the benchmark reports."""

    feed: LiveFeed
    at: datetime
    windows: dict[str, WindowResult]
    exported: Exported
    evals: tuple[EvalReport, ...]


class ModelKeeper:
    """The running daemon's one scoring model; all its work runs on ``executor`` (the model's worker thread).

    :attr:`feed` is None before the first load and while a rebuild is under way: audits and ``knows_decision`` then
    answer without the model.
    """

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.feed: LiveFeed | None = None
        #: A load started by :meth:`preload`, taken by the first :meth:`evaluate`.
        self._loading: asyncio.Future[LiveFeed] | None = None
        #: The model cache's read started by :meth:`prefetch` (and the config it reads under), taken by preload.
        self._read: tuple[Config, Future[CacheRead | None]] | None = None

    def prefetch(self, config: Config) -> None:
        """Start reading the model cache now, on a thread of its own: a start calls it once it holds the store's lock,
        so the read (which needs nothing of the store) runs while the store's pages are checked and it is opened, and
        :meth:`preload` asks the store about what was read. Nothing is written meanwhile: a damaged store still stops
        the start first (the file is then left for the next start to judge)."""
        from daemon import modelcache  # imported here: modelcache imports LiveFeed from this module

        if self.feed is not None or self._loading is not None or self._read is not None or \
                not config.daemon.model_cache:
            return
        path = modelcache.path_for(config.db_path)
        done: Future[CacheRead | None] = Future()

        def read() -> None:
            try:
                done.set_result(modelcache.read(path, config))
            except BaseException as exc:  # taken by the load (see evaluate: a failed load is tried again)
                done.set_exception(exc)

        # A daemon thread: a start refused meanwhile (a damaged store) exits without waiting for the read to end.
        threading.Thread(target=read, name="honestyd-cache-read", daemon=True).start()
        self._read = (config, done)

    def preload(self, config: Config, clock: Callable[[], datetime]) -> None:
        """Start loading the model now, on the model's thread (from the model cache when there is a usable one): a
        start calls it before catching up with the state root on the ingest thread, so the two overlap; the first
        :meth:`evaluate` takes the model and syncs what the catch-up committed meanwhile."""
        from daemon import modelcache  # imported here: modelcache imports LiveFeed from this module

        if self.feed is None and self._loading is None:
            cache = modelcache.path_for(config.db_path) if config.daemon.model_cache else None
            prefetched, self._read = self._read, None
            read = prefetched[1] if prefetched is not None and prefetched[0] is config else None
            self._loading = asyncio.ensure_future(run_in(self.executor, load_feed, config, cache, clock(), read))

    def drop(self) -> None:
        """Let go of the model and of a load under way (the store it reads is gone)."""
        self.feed = None
        self._read = None
        if self._loading is not None:
            self._loading.cancel()  # what runs on the thread finishes; its result is not taken
            self._loading = None

    async def evaluate(self, config: Config, reader: Store, clock: Callable[[], datetime],
                       held_back: HeldBackLog) -> Evaluation | None:
        """Bring the model up to date with the store (``reader``: the evaluations' own connection) and evaluate every
        window at ``clock()``; None when the clock stepped back past what the model keeps (it is dropped: the next
        call rebuilds it).

        The model is loaded once (and again after a reload changes the config), so a long first load never holds
        up ingest; afterwards each call applies only what was committed since, and only the decisions that can have
        changed are re-evaluated (scorers/live/).
        """
        from daemon import modelcache  # imported here: modelcache imports LiveFeed from this module

        if self.feed is None and self._loading is not None:
            loading, self._loading = self._loading, None
            try:
                self.feed = await loading
            except Exception as exc:  # whatever failed there, the load below tries again
                log.warning("the scoring model's load at start failed (%s); loading again", exc)
        feed = self.feed
        # The cache is for the first load only: it is read once, and a rebuild is for another configuration.
        cache = modelcache.path_for(config.db_path) if feed is None and config.daemon.model_cache else None
        if feed is not None and feed.config is not config:
            if await run_in(self.executor, feed.adopt, config):
                log.info("reload: scoring model kept (what changed is read only when windows are summed)")
            else:
                # Let go of the old model before building the new one: memory holds one model, not two. Until it is
                # built the snapshot's numbers are served, and audits show them without rows.
                log.info("reload: the rules read what changed (or a window grew past what the model let go);"
                         " rebuilding the scoring model from the store")
                self.feed = feed = None
        if feed is None:
            feed = await run_in(self.executor, load_feed, config, cache, clock())
        evals = await run_in(self.executor, sync_feed, feed, reader)
        self.feed = feed
        at = clock()
        try:
            windows = await run_in(self.executor, feed.evaluate, at, reader)
        except HistoryEvicted as exc:
            log.warning("the clock stepped back past what the scoring model keeps (%s); rebuilding it", exc)
            self.feed = None
            return None
        exported = await run_in(self.executor, export, feed, windows, config, held_back)
        return Evaluation(feed, at, windows, exported, evals)

    async def knows(self, decision: str, db: Path) -> bool | None:
        """Whether a record with this id is stored (None: the model is still loading, so it cannot tell yet)."""
        feed = self.feed
        if feed is None:
            return None

        def ask() -> bool | None:
            # A connection of its own: the evaluations' reader is in use outside the feed's lock too (evals()).
            with Store.open(db, readonly=True) as reader:
                return feed.knows(decision, reader)

        return await asyncio.to_thread(ask)

    async def save(self, config: Config, store: Store, status: Callable[[str], None]) -> None:
        """Write the model cache of an evaluated model (daemon/modelcache.py); a failure is logged, never raised."""
        from daemon import modelcache  # imported here: modelcache imports LiveFeed from this module

        feed = self.feed
        if feed is None or feed.at is None:
            return
        path = modelcache.path_for(config.db_path)
        status(f"writing the model cache {path}")
        started = time.monotonic()
        try:
            size = await run_in(self.executor, modelcache.save, feed, path, store.store_id())
        except Exception as exc:  # whatever it was (a full disk, no memory left), the stop goes on; the next start
            log.warning("model cache %s not written: %s", path, exc)  # builds the model from the store
            return
        log.info("model cache %s written: %.1f MB in %.1f s", path, size / 1e6, time.monotonic() - started)

