"""The model cache written while the daemon runs on: a forked copy of the process writes it, scoring goes on.

Pickling the model takes seconds per million decisions (docs/performance.md), and the model may not change while it
is pickled. Held still for that long, scoring would stop; copied first, memory would double. Instead the model's
thread forks while it holds the model (between two of its jobs, so the model is whole): the child has the model as it
was at that instant, page by page copy-on-write, and writes it with :func:`daemon.modelcache.save_held` (write,
fsync, rename, fsync the folder); the parent lets go of the model as soon as :func:`os.fork` returns. What scoring
waits for is the fork (page tables copied, not pages), reported as :attr:`Writer.paused`.

The child runs only this module's code and the pickler's: no locks of other threads (they do not exist in it), no
logging, no store. It closes every descriptor it inherited but its report pipe and the standard streams (the port,
the store's lock and its files stay the parent's alone), dies with the thread that forked it (``PR_SET_PDEATHSIG``:
a SIGKILLed daemon leaves no writer behind to race the next start), and ends with :func:`os._exit` (nothing of the
parent's is flushed or finalised twice).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from daemon import forking, modelcache
from daemon.config import Config
from daemon.executors import run_in
from daemon.modelkeeper import LiveFeed, Marks, ModelKeeper
from daemon.store import Store

log = logging.getLogger("honestyd")


@dataclass(frozen=True)
class Writer:
    """A cache being written by a child process."""

    pid: int
    #: The store marks of the model written (what the store's change feed must keep after: see ModelKeeper.prunable).
    marks: Marks
    #: The read end of the child's one-line report.
    report: int
    started: float
    #: Seconds the model was held for the fork: the only pause scoring sees.
    paused: float
    #: The feed written and its config at the fork: a stop compares them with the feed's then (CacheWrites.holds).
    feed: LiveFeed
    config: Config


class CacheWrites:
    """The running daemon's cache writes: one at a time, each by a forked child (:func:`start`), and what the store's
    change feed must keep for the latest cache to stay usable (:meth:`prunable`)."""

    def __init__(self) -> None:
        self.writer: Writer | None = None
        #: The change-feed mark of the last cache written by this run (None: none yet).
        self.written: int | None = None
        #: The last write's (seconds the model was held, seconds it took, bytes): for the log and the bench.
        self.last: tuple[float, float, int] | None = None
        #: The last cache written: its writer and the file's (inode, size, mtime) right after (see :meth:`holds`).
        self._on_disk: tuple[Writer, tuple[int, int, int]] | None = None
        self._reaped = threading.Event()
        #: Set by :meth:`write` once a write's outcome is recorded (what :meth:`settle` waits for).
        self._recorded: asyncio.Event | None = None
        #: Set by :meth:`stop`: a write ended by it is no failure.
        self._stopped = False

    def prunable(self, applied: int) -> int:
        """How far the change feed may be pruned when the model has applied it up to ``applied``: not past the marks
        of the cache on disk or of the one being written (the next start catches up from them)."""
        kept = [applied, *([] if self.written is None else [self.written]),
                *([] if self.writer is None else [self.writer.marks[3]])]
        return min(kept)

    async def write(self, keeper: ModelKeeper, config: Config, reader: Store) -> bool:
        """Write the model cache of ``keeper``'s evaluated model now, unless one is being written or the last one
        written still :meth:`holds` it; True if written (a failure is logged, never raised: the next write, or the
        stop's, tries again)."""
        feed = keeper.feed
        path = modelcache.path_for(config.db_path)
        if feed is None or feed.at is None or self.writer is not None or self.holds(feed, path):
            return False  # no model yet, a write under way, or the cache on disk is this model already
        try:
            writer = await run_in(keeper.executor, _start_for, feed, path, reader)
        except OSError as exc:  # no memory or no process left to fork
            log.warning("model cache %s not written: %s", path, exc)
            return False
        self.writer = writer
        self._reaped.clear()
        recorded = self._recorded = asyncio.Event()
        try:
            return await self._reap(writer, path)
        finally:
            recorded.set()

    async def _reap(self, writer: Writer, path: Path) -> bool:
        """Wait for ``writer``'s child to end and record what it wrote (:meth:`write`'s second half)."""
        result: list[tuple[int | None, str]] = []

        def reap() -> None:
            try:
                result.append(wait(writer))
            finally:
                self.writer = None
                self._reaped.set()

        threading.Thread(target=reap, name="honestyd-cache-reaper", daemon=True).start()
        await asyncio.to_thread(self._reaped.wait)
        size, why = result[0] if result else (None, "not reaped")
        if size is None:
            if self._stopped:
                log.info("model cache write by the forked writer ended: the stop writes the cache itself")
            else:
                log.warning("model cache %s not written: %s", path, why)
            return False
        self.written = writer.marks[3]
        with contextlib.suppress(OSError):
            self._on_disk = (writer, _identity(path))
        took = time.monotonic() - writer.started
        self.last = (writer.paused, took, size)
        log.info("model cache %s written: %.1f MB in %.1f s by a forked writer (the model held %.1f ms)", path,
                 size / 1e6, took, writer.paused * 1e3)
        return True

    def holds(self, feed: LiveFeed, path: Path) -> bool:
        """True if ``path`` is still the cache this run last wrote, of ``feed`` with its marks and config as they are
        now: the model has applied nothing since, so writing it again at a stop would give the next start no more."""
        return self.behind(feed, path) == 0

    def behind(self, feed: LiveFeed, path: Path) -> int | None:
        """How many store rows (events, labels, checks, changes) ``feed`` applied since the cache this run last
        wrote, if ``path`` is still that cache, of this very feed under its config now: a start from it catches
        them up from the store. None when it is not (none written, another file, another model or config)."""
        if self._on_disk is None:
            return None
        writer, identity = self._on_disk
        try:
            same_file = _identity(path) == identity
        except OSError:
            return None
        if not (same_file and writer.feed is feed and writer.config == feed.config):
            return None
        return sum(now - then for now, then in zip(feed.marks, writer.marks, strict=True))

    async def settle(self, bound: float) -> bool:
        """At a stop: let a write under way finish, for at most ``bound`` seconds, then :meth:`stop` it if it has not
        (the stop then writes the cache itself, as when no write was under way). True if a write was under way and
        wrote its cache: :meth:`behind` then counts from that one."""
        writer, recorded = self.writer, self._recorded
        if writer is None or recorded is None:
            return False
        if bound > 0:
            log.info("stopping: waiting at most %.0f s for the model cache writer in flight (pid %d)", bound,
                     writer.pid)
            try:
                await asyncio.wait_for(recorded.wait(), bound)
            except TimeoutError:
                log.warning("the model cache writer in flight did not finish within %.0f s: ended", bound)
        await self.stop()
        with contextlib.suppress(TimeoutError):  # the write's outcome is recorded on the loop right after the reap
            await asyncio.wait_for(recorded.wait(), 10)
        return self._on_disk is not None and self._on_disk[0] is writer

    async def stop(self) -> None:
        """End a write under way and wait until its child is reaped (a clean stop then writes the cache itself)."""
        self._stopped = True
        writer = self.writer
        if writer is None:
            return
        stop(writer)
        await asyncio.to_thread(self._reaped.wait, 10)


def _start_for(feed: LiveFeed, path: Path, reader: Store) -> Writer:
    """:func:`start` with the store's id read on the model's thread (``reader`` is the model's connection)."""
    modelcache.code_hash()  # computed here, once: the child should read no files but write its own
    return start(feed, path, reader.store_id())


def start(feed: LiveFeed, path: Path, store_id: str) -> Writer:
    """Fork a child that writes ``feed`` to ``path``; call on the model's thread, between its jobs (it takes the
    feed's lock for the fork only). Returns at once in the parent; never in the child."""
    read_end, write_end = os.pipe()
    started = time.monotonic()
    with feed.holding() as marks:
        forked = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            _child(feed, marks, path, store_id, write_end, os.getppid())
        paused = time.perf_counter() - forked
        config = feed.config
    os.close(write_end)
    return Writer(pid, marks, read_end, started, paused, feed, config)


def _identity(path: Path) -> tuple[int, int, int]:
    """What tells one written file from another at ``path``: (inode, size, mtime)."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def wait(writer: Writer) -> tuple[int | None, str]:
    """Block until the child ends: (bytes written, "") or (None, why not). Call on a thread of its own."""
    chunks = []
    try:
        while chunk := os.read(writer.report, 4096):
            chunks.append(chunk)
    finally:
        os.close(writer.report)
    _, status = os.waitpid(writer.pid, 0)
    report = b"".join(chunks).decode("utf-8", "replace").strip()
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and report.startswith("ok "):
        return int(report[3:]), ""
    if os.WIFSIGNALED(status):
        return None, f"the writer was killed by signal {os.WTERMSIG(status)}"
    return None, report or f"the writer exited with status {os.waitstatus_to_exitcode(status)}"


def stop(writer: Writer) -> None:
    """End a child still writing (a clean stop writes the cache itself, to the same temporary file); reap it with
    :func:`wait`."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(writer.pid, signal.SIGKILL)


def _child(feed: LiveFeed, marks: Marks, path: Path, store_id: str, report: int, parent: int) -> None:
    """The forked writer: never returns."""
    status = 1
    try:
        gc.disable()  # a collection would touch (so copy) every page of the model; the child ends soon anyway
        forking.become_child(parent, keep={0, 1, 2, report})
        size = modelcache.save_held(feed, marks, path, store_id)
        os.write(report, f"ok {size}".encode())
        status = 0
    except BaseException as exc:  # reported to the parent, which logs it; the child must reach _exit whatever it was
        with contextlib.suppress(OSError):
            os.write(report, f"{type(exc).__name__}: {exc}".encode()[:2000])
    finally:
        os._exit(status)
