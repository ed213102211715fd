"""Opening state files for reading without ever blocking on, or reading, anything but a regular file.

The state root is written by agents: a name that was a regular file when the walk stat'ed it may be a FIFO
(an ``open`` that blocks until someone writes, stalling the pass and the daemon's stop) or a device by the
time it is opened. Each open here is refused before it happens when the name is not a regular file, and
is made with ``O_NONBLOCK`` and checked with ``fstat`` on the descriptor, so a swap in between is opened
for the instant of that check only, never read, and never waited on.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from typing import BinaryIO

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words ("a FIFO", "a regular file", ...)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


class RefusedFile(OSError):
    """A state file honestyd will not open: not a regular file, a symbolic link where none may be, or a path
    that would leave the root. ``filename`` is the path, ``strerror`` says why."""

    def __init__(self, path: str, why: str, code: int = errno.EINVAL) -> None:
        super().__init__(code, why, path)

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}"


def _refuse_unless_regular(mode: int, path: str) -> None:
    if not stat.S_ISREG(mode):
        raise RefusedFile(path, f"is {kind(mode)}, not a regular file; refusing to open it")


def clear_nonblock(fd: int) -> None:
    """Take ``O_NONBLOCK`` off an open descriptor (it was only there so that the open itself could not block)."""
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)


def checked_fd(fd: int, path: str) -> int:
    """``fd`` if it is open on a regular file (``O_NONBLOCK`` cleared); else it is closed and RefusedFile raised."""
    try:
        _refuse_unless_regular(os.fstat(fd).st_mode, path)
        clear_nonblock(fd)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str, *, follow: bool = True, dir_fd: int | None = None, flags: int = os.O_RDONLY,
                 mode: int = 0o644) -> int:
    """A descriptor on the regular file ``path`` (relative to ``dir_fd`` when given), opened with ``flags``.

    ``follow=False``: ``path`` itself must not be a symbolic link (``O_NOFOLLOW``). A name that is not a regular
    file raises :class:`RefusedFile` without being opened; FileNotFoundError and PermissionError pass through.
    """
    try:
        before = os.stat(path, dir_fd=dir_fd, follow_symlinks=follow)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    else:
        _refuse_unless_regular(before.st_mode, path)
    flags |= os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise RefusedFile(path, "is a symbolic link; refusing to follow it", errno.ELOOP) from exc
        if exc.errno == errno.ENXIO:  # O_WRONLY|O_NONBLOCK on a FIFO that nobody reads
            raise RefusedFile(path, "is a FIFO, not a regular file; refusing to open it", errno.ENXIO) from exc
        raise
    return checked_fd(fd, path)


def open_for_reading(path: str, *, follow: bool = True) -> BinaryIO:
    """:func:`open_regular` for reading, as a binary file object."""
    return os.fdopen(open_regular(path, follow=follow), "rb")


def read_regular(path: str, *, follow: bool = True) -> bytes:
    """The whole content of the regular file ``path`` (see :func:`open_regular`)."""
    with open_for_reading(path, follow=follow) as f:
        return f.read()
