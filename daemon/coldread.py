"""A cold load's reading on a second core: another process reads heartbeat rows and reduces their texts meanwhile.

A model's load without a cache reads every stored event and reduces each decision's text to its phrases, on one core.
:func:`start` runs ``python -m daemon.coldread``: a fresh interpreter (a forked one would carry the parent's SQLite
state, which SQLite forbids using in a child) that opens the store read-only and reads the heartbeat rows from the top
down, a chunk of rowids at a time, making each chunk into :class:`~scorers.live.columns.Columns` with the model's own
vocabulary and writing it to a pipe. The load reads the rest of what it needs (Markdown decisions, labels, checks,
the file index) meanwhile, then reads heartbeat rows from the bottom up itself (:func:`share`), keeping the child's
chunks as they arrive, until the two meet: whichever core is faster reads more, on any store and any host.

Only heartbeat rows are read there: they are never changed or removed (a rotated log's rows stay under their
generation), so the child's read transaction, later than the load's, sees the rows the load's would. The load tells the
child how far up it has read (8 bytes on the child's stdin each time it takes a chunk); the child stops at the first
chunk the load has taken, and rows both read are kept once (:func:`~scorers.live.columns.since`). If the child fails
in any way, the load reads everything its chunks did not bring: the records are the same either way, only later.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import daemon
from daemon import coldsplit, forking
from scorers.live.columns import Columns, columns_of, since
from scorers.live.records import Vocabulary

log = logging.getLogger("honestyd")

#: A store whose largest rowid is below this is read in the load itself: a second interpreter would cost more.
READ_FROM = 50_000
#: Rowids a chunk spans (on either side): the unit the two processes take turns by.
CHUNK = 20_000
#: How long the load waits for a child that sent everything to exit (it has nothing left to do).
EXIT_WAIT_S = 10.0
#: Every message's length (and every frontier the load sends) as 8 bytes.
_NUMBER = struct.Struct("<Q")
#: Bytes the load reads from the pipe at once.
_READ = 1 << 20
#: The last bytes of the child's stderr kept for the log.
_ERRORS_KEPT = 4096


@dataclass(frozen=True)
class Request:
    """What the child reads: the heartbeat rows of ``db`` up to rowid ``upto`` (dated after ``newer_than`` when
    given), made into columns with ``vocabulary`` and ``decision_kinds``, ``chunk`` rowids at a time."""

    db: Path
    upto: int
    newer_than: datetime | None
    vocabulary: Vocabulary | None
    decision_kinds: frozenset[str]
    parent: int
    chunk: int = CHUNK


def _frame(obj: object) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _NUMBER.pack(len(data)) + data


class Reader:
    """The child at work, seen from the load: the chunks that arrived, and the lowest rowid above which it sent every
    heartbeat row (:attr:`ceiling`)."""

    def __init__(self, process: subprocess.Popen[bytes], upto: int, chunk: int = CHUNK) -> None:
        self.process = process
        #: Rowids the load reads at a time (as the child does).
        self.chunk = chunk
        #: Every heartbeat row above this came from the child (its chunks arrive from the top down, each whole).
        self.ceiling = upto
        #: How many rows it sent.
        self.rows = 0
        #: True once it sent its end mark or failed: nothing more will come.
        self.ended = False
        self.failed = False
        self._buffer = bytearray()
        self._errors = b""
        self._errors_open = True

    def claim(self, frontier: int) -> None:
        """Tell the child the load reads every row up to ``frontier`` itself."""
        if self.ended or self.process.stdin is None:
            return  # it reads nothing more
        with contextlib.suppress(OSError):  # the child is gone: the reader sees the end of its pipe
            os.write(self.process.stdin.fileno(), _NUMBER.pack(frontier))

    def arrived(self, *, wait: bool) -> list[Columns]:
        """The next chunks that came (those whole in one read of the pipe: the load keeps each before it takes more,
        or a child far ahead would have all of its chunks held here at once); ``wait``: until at least one came or
        the child ended, else none when nothing is there now. What the child writes on its stderr is read meanwhile
        (the end of it kept for the log): a full pipe there would stop it."""
        out, err = self.process.stdout, self.process.stderr
        assert out is not None and err is not None
        got: list[Columns] = []
        while not self.ended:
            readable = select.select([out, err] if self._errors_open else [out], [], [], None if wait else 0)[0]
            if err in readable:
                more = b""
                with contextlib.suppress(OSError):
                    more = os.read(err.fileno(), _READ)
                self._errors_open = bool(more)  # at its end, no longer watched: it would be readable forever
                self._errors = (self._errors + more)[-_ERRORS_KEPT:]
            if out not in readable:
                if wait:
                    continue
                break
            try:
                data = os.read(out.fileno(), _READ)
            except OSError as exc:
                log.debug("the cold load's reader stopped: %r", exc)
                data = b""
            if not data:
                self._end(complete=False)
                break
            self._buffer += data
            try:
                got.extend(self._messages())
            except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as exc:
                log.debug("the cold load's reader got what it cannot read: %r", exc)
                self._end(complete=False)
            if got:
                break
        return got

    def _messages(self) -> list[Columns]:
        got: list[Columns] = []
        buffer, size = self._buffer, _NUMBER.size
        start = 0
        while len(buffer) - start >= size:
            (n,) = _NUMBER.unpack_from(buffer, start)
            if len(buffer) - start - size < n:
                break
            message = pickle.loads(buffer[start + size:start + size + n])
            start += size + n
            if message is None:
                self._end(complete=True)
                break
            lo, columns = message
            self.ceiling = lo
            self.rows += len(columns.ids)
            got.append(columns)
        del buffer[:start]
        return got

    def close(self) -> None:
        """Stop the child if it is still at work (the load ended without reading everything it sends)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()

    def _end(self, *, complete: bool) -> None:
        self.ended = True
        process = self.process
        if process.stdin is not None:
            process.stdin.close()  # the child's frontier reads see the end: it stops where it is
        if not complete:
            self.failed = True
            process.kill()
        try:
            code = process.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        if not complete:
            lines = self._errors.decode(errors="replace").strip().splitlines()
            why = f": {lines[-1][:300]}" if lines else ""
            log.warning("the cold load's second core failed (exit status %d%s): the rows at or below rowid %d were"
                        " read here", code, why, self.ceiling)


