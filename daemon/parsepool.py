"""Parsing JSON Lines batches, inline or in a worker process.

Parsing a heartbeat line (JSON, the timestamp, citation extraction, the row) costs about twice what
storing it does, and it is pure: lines in, rows and rejects out. So the ingester hands each batch of
raw lines to a :class:`Parser` and commits the previous batch while the next one is parsed. The
:class:`ProcessParser` does that in one worker process, which frees the daemon's own process (the
one holding the GIL for the event loop, the scoring model and ``/metrics``) of most of ingest's CPU;
small batches, which cost more to send than to parse, stay inline.

Nothing about exactly-once depends on where a batch is parsed: the ingester commits rows and the
cursor that produced them in one transaction, in file order, whichever parser made the rows. A
worker that dies is replaced and the batch parsed inline; the result is the same either way.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import NamedTuple, Protocol

from collectors.jsonl import parse_event, parse_label, strip_ending
from collectors.records import Event, Label, Reject
from daemon.store import CitationRow, EventRow, event_rows

log = logging.getLogger("honestyd.ingest")
#: Seconds between a worker's checks that the daemon is still its parent.
PARENT_CHECK = 1.0

#: A raw line as the tailer read it: its bytes without the newline (None when oversized) and its start.
RawData = tuple[bytes | None, bytes]


class Batch(NamedTuple):
    """Consecutive lines of one JSON Lines source, the first being line ``first`` of its generation."""

    lines: Sequence[RawData]
    path: str
    first: int
    generation: int
    source: str
    repo: str


class Parsed(NamedTuple):
    """What a batch holds: event rows for the store (see :func:`daemon.store.event_rows`), labels, rejects."""

    rows: list[EventRow]
    citations: list[CitationRow]
    labels: list[Label]
    rejects: list[Reject]


def parse_line(data: bytes | None, snippet: bytes, path: str, line: int, generation: int, source: str,
               repo: str) -> Event | Label | Reject:
    """One line of a heartbeat log or a labels file as a record, or the reason it is refused."""
    if data is None:
        return Reject(path, line, "oversized", snippet.decode("utf-8", "replace")[:200])
    data = strip_ending(data)
    if source == "labels":
        return parse_label(data, path, line, generation)
    return parse_event(data, path, line, repo, generation)


def parse_batch(batch: Batch) -> Parsed:
    """Parse every line of ``batch`` (pure; runs in the worker process or inline)."""
    events: list[Event] = []
    labels: list[Label] = []
    rejects: list[Reject] = []
    path, generation, source, repo = batch.path, batch.generation, batch.source, batch.repo
    for n, (data, snippet) in enumerate(batch.lines, batch.first):
        parsed = parse_line(data, snippet, path, n, generation, source, repo)
        if isinstance(parsed, Event):
            events.append(parsed)
        elif isinstance(parsed, Label):
            labels.append(parsed)
        else:
            rejects.append(parsed)
    rows, citations = event_rows(events)
    return Parsed(rows, citations, labels, rejects)


#: A batch being parsed: call it for the result (it waits for the worker if need be).
Pending = Callable[[], Parsed]


class Parser(Protocol):
    """Where the ingester's batches are parsed."""

    def submit(self, batch: Batch) -> Pending:
        """Start parsing ``batch``; the returned callable gives its result."""

    def close(self) -> None:
        """Release any worker."""


class InlineParser:
    """Parses each batch at once, in the caller's thread (the default: tests, small tools)."""

    def submit(self, batch: Batch) -> Pending:
        """Parse ``batch`` now."""
        parsed = parse_batch(batch)
        return lambda: parsed

    def close(self) -> None:
        """Nothing to release."""


class ProcessParser:
    """Parses batches of at least ``min_lines`` lines in ``workers`` processes (spawned on first use).

    ``spawn``, not ``fork``: the daemon has threads (the watcher, the event loop's executor), and a fork
    copies their locks in whatever state they were.
    """

    def __init__(self, workers: int = 1, min_lines: int = 256) -> None:
        self.workers = workers
        self.min_lines = min_lines
        self._pool: ProcessPoolExecutor | None = None
        #: Batches sent to a worker, and times a worker was found dead (its batch was then parsed inline).
        self.sent = 0
        self.lost = 0

    def submit(self, batch: Batch) -> Pending:
        """Send ``batch`` to a worker, or parse it inline when it is small or no worker can be had."""
        if len(batch.lines) < self.min_lines:
            return InlineParser().submit(batch)
        try:
            future = self._executor().submit(parse_batch, batch)
        except (BrokenProcessPool, RuntimeError, OSError) as exc:
            self._lost(exc)
            return InlineParser().submit(batch)
        self.sent += 1
        return lambda: self._result(future, batch)

    def _result(self, future: Future[Parsed], batch: Batch) -> Parsed:
        try:
            return future.result()
        except BrokenProcessPool as exc:
            self._lost(exc)
            return parse_batch(batch)

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_worker_init, initargs=(os.getpid(),))
        return self._pool

    def _lost(self, exc: BaseException) -> None:
        log.warning("ingest parser process lost (%s); its batch is parsed inline, a new one starts", exc)
        self.lost += 1
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Stop the worker processes (waits for the batches they hold)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _worker_init(parent: int) -> None:
    """A worker leaves SIGINT and SIGTERM to the daemon (systemd and a terminal signal the whole group): the
    daemon drains its pending batches through the worker, then stops it with :meth:`ProcessParser.close`. And it
    exits by itself when the daemon is gone (SIGKILL, OOM): its task queue never reports end-of-file, because
    the worker holds that pipe's write end too.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(parent,), name="parent-watch", daemon=True).start()


def _exit_with(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK)
    os._exit(0)


def make_parser(workers: int) -> Parser:
    """A :class:`ProcessParser` with ``workers`` processes, or an :class:`InlineParser` for 0."""
    return ProcessParser(workers) if workers > 0 else InlineParser()
