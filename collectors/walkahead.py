"""A start's walk of the state root on a second core: another process walks it while the daemon imports its modules.

After a crash, a start from the model cache is one thread's work end to end (imports, the cache read, the catch-up
scan, the first evaluation), and the catch-up's walk (a ``stat`` of every file) is the one part of it that needs
nothing of the daemon. ``honestyd run`` calls :func:`start` once it has read its config, before it imports the
daemon: it runs ``python -m collectors.walkahead ROOT`` (a fresh interpreter that imports this module alone), which
walks the root and writes what it found to a pipe, drained by a thread as it comes. Once the daemon holds its port
and its store, :meth:`WalkAhead.prepare` has that thread decode it while the store is checked, and
:meth:`WalkAhead.take` gives the start-up scan the :class:`~collectors.statedir.Tree`, the errors the walk met and
when it began. If the child fails in any way, ``take`` returns None and the scan walks the root itself: the scan is
the same either way, only later. The child only reads: nothing is written before the daemon holds the store.

The scan dates these stats from before the child ran (its fingerprints' "seen" time: an earlier time only makes more
files too recent to trust, so they are read). A file changed between the walk and the watcher's start would be
seen by nothing but the next rescan, minutes later, for a Markdown file (a log is polled): a start that used the
walk rescans once its watcher runs (daemon/app/service.py).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import marshal
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from collectors.statedir import FileInfo, OnError, Tree, walk_tree

log = logging.getLogger("honestyd")

#: A database smaller than this (bytes) stands for a small state root: its walk costs less than a second interpreter.
WALK_AHEAD_FROM = 16 << 20
#: How long a scan waits for the child's answer before it walks the root itself.
TAKE_WAIT_S = 30.0
#: A file's fields in the child's answer, in FileInfo's order.
_ROW = tuple[str, str, int, int, int, int, str, int]


@dataclass(frozen=True)
class Walked:
    """What the child's walk found, and when it began (``time.monotonic()``, ``time.time_ns()``, both read before the
    child started)."""

    tree: Tree
    errors: list[tuple[str, OSError]]
    at: float
    at_ns: int

    def replay(self, on_error: OnError) -> None:
        """Hand every error the walk met to ``on_error``, as the scan's own walk would have."""
        for rel, exc in self.errors:
            on_error(rel, exc)


@dataclass
class WalkAhead:
    """The child walking one state root, its answer drained from the pipe by a thread of its own as it comes (a thread
    blocked in a read holds no GIL) and decoded once asked for (see :meth:`prepare`)."""

    root: Path
    process: subprocess.Popen[bytes]
    at: float
    at_ns: int
    _decode: threading.Event = field(default_factory=threading.Event)
    _walked: Future[Walked] = field(default_factory=Future)

    def __post_init__(self) -> None:
        threading.Thread(target=self._collect, name="honestyd-walk-ahead", daemon=True).start()

    def _collect(self) -> None:
        process = self.process
        assert process.stdout is not None
        try:
            with process.stdout:
                data = process.stdout.read()
            status = process.wait()
            if status != 0:
                raise OSError(f"exit status {status}")
            self._decode.wait()
            rows, links, errors = marshal.loads(data)
            files = [FileInfo(*row) for row in rows]
            failed = [(rel, OSError(code, text)) for rel, code, text in errors]
            self._walked.set_result(Walked(Tree(files, links), failed, self.at, self.at_ns))
        except BaseException as exc:  # taken by take(): the scan walks itself
            self._walked.set_exception(exc)

    def prepare(self) -> None:
        """Decode the answer as soon as it is in, on the collecting thread: a start asks once it has imported the
        daemon (decoding beside the imports would only slow them), while the store is checked."""
        self._decode.set()

    def take(self, root: Path, timeout: float = TAKE_WAIT_S) -> Walked | None:
        """The child's walk of ``root`` (None: another root, or the child failed or is late: walk it here)."""
        if root != self.root:
            self.close()
            return None
        self._decode.set()
        try:
            return self._walked.result(timeout)
        except Exception as exc:  # a late, failed or garbled child: nothing of it is used
            log.info("the state root is walked in the daemon: its walk on a second core failed (%s)", exc)
            self.close()
            return None

    def close(self) -> None:
        """Stop the child if it still runs (a start that ends early); the collecting thread then ends."""
        with contextlib.suppress(OSError):
            self.process.kill()
        self._decode.set()


def start(root: Path, db: Path, *, walk_from: int | None = None, cores: int | None = None,
          command: Sequence[str] = (sys.executable, "-m", "collectors.walkahead"),
          wall_ns: Callable[[], int] = time.time_ns) -> WalkAhead | None:
    """The child walking ``root``, started; None when the scan should walk it itself (one core, or a store under
    ``walk_from`` bytes at ``db``, by default :data:`WALK_AHEAD_FROM`: a small root). ``wall_ns`` is the scan's clock
    of file times."""
    try:
        size = os.stat(db).st_size
        cores = cores if cores is not None else len(os.sched_getaffinity(0))
    except OSError:
        return None
    if size < (WALK_AHEAD_FROM if walk_from is None else walk_from) or cores < 2:
        return None
    env = dict(os.environ)
    # The child imports this very package, wherever the daemon was started from.
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    at, at_ns = time.monotonic(), wall_ns()
    try:
        process = subprocess.Popen([*command, str(root)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, env=env, close_fds=True)
    except OSError as exc:
        log.info("the state root is walked in the daemon: %s", exc)
        return None
    return WalkAhead(root, process, at, at_ns)


def answer(root: Path) -> bytes:
    """The child's answer for ``root``: its files' fields, its symlinks and its errors, marshalled."""
    errors: list[tuple[str, int, str]] = []

    def failed(rel: str, exc: OSError) -> None:
        errors.append((rel, exc.errno if exc.errno is not None else errno.EIO, exc.strerror or str(exc)))

    tree = walk_tree(root, on_error=failed)
    rows: list[_ROW] = [(f.path, f.abspath, f.mtime_ns, f.size, f.dev, f.ino, f.canonical, f.ctime_ns)
                        for f in tree.files]
    return marshal.dumps((rows, tree.links, errors))


def main(argv: list[str]) -> int:
    """``python -m collectors.walkahead ROOT``: the answer on stdout."""
    if len(argv) != 1:
        print("usage: python -m collectors.walkahead ROOT", file=sys.stderr)
        return 2
    data = answer(Path(argv[0]))
    with contextlib.suppress(BrokenPipeError):  # the daemon stopped meanwhile: no one reads
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