def start(request: Request, *, read_from: int = READ_FROM, cores: Callable[[], int] = coldsplit.cores,
          command: tuple[str, ...] = (sys.executable, "-m", "daemon.coldread")) -> Reader | None:
    """The child reading ``request``'s rows, started; None when the load should read them itself (a small store, one
    core, or no process to be had)."""
    if request.upto < read_from or cores() < 2:
        return None
    env = dict(os.environ)
    # The child imports this very package, wherever the daemon was started from.
    root = str(Path(daemon.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=env, close_fds=True, bufsize=0)
    except OSError as exc:
        log.warning("the cold load reads on one core: %s", exc)
        return None
    assert process.stdin is not None
    with contextlib.suppress(OSError):  # a child gone already: its reader ends at once, and the load reads it all
        forking.write_all(process.stdin.fileno(), _frame(request))
    return Reader(process, request.upto, request.chunk)


def share(reader: Reader | None, upto: int, read_here: Callable[[int, int], None],
          keep: Callable[[Columns], None]) -> None:
    """Every heartbeat row up to rowid ``upto``, once: ``read_here(after, until)`` reads (and keeps) those with
    ``after < rowid ≤ until`` in this process, ``keep`` keeps a chunk of the ``reader``'s (None: all read here).

    This process reads up from the bottom a chunk at a time (the child's size), telling the child before each, and
    keeps the child's chunks as they arrive from the top, until the two meet; rows both read are kept once."""
    if reader is None:
        read_here(0, upto)
        return
    frontier = 0
    while True:
        while arrived := reader.arrived(wait=False):
            for columns in arrived:
                keep(since(columns, frontier))
        if frontier >= reader.ceiling:
            break
        until = min(frontier + reader.chunk, reader.ceiling)
        reader.claim(until)
        read_here(frontier, until)
        frontier = until
    while not reader.ended:  # chunks it began before it saw the last claim
        for columns in reader.arrived(wait=True):
            keep(since(columns, frontier))


# --- the child


def read_request(fd: int) -> Request:
    """The request the load wrote first on ``fd``."""
    (n,) = _NUMBER.unpack(_read_exactly(fd, _NUMBER.size))
    request: Request = pickle.loads(_read_exactly(fd, n))
    return request


def _read_exactly(fd: int, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        more = os.read(fd, n - len(data))
        if not more:
            raise EOFError("the load closed the pipe before its request was whole")
        data += more
    return bytes(data)


class _Frontier:
    """How far up the load has read, from the numbers it writes on ``fd`` (read without waiting)."""

    def __init__(self, fd: int, upto: int) -> None:
        self.fd, self.upto, self.value = fd, upto, 0
        self._partial = b""
        os.set_blocking(fd, False)

    def now(self) -> int:
        """The latest frontier the load sent (``upto`` once it closed the pipe: it needs nothing more)."""
        while True:
            try:
                data = os.read(self.fd, 4096)
            except BlockingIOError:
                return self.value
            if not data:
                self.value = self.upto
                return self.value
            data = self._partial + data
            whole = len(data) - len(data) % _NUMBER.size
            self._partial = data[whole:]
            if whole:
                self.value = max(self.value, *(v for (v,) in _NUMBER.iter_unpack(data[:whole])))


def serve(request: Request, frontier_fd: int, write: Callable[[bytes], object]) -> None:
    """Read ``request``'s rows from the top down, a chunk at a time, until the load's frontier (read from
    ``frontier_fd``), writing each chunk's columns with ``write``, then the end mark.

    Written by a thread of their own: the load reads its other records first, and this goes on reading meanwhile
    instead of waiting for a full pipe."""
    from daemon.store import Store  # here: the load imports this module without needing the store's imports

    ready: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    writer = threading.Thread(target=_write, args=(ready, write), name="coldread-writer", daemon=True)
    writer.start()
    frontier = _Frontier(frontier_fd, request.upto)
    try:
        with Store.open(request.db, readonly=True) as store, store.reading():
            hi = request.upto
            while hi > (low := frontier.now()):
                lo = max(hi - request.chunk, low)
                rows = store.heartbeat_rows_up_to(hi, after=lo, newer_than=request.newer_than)
                ready.put(_frame((lo, columns_of(rows, request.vocabulary, request.decision_kinds))))
                hi = lo
        ready.put(_frame(None))
    finally:
        ready.put(None)  # the writer ends (after the end mark, when everything was read)
        writer.join()


def _write(ready: queue.SimpleQueue[bytes | None], write: Callable[[bytes], object]) -> None:
    """Write what ``ready`` holds until None."""
    while (data := ready.get()) is not None:
        write(data)


def main() -> None:
    """The child: read the request from stdin, serve it on stdout."""
    import gc

    gc.disable()  # short-lived, and what it allocates is sent away: a collection would only walk it
    request = read_request(0)
    forking.become_child(request.parent, keep={0, 1, 2})
    serve(request, 0, lambda data: forking.write_all(1, data))


if __name__ == "__main__":
    main()
