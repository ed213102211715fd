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
seen by nothing but the next rescan, minutes later, for a Markdown file (a log is polled): once its watcher runs,
the daemon asks the child (:meth:`WalkAhead.changed_since`), which walks the root again and answers with what
:func:`changed` finds, handed on as watcher events (daemon/app/watching.py): no store, no lock, no memory of the
daemon's. Only a start with a model cache to read walks ahead: it is the start whose longest path the walk is on.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import marshal
import os
import struct
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from collectors.statedir import Column, Files, OnError, Tree, walk_tree

log = logging.getLogger("honestyd")

#: A database smaller than this (bytes) stands for a small state root: its walk costs less than a second interpreter.
WALK_AHEAD_FROM = 16 << 20
#: How long a scan waits for the child's answer before it walks the root itself.
TAKE_WAIT_S = 30.0
#: Each answer's length, before it.
_LENGTH = struct.Struct("<Q")


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


#: What a WalkAhead holds of its walk once taken: nothing (see :meth:`WalkAhead.take`).
_TAKEN: Future[Walked | None] = Future()
_TAKEN.set_result(None)


@dataclass
class WalkAhead:
    """The child walking one state root. Its first answer (the walk) is drained from the pipe by a thread of its own as
    it comes (a thread blocked in a read holds no GIL) and decoded once asked for (see :meth:`prepare`); the child then
    waits to be asked for its second (:meth:`changed_since`), or to be closed."""

    root: Path
    process: subprocess.Popen[bytes]
    at: float
    at_ns: int
    _decode: threading.Event = field(default_factory=threading.Event)
    _walked: Future[Walked | None] = field(default_factory=Future)

    def __post_init__(self) -> None:
        threading.Thread(target=self._collect, name="honestyd-walk-ahead", daemon=True).start()

    def _collect(self) -> None:
        try:
            data = self._frame()
            self._decode.wait()
            tree, errors = decoded(data, self.root)
            del data
            failed = [(rel, OSError(code, text)) for rel, code, text in errors]
            self._walked.set_result(Walked(tree, failed, self.at, self.at_ns))
        except BaseException as exc:  # taken by take(): the scan walks itself
            with contextlib.suppress(OSError):
                self.process.stdout.close()  # type: ignore[union-attr]
            self._walked.set_exception(exc)

    def _frame(self) -> bytes:
        """The child's next answer (its length first, then its bytes); OSError if the pipe ends before it does."""
        out = self.process.stdout
        assert out is not None
        head = out.read(_LENGTH.size)
        if len(head) < _LENGTH.size:
            raise OSError(f"no answer (exit status {self.process.wait()})")
        (size,) = _LENGTH.unpack(head)
        data = out.read(size)
        if len(data) < size:
            raise OSError(f"the answer ended early (exit status {self.process.wait()})")
        return data

    def prepare(self) -> None:
        """Decode the walk as soon as it is in, on the collecting thread: a start asks once it has imported the
        daemon (decoding beside the imports would only slow them), while the store is checked."""
        self._decode.set()

    def take(self, root: Path, timeout: float = TAKE_WAIT_S) -> Walked | None:
        """The child's walk of ``root`` (None: another root, or the child failed or is late: walk it here)."""
        if root != self.root:
            self.close()
            return None
        self._decode.set()
        try:
            walked = self._walked.result(timeout)
        except Exception as exc:  # a late, failed or garbled child: nothing of it is used
            log.info("the state root is walked in the daemon: its walk on a second core failed (%s)", exc)
            self.close()
            return None
        # Not kept here: the daemon keeps this object until its watcher runs, a cold start's whole model build.
        self._walked = _TAKEN
        return walked

    def changed_since(self, timeout: float = TAKE_WAIT_S) -> list[str] | None:
        """Ask the child to walk the root again and say which paths changed since its first walk (:func:`changed`);
        None when it cannot tell (it failed, or a symlink changed): read everything again. Blocks: call it on a
        thread, after :meth:`take`. The child then exits."""
        process = self.process
        assert process.stdin is not None
        timer = threading.Timer(timeout, self.close)  # a child that hangs is killed: the read below then ends
        timer.start()
        try:
            if self._walked is not _TAKEN:
                raise OSError("its walk was not taken")
            process.stdin.write(b"\n")
            process.stdin.close()
            found: list[str] | None = marshal.loads(self._frame())
            return found
        except Exception as exc:
            log.info("the state root is read again: its second walk on a second core failed (%s)", exc)
            return None
        finally:
            timer.cancel()
            self.close()

    def close(self) -> None:
        """Stop the child if it still runs (a start that ends early, or once answered), reap it and close its pipes
        (its output once the collecting thread is done with it: that thread closes it if it ends otherwise)."""
        process = self.process
        with contextlib.suppress(OSError):
            process.kill()
        self._decode.set()
        with contextlib.suppress(Exception):
            process.wait(TAKE_WAIT_S)
        for pipe in (process.stdin, process.stdout if self._walked.done() else None):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def start(root: Path, db: Path, *, cache: Path | None, walk_from: int | None = None, cores: int | None = None,
          command: Sequence[str] = (sys.executable, "-m", "collectors.walkahead"),
          wall_ns: Callable[[], int] = time.time_ns) -> WalkAhead | None:
    """The child walking ``root``, started; None when the scan should walk it itself: no model cache at ``cache`` to
    start from (a start without one spends its time building the model, which the walk does not shorten, and its
    peak memory would hold the walk's files), one core, or a store under ``walk_from`` bytes at ``db`` (by default
    :data:`WALK_AHEAD_FROM`: a small root). ``wall_ns`` is the scan's clock of file times."""
    try:
        size = os.stat(db).st_size
        cached = cache is not None and os.path.isfile(cache)
        cores = cores if cores is not None else len(os.sched_getaffinity(0))
    except OSError:
        return None
    if not cached or size < (WALK_AHEAD_FROM if walk_from is None else walk_from) or cores < 2:
        return None
    env = dict(os.environ)
    # The child imports this very package, wherever the daemon was started from.
    here = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    at, at_ns = time.monotonic(), wall_ns()
    try:
        process = subprocess.Popen([*command, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, env=env, close_fds=True)
    except OSError as exc:
        log.info("the state root is walked in the daemon: %s", exc)
        return None
    return WalkAhead(root, process, at, at_ns)


def changed(before: Tree, after: Tree) -> list[str] | None:
    """The paths whose file differs between two walks of one root, in path order: added, gone, or stat'ed otherwise
    (size, mtime, change time, device, inode); None when a symlink was made, removed or re-pointed between them (then
    what a name leads to changed: read it all again)."""
    if before.links != after.links:
        return None
    out: list[str] = []
    old, new = before.files, after.files
    old_paths, new_paths = old.paths, new.paths
    i = j = 0
    while i < len(old) or j < len(new):  # both in path order (walk_tree)
        if j == len(new) or (i < len(old) and old_paths[i] < new_paths[j]):
            out.append(old_paths[i])  # gone
            i += 1
        elif i == len(old) or new_paths[j] < old_paths[i]:
            out.append(new_paths[j])  # added
            j += 1
        else:
            if old.stats(i) != new.stats(j):
                out.append(new_paths[j])
            i += 1
            j += 1
    return out


def answer(root: Path) -> tuple[bytes, Tree]:
    """The child's first answer for ``root`` (:func:`encoded`), and the walk it is made of."""
    errors: list[tuple[str, int, str]] = []

    def failed(rel: str, exc: OSError) -> None:
        errors.append((rel, exc.errno if exc.errno is not None else errno.EIO, exc.strerror or str(exc)))

    tree = walk_tree(root, on_error=failed)
    return encoded(tree, errors), tree


#: An error the walk met: (relative path, errno, message).
Error = tuple[str, int, str]


def encoded(tree: Tree, errors: list[Error]) -> bytes:
    """A walk as the child sends it: its files' paths, their stat fields column by column (an array's bytes, or a
    list), its symlinks and its errors, marshalled."""
    columns = [(column.typecode, column.tobytes()) if isinstance(column, array) else column
               for column in tree.files.columns]
    return marshal.dumps((tree.files.paths, columns, tree.links, errors))


def decoded(data: bytes, root: Path) -> tuple[Tree, list[Error]]:
    """The walk of ``root`` that :func:`encoded` made ``data`` of, its columns as they came (no object per file: the
    model's memory is beside it), and its errors."""
    paths, columns, links, errors = marshal.loads(data)
    return Tree(Files(str(root), paths, [_column(column) for column in columns]), links), errors


def _column(column: tuple[str, bytes] | list[int]) -> Column:
    if isinstance(column, list):
        return column
    typecode, data = column
    out = array(typecode)
    out.frombytes(data)
    return out


def _send(data: bytes) -> None:
    out = sys.stdout.buffer
    out.write(_LENGTH.pack(len(data)))
    out.write(data)
    out.flush()


def main(argv: list[str]) -> int:
    """``python -m collectors.walkahead ROOT``: the walk on stdout; then, if a line comes on stdin, what changed since
    (a second walk, compared with the first) on stdout; at the end of stdin, nothing more."""
    if len(argv) != 1:
        print("usage: python -m collectors.walkahead ROOT", file=sys.stderr)
        return 2
    root = Path(argv[0])
    data, first = answer(root)
    try:
        _send(data)
        del data
        if not sys.stdin.buffer.readline():
            return 0
        _send(marshal.dumps(changed(first, walk_tree(root))))
    except BrokenPipeError:  # the daemon stopped meanwhile: no one reads
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
