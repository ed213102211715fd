"""Walking a state directory: which files exist, in read order, confined to the root (spec section 1)."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
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
    """A regular file under the root, as ``os.stat`` (following confined symlinks) saw it.

    ``path`` is the name it is read under; ``canonical`` the file's own path (relative to the resolved root, no
    symlink among its components), under which the file index holds it (spec 1, v2.3). They differ only for a name
    that goes through a symlink. ``ctime_ns``: the inode's change time, which every write (and every ``utime``) sets
    to now, so an edit that puts size and mtime back still shows (daemon/ingest/fingerprint.py).
    """

    path: str
    abspath: str
    mtime_ns: int
    size: int
    dev: int
    ino: int
    canonical: str
    ctime_ns: int

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
        self._dirs: dict[str, str | None] = {}

    def canonical_dir(self, directory: str) -> str | None:
        """The canonical path of ``directory`` relative to the root ("" for the root), None when it resolves outside
        the root or into an ignored (``.``) directory."""
        try:
            return self._dirs[directory]
        except KeyError:
            found = self._dirs[directory] = canonical(self.root_real, directory)
            return found


def canonical(root_real: str, target: str) -> str | None:
    """The fully resolved ``target`` relative to the resolved root ("" for the root itself), or None when it lies
    outside the root or under a name starting with ``.`` (ignored, so never indexed: spec 1)."""
    real = os.path.realpath(target)
    if real == root_real:
        return ""
    if not real.startswith(root_real.rstrip("/") + "/"):
        return None
    rel = real[len(root_real.rstrip("/")) + 1:].replace(os.sep, "/")
    return None if any(part.startswith(".") for part in rel.split("/")) else rel


def link_target(root_real: str, link: str) -> str | None:
    """Where the symlink ``link`` leads, as :func:`canonical` says, if anything is there (a dangling link and a loop
    lead nowhere: None)."""
    found = canonical(root_real, link)
    return found if found is not None and os.path.exists(os.path.join(root_real, found)) else None


def stat_file(root: Path, rel: str, confinement: Confinement | None = None) -> FileInfo | None:
    """Stat one relative path if it is a regular file confined to the root; else None.

    ``confinement`` carries the directories already resolved in this pass (default: resolve afresh).
    """
    if any(part.startswith(".") for part in rel.split("/")):  # ".." included: a path never climbs out
        return None
    confinement = confinement or Confinement(root)
    full = os.path.join(root, rel)
    directory = confinement.canonical_dir(os.path.dirname(full))
    if directory is None:
        return None
    name = rel.rpartition("/")[2]
    own = f"{directory}/{name}" if directory else name
    try:
        st = os.lstat(full)
        # A name that is itself a symlink is followed only while its target stays inside the root.
        if stat.S_ISLNK(st.st_mode):
            found = canonical(confinement.root_real, full)
            if found is None:
                return None
            own = found
            st = os.stat(full)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return FileInfo(rel, full, st.st_mtime_ns, st.st_size, st.st_dev, st.st_ino, own, st.st_ctime_ns)


@dataclass(frozen=True, slots=True)
class Tree:
    """What a walk found: every regular file under its canonical path, and every symlink inside the root (its
    canonical location → :func:`link_target`), for :class:`collectors.links.LinkMap`."""

    files: list[FileInfo]
    links: dict[str, str | None]


OnError = Callable[[str, OSError], None]


def walk_tree(root: Path, on_error: OnError | None = None) -> Tree:
    """Every regular file under ``root`` once, under its canonical path, in read order (lexicographic), and the
    symlinks met on the way.

    Names starting with ``.`` are skipped. Symlinks are recorded, never walked through: every directory is walked
    under its own name, so a symlink loop or a second name of a directory costs nothing, and a directory reached
    through a link holds the same files (the same index entries) under every name. A directory that cannot be
    listed, or an entry that cannot be stat'ed (say mode 000), is skipped and handed to ``on_error`` as (relative
    path, "." for the root; the error), unless it has just vanished.
    """
    root_real = os.path.realpath(root)
    found: list[FileInfo] = []
    links: dict[str, str | None] = {}

    def report(rel: str, exc: OSError) -> None:
        # Gone meanwhile, or a symlink loop (a broken link, like a dangling one): nothing there to read.
        if on_error is not None and not isinstance(exc, FileNotFoundError | NotADirectoryError) \
                and exc.errno != errno.ELOOP:
            on_error(rel, exc)

    def visit(abs_dir: str, rel_dir: str) -> None:
        try:
            entries = sorted(os.scandir(abs_dir), key=lambda e: e.name)
        except OSError as exc:
            report(rel_dir or ".", exc)
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_symlink():
                    links[rel] = link_target(root_real, entry.path)
                elif entry.is_dir(follow_symlinks=False):
                    visit(entry.path, rel)
                elif entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    found.append(FileInfo(rel, entry.path, st.st_mtime_ns, st.st_size, st.st_dev, st.st_ino, rel,
                                          st.st_ctime_ns))
            except OSError as exc:
                report(rel, exc)
                continue

    visit(str(root), "")
    found.sort(key=lambda f: f.path)
    return Tree(found, links)


def walk(root: Path, on_error: OnError | None = None) -> list[FileInfo]:
    """Every regular file under ``root`` once, under its canonical path, in read order (see :func:`walk_tree`)."""
    return walk_tree(root, on_error).files
