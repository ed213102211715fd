"""What a daemon must hold before it may write anything: its port, its store's lock, a sound store.

``honestyd run`` claims them in that order (see :meth:`daemon.app.Daemon.serve`), and only then writes a byte under
the state root. A claim that fails is a :class:`StartupError`: one line naming the thing and what to do, and an exit
status of its own, so that systemd's ``RestartPreventExitStatus=`` can tell "restarting cannot help" apart from a
crash (``systemd/honestyd.service`` lists :data:`NO_RESTART`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import socket
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("honestyd")

#: Exit statuses of ``honestyd`` (0: stopped cleanly; 1: an unexpected error, with its traceback).
EXIT_USAGE = 2  # a bad command line or config file (argparse's own status)
EXIT_STORE_DAMAGED = 3  # the database is malformed or not a database: `honestyd store rebuild`
EXIT_LISTEN = 4  # the listen address is taken by another program (or cannot be bound at all)
EXIT_STORE_LOCKED = 5  # another honestyd holds the database's lock
EXIT_STORE_UNUSABLE = 6  # the database (or its lock file) cannot be opened or created: a path or permission problem
#: The statuses after which a restart would fail the same way until someone acts (the unit's RestartPreventExitStatus=).
NO_RESTART = (EXIT_USAGE, EXIT_STORE_DAMAGED, EXIT_LISTEN, EXIT_STORE_LOCKED, EXIT_STORE_UNUSABLE)


class StartupError(Exception):
    """A claim that failed: ``str(exc)`` is the one line to print, ``status`` the exit status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def damaged_message(db: Path, problem: str, state_root: Path, config_path: Path | None) -> str:
    """The one line a damaged store gets: what is wrong and the command that repairs it."""
    config = f" --config {config_path}" if config_path is not None else ""
    return (f"store {db} is damaged ({problem}); restarting cannot help: run `honestyd store rebuild --db {db}"
            f" --state {state_root}{config}` (it moves the file aside, keeps what it can read, re-ingests the state"
            " root), then start honestyd again")


# --- the port


def bind_listeners(listen: str) -> list[socket.socket]:
    """Listening sockets for ``HOST:PORT`` (every address the host resolves to, as asyncio's create_server binds),
    bound and listening now, so that the port is held before anything else happens; aiohttp serves on them later.
    """
    host, _, port_text = listen.rpartition(":")
    host = host.strip("[]")
    port = int(port_text)
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(EXIT_LISTEN, f"cannot listen on {listen}: {exc.strerror}; set [daemon] listen (or"
                                        " --listen) to an address of this host") from None
    sockets: list[socket.socket] = []
    seen: set[tuple[int, object]] = set()
    try:
        for family, kind, proto, _, address in infos:
            if (family, address) in seen:
                continue
            seen.add((family, address))
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio does: TIME_WAIT is no holder
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            # Listening at once: a bound socket that does not listen yet can be bound again by another SO_REUSEADDR one.
            sock.listen(128)
            sock.setblocking(False)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise StartupError(EXIT_LISTEN, _listen_message(listen, port, exc)) from None
    return sockets


def _listen_message(listen: str, port: int, exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return (f"cannot listen on {listen}: the port is in use by another program; stop it"
                f" (`ss -ltnp 'sport = :{port}'` names it) or set [daemon] listen (or --listen) to a free port")
    return (f"cannot listen on {listen}: {exc.strerror}; set [daemon] listen (or --listen) to an address this host"
            " can bind")


# --- the store's lock


def lock_path_for(db: Path) -> Path:
    """The lock file of the database at ``db``: beside it."""
    return db.with_name(db.name + ".lock")


def cache_path_for(db: Path) -> Path:
    """The model cache of the database at ``db`` (daemon/modelcache.py): beside it."""
    return db.with_name(db.name + ".model")


@dataclass
class StoreLock:
    """An exclusive ``flock`` on ``<db>.lock``, which holds the holder's pid: one writer per store, for the life of
    the process (the kernel drops it when the process dies, so a lock file left by a kill is no obstacle).
    """

    path: Path
    fd: int

    @classmethod
    def acquire(cls, db: Path) -> StoreLock:
        """Take the lock of the store at ``db``, or raise StartupError naming the pid that holds it."""
        path = lock_path_for(db)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise StartupError(EXIT_STORE_UNUSABLE, f"cannot open the store's lock file {path}: {exc.strerror};"
                                                    " check that [store] path (or --db) is in a folder honestyd"
                                                    " may write") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _read_pid(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise StartupError(EXIT_STORE_UNUSABLE, f"cannot lock {path}: {exc.strerror}") from None
            who = f"pid {holder}" if holder is not None else "a process whose pid it has not written yet"
            raise StartupError(EXIT_STORE_LOCKED, f"store {db} is in use by another honestyd ({who}, holding {path});"
                                                  " stop that one first, or give this one another [store] path"
                                                  " (or --db)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def in_place(self) -> bool:
        """True iff the lock file at the path is still the one locked (not deleted or replaced)."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        held = os.fstat(self.fd)
        return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        """Let go of the lock (closing the file drops it). The file stays: unlinking it could race a new holder."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _read_pid(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode("ascii").strip())
    return None


@contextlib.contextmanager
def holding_store(db: Path) -> Iterator[StoreLock]:
    """The store's lock for the length of a ``with`` (the one-shot writers: ``ingest``, ``verify``, ``store
    rebuild``)."""
    lock = StoreLock.acquire(db)
    try:
        yield lock
    finally:
        lock.release()


# --- leftovers of a killed process


def remove_stale_temp(db: Path) -> Path | None:
    """Remove the model cache's temporary file a write that did not finish left beside the database (``<db>.model.tmp``:
    only that name, and only a regular file); returns its path if one was removed. A stop's write cut short and a
    periodic writer killed (with the daemon: SIGKILL, OOM; or ended by a stop that waited for it) both leave it. Call
    holding the store's lock, since a running daemon's writes use that very file.
    """
    from daemon import modelcache  # the model's modules load only when a start needs them

    tmp = modelcache.tmp_path_for(modelcache.path_for(db))
    try:
        st = os.stat(tmp, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    tmp.unlink(missing_ok=True)
    return tmp


def file_identity(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the file at ``path``, or None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino
