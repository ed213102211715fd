"""Writing files under the state root, confined to it: every file honestyd writes there goes through here.

Agents own the state root, so any name in it may have become a symbolic link (to a file outside the root, which
would receive what honestyd writes), a FIFO (an ``open`` that blocks until something reads it) or a device. A
path is opened one component at a time from a descriptor on the root (``openat``): each directory with
``O_DIRECTORY | O_NOFOLLOW`` (and created there when missing), the file itself with ``O_NOFOLLOW | O_NONBLOCK``
and checked to be a regular file before a byte is written (see :mod:`collectors.safeopen`). Whatever is refused
raises :class:`RefusedFile` naming the path and why; nothing is ever written outside the root and nothing blocks.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from collectors.safeopen import RefusedFile, kind, open_regular

__all__ = ["RefusedFile", "append", "read", "replace"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _parts(rel: str) -> list[str]:
    """The components of a path relative to the root; a path that could climb out or is empty is refused."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise RefusedFile(rel, "is not a plain relative path inside the state root")
    return parts


def _open_dir(root_fd: int, rel: str, parts: list[str], *, create: bool) -> int:
    """A descriptor on the directory ``parts`` under ``root_fd``, each component a real directory (no symlink)."""
    fd = os.dup(root_fd)
    walked: list[str] = []
    try:
        for name in parts:
            walked.append(name)
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile by someone else: opened below
                    os.mkdir(name, 0o755, dir_fd=fd)
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                found = kind(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
                raise RefusedFile("/".join(walked), f"is {found}, not a directory inside the state root; refusing "
                                  f"to write {rel} through it", exc.errno) from exc
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def _directory(root: Path, rel: str, *, create: bool) -> Iterator[tuple[int, str]]:
    """(descriptor on the parent directory of ``rel``, the file's name), the directories created if ``create``."""
    *dirs, name = _parts(rel)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the root itself is the operator's
    try:
        fd = _open_dir(root_fd, rel, dirs, create=create)
    finally:
        os.close(root_fd)
    try:
        yield fd, name
    finally:
        os.close(fd)


def _open_file(dir_fd: int, name: str, rel: str, flags: int, mode: int = 0o644) -> int:
    try:
        return open_regular(name, follow=False, dir_fd=dir_fd, flags=flags, mode=mode)
    except RefusedFile as exc:
        raise RefusedFile(rel, exc.strerror or "refused", exc.errno or errno.EINVAL) from None  # named by its path


def append(root: Path, rel: str, data: bytes) -> None:
    """Append ``data`` to the regular file ``rel`` under ``root`` in one ``O_APPEND`` write (created 0644)."""
    with _directory(root, rel, create=True) as (dir_fd, name):
        fd = _open_file(dir_fd, name, rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def read(root: Path, rel: str) -> bytes | None:
    """The content of the regular file ``rel`` under ``root``; None when it (or a directory on the way) is missing."""
    try:
        with _directory(root, rel, create=False) as (dir_fd, name):
            fd = _open_file(dir_fd, name, rel, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read()


def replace(root: Path, rel: str, data: bytes, mode: int = 0o644) -> None:
    """Replace ``rel`` under ``root`` with ``data`` atomically (a temporary dot file, fsync, rename, fsync of the
    directory): readers see the old file or the new one. Whatever is at ``rel`` must be a regular file (or nothing).
    """
    with _directory(root, rel, create=True) as (dir_fd, name):
        try:
            found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            pass
        else:
            if not stat.S_ISREG(found):  # a symlink's target, a FIFO's reader: nothing may look replaced by us
                raise RefusedFile(rel, f"is {kind(found)}, not a regular file; refusing to replace it")
        # A dot name: the ingester ignores dot files.
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fchmod(f.fileno(), mode)
                os.fsync(f.fileno())
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        os.fsync(dir_fd)  # the rename itself must survive a crash too
