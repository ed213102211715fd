"""Walking a state directory: which files exist, in read order, confined to the root (spec section 1)."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from collectors.rfc3339 import from_us


def ns_to_datetime(ns: int) -> datetime:
    """Nanoseconds since the epoch → aware UTC datetime, truncated to microseconds (no float rounding)."""
    return from_us(ns // 1000)


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A regular file under the root, as ``os.stat`` (following confined symlinks) saw it."""

    path: str
    abspath: str
    mtime_ns: int
    size: int
    dev: int
    ino: int

    @property
    def mtime(self) -> datetime:
        """The modification time as an aware UTC datetime (microsecond precision)."""
        return ns_to_datetime(self.mtime_ns)


@lru_cache(maxsize=64)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob whose ``*`` and ``?`` never cross ``/`` (spec section 1)."""
    out = []
    for ch in pattern:
        out.append("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch))
    return re.compile("".join(out))


def glob_match(pattern: str, path: str) -> bool:
    """True iff the relative ``path`` matches ``pattern``."""
    return glob_regex(pattern).fullmatch(path) is not None


def inside(root_real: str, target: str) -> bool:
    """True iff the fully resolved ``target`` lies inside the resolved root."""
    real = os.path.realpath(target)
    return real == root_real or real.startswith(root_real.rstrip("/") + "/")


class Confinement:
    """Which directories resolve to inside the root, each resolved once: keep one for the length of a pass.

    An ingest pass stats a hundred logs in one directory; resolving each whole path walked every one of its
    components with ``lstat``, twice with the root, and was a tenth of the pass.
    """

    def __init__(self, root: Path | str) -> None:
        self.root_real = os.path.realpath(root)
        self._dirs: dict[str, bool] = {}

    def dir_inside(self, directory: str) -> bool:
        """True iff ``directory`` resolves to the root or inside it."""
        found = self._dirs.get(directory)
        if found is None:
            found = self._dirs[directory] = inside(self.root_real, directory)
        return found


def stat_file(root: Path, rel: str, confinement: Confinement | None = None) -> FileInfo | None:
    """Stat one relative path if it is a regular file confined to the root; else None.

    ``confinement`` carries the directories already resolved in this pass (default: resolve afresh).
    """
    if any(part.startswith(".") for part in rel.split("/")):  # ".." included: a path never climbs out
        return None
    confinement = confinement or Confinement(root)
    full = os.path.join(root, rel)
    if not confinement.dir_inside(os.path.dirname(full)):
        return None
    try:
        st = os.lstat(full)
        # A name that is itself a symlink is followed only while its target stays inside the root.
        if stat.S_ISLNK(st.st_mode):
            if not inside(confinement.root_real, full):
                return None
            st = os.stat(full)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return FileInfo(rel, full, st.st_mtime_ns, st.st_size, st.st_dev, st.st_ino)


def walk(root: Path, on_error: Callable[[str, OSError], None] | None = None) -> list[FileInfo]:
    """Every regular file under ``root`` in read order (lexicographic relative path).

    Names starting with ``.`` are skipped; symlinks are followed only while they stay inside
    the root, and a directory reached twice (a symlink loop) is walked once. A directory that
    cannot be listed, or an entry that cannot be stat'ed (say mode 000), is skipped and handed to
    ``on_error`` as (relative path, "." for the root; the error), unless it has just vanished.
    """
    root_real = os.path.realpath(root)
    found: list[FileInfo] = []
    seen_dirs: set[str] = set()

    def _report(rel: str, exc: OSError) -> None:
        # Gone meanwhile, or a symlink loop (a broken link, like a dangling one): nothing there to read.
        if on_error is not None and not isinstance(exc, FileNotFoundError | NotADirectoryError) \
                and exc.errno != errno.ELOOP:
            on_error(rel, exc)

    def visit(abs_dir: str, rel_dir: str) -> Iterator[FileInfo]:
        real_dir = os.path.realpath(abs_dir)
        if real_dir in seen_dirs or not inside(root_real, abs_dir):
            return
        seen_dirs.add(real_dir)
        try:
            entries = sorted(os.scandir(abs_dir), key=lambda e: e.name)
        except OSError as exc:
            _report(rel_dir or ".", exc)
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_dir(follow_symlinks=True):
                    yield from visit(entry.path, rel)
                    continue
                if not entry.is_file(follow_symlinks=True):
                    continue
                if entry.is_symlink() and not inside(root_real, entry.path):
                    continue
                st = entry.stat(follow_symlinks=True)
            except OSError as exc:
                _report(rel, exc)
                continue
            yield FileInfo(rel, entry.path, st.st_mtime_ns, st.st_size, st.st_dev, st.st_ino)

    found.extend(visit(str(root), ""))
    found.sort(key=lambda f: f.path)
    return found
