"""A cold load's reading on a second core: another process reads the heartbeat rows and reduces their texts.

A model's load without a cache reads every stored event and reduces each decision's text to its phrases, on one core,
while the rest of the load (labels, checks, the file index) waits behind it. :func:`start` runs
``python -m daemon.coldread``: a fresh interpreter (a forked one would carry the parent's SQLite state, which SQLite
forbids using in a child) that opens the store read-only, reads the heartbeat rows the load asked for, makes them into
:class:`~scorers.live.columns.Columns` with the model's own vocabulary, and writes them to a pipe as it goes. The
parent meanwhile reads the rest itself, then builds its records from the columns as they arrive.

Only heartbeat rows are read there: they are never changed or removed (a rotated log's rows stay under their
generation), so the child's read transaction, later than the parent's, sees exactly the rows the parent's would. If the
child fails in any way, the parent reads the rows it did not send itself (:attr:`Reader.resume_after`): the records are
the same either way, only later.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

import daemon
from daemon import coldsplit, forking
from scorers.live.columns import Columns, columns_of
from scorers.live.records import Vocabulary

log = logging.getLogger("honestyd")

#: A store whose largest rowid is below this is read in the load itself: a second interpreter would cost more.
READ_FROM = 50_000
#: Rows per chunk the child sends: the parent builds records from one while the child reads the next.
CHUNK = 20_000
#: The share of the heartbeat rows (by rowid) the load reads itself, the first ones: besides them it reads the labels,
#: checks and file index, then builds records from the child's columns.
OWN_SHARE = 0.36
#: How long the parent waits for a child that sent everything to exit (it has nothing left to do).
EXIT_WAIT_S = 10.0


@dataclass(frozen=True)
class Request:
    """What the child reads: the heartbeat rows of ``db`` with ``after`` < rowid ≤ ``upto`` (dated after
    ``newer_than`` when given), made into columns with ``vocabulary`` and ``decision_kinds``."""

    db: Path
    upto: int
    newer_than: datetime | None
    vocabulary: Vocabulary | None
    decision_kinds: frozenset[str]
    parent: int
    after: int = 0
    #: Rows a chunk holds.
    chunk: int = CHUNK


class Reader:
    """The child at work: :meth:`chunks` gives its columns as they come; then :attr:`resume_after` says where the
    parent must go on reading itself (None: the child sent every row)."""

    def __init__(self, process: subprocess.Popen[bytes], after: int = 0) -> None:
        self.process = process
        #: The rowid after which no row was sent, until the child says it sent everything.
        self.resume_after: int | None = after
        #: How many rows it sent.
        self.rows = 0

    def chunks(self) -> Iterator[Columns]:
        """The child's columns in the order it read them; stops early (and kills it) if it fails."""
        out = self.process.stdout
        assert out is not None
        last, complete = self.resume_after, False
        try:
            while True:
                chunk = pickle.load(out)
                if chunk is None:
                    complete = True
                    break
                last = chunk.last
                self.rows += len(chunk.ids)
                yield chunk
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, TypeError) as exc:
            log.debug("the cold load's reader stopped: %r", exc)
        finally:
            self.resume_after = None if complete else last
            self._end(complete)

    def close(self) -> None:
        """Stop the child if it is still at work (the load ended without reading everything it sends)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()

    def _end(self, complete: bool) -> None:
        process = self.process
        if not complete:
            process.kill()
        try:
            code = process.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        why = _last_line(process.stderr)
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        if not complete:
            log.warning("the cold load's second core failed (exit status %d%s): its rows from rowid %d on were read"
                        " here", code, f": {why}" if why else "", (self.resume_after or 0) + 1)


def _last_line(pipe: IO[bytes] | None) -> str:
    """The last line the child wrote to its stderr (its error), if any."""
    if pipe is None:
        return ""
    with contextlib.suppress(OSError):
        lines = pipe.read().decode(errors="replace").strip().splitlines()
        return lines[-1][:300] if lines else ""
    return ""


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
                                   env=env, close_fds=True)
    except OSError as exc:
        log.warning("the cold load reads on one core: %s", exc)
        return None
    assert process.stdin is not None
    try:
        with process.stdin:
            pickle.dump(request, process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError:  # the child is gone already: its chunks() ends at once, and the load reads every row
        pass
    return Reader(process, request.after)


def serve(request: Request, out: IO[bytes]) -> None:
    """Read ``request``'s rows and write their columns to ``out``, a chunk at a time, then None.

    Written by a thread of their own: the parent reads its own share of the rows first, and this goes on reading
    meanwhile instead of waiting for a full pipe."""
    from daemon.store import Store  # here: the parent imports this module without needing the store's imports

    ready: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    writer = threading.Thread(target=_write, args=(ready, out), name="coldread-writer", daemon=True)
    writer.start()
    try:
        with Store.open(request.db, readonly=True) as store, store.reading():
            rows = store.heartbeat_rows_up_to(request.upto, after=request.after, newer_than=request.newer_than)
            while batch := list(itertools.islice(rows, request.chunk)):
                columns = columns_of(batch, request.vocabulary, request.decision_kinds)
                ready.put(pickle.dumps(columns, protocol=pickle.HIGHEST_PROTOCOL))
        ready.put(pickle.dumps(None))
    finally:
        ready.put(None)  # the writer ends (after the end mark, when everything was read)
        writer.join()


def _write(ready: queue.SimpleQueue[bytes | None], out: IO[bytes]) -> None:
    """Write what ``ready`` holds to ``out`` until None."""
    while (data := ready.get()) is not None:
        out.write(data)
    out.flush()


def main() -> None:
    """The child: read the request from stdin, serve it on stdout."""
    import gc

    gc.disable()  # short-lived, and what it allocates is sent away: a collection would only walk it
    request: Request = pickle.load(sys.stdin.buffer)
    forking.become_child(request.parent, keep={0, 1, 2})
    serve(request, sys.stdout.buffer)


if __name__ == "__main__":
    main()
