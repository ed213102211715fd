"""Walking a state directory: which files exist, in read order, confined to the root (spec section 1)."""

from __future__ import annotations

import errno
import itertools
import operator
import os
import re
import stat
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TypeAlias, overload

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


#: FileInfo's stat fields, in its order, and the array type each is held in by :class:`Files`.
STAT_FIELDS = ("mtime_ns", "size", "dev", "ino", "ctime_ns")
_TYPECODES = ("q", "q", "Q", "Q", "q")
#: A column of one stat field: an array, or a list once a value does not fit one (a time past the year 2262).
Column: TypeAlias = "array[int] | list[int]"


class Files(Sequence[FileInfo]):
    """Regular files a walk found, held as columns: a path string per file and an array per stat field, with a
    :class:`FileInfo` made only for the file asked for (``files[i]``). A walk of 55,000 files held as FileInfos was
    ~25 MB of small objects, freed at the scan's end among what the model had allocated meanwhile.

    ``paths`` are the names files are read under; ``canonicals`` their own paths (None: the same as ``paths``); a
    file's ``abspath`` is its canonical path under ``root`` (where the walk stat'ed it).
    """

    __slots__ = ("_prefix", "canonicals", "columns", "paths", "root")

    def __init__(self, root: str, paths: list[str], columns: Sequence[Column], canonicals: list[str] | None = None
                 ) -> None:
        self.root = root
        self.paths = paths
        self.canonicals = canonicals
        self.columns = tuple(columns)
        self._prefix = os.path.join(root, "")

    @classmethod
    def empty(cls, root: str) -> Files:
        """No files yet, under ``root`` (see :meth:`append`)."""
        return cls(root, [], [array(code) for code in _TYPECODES])

    def append(self, path: str, st: os.stat_result) -> None:
        """Add the file at canonical ``path`` as ``st`` saw it."""
        self.paths.append(path)
        for k, value in enumerate((st.st_mtime_ns, st.st_size, st.st_dev, st.st_ino, st.st_ctime_ns)):
            column = self.columns[k]
            try:
                column.append(value)
            except OverflowError:  # out of the array's range: the column becomes a list (rare: a far-future time)
                self.columns = (*self.columns[:k], [*column, value], *self.columns[k + 1:])

    def __len__(self) -> int:
        return len(self.paths)

    @overload
    def __getitem__(self, i: int) -> FileInfo: ...

    @overload
    def __getitem__(self, i: slice) -> list[FileInfo]: ...

    def __getitem__(self, i: int | slice) -> FileInfo | list[FileInfo]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        path = self.paths[i]
        canonical = path if self.canonicals is None else self.canonicals[i]
        mtime_ns, size, dev, ino, ctime_ns = (column[i] for column in self.columns)
        return FileInfo(path, self._prefix + canonical, mtime_ns, size, dev, ino, canonical, ctime_ns)

    def __iter__(self) -> Iterator[FileInfo]:
        return map(self.__getitem__, range(len(self)))

    def __eq__(self, other: object) -> bool:
        """The same files as ``other``, a sequence of FileInfo, in the same order (the columns are how, not what)."""
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(map(operator.eq, self, other))

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def canonical(self, i: int) -> str:
        """The canonical path of the file at ``i``."""
        return self.paths[i] if self.canonicals is None else self.canonicals[i]

    def stats(self, i: int) -> tuple[int, ...]:
        """The stat fields of the file at ``i``, in :data:`STAT_FIELDS` order."""
        return tuple(column[i] for column in self.columns)

    def taken(self, order: Iterable[int], paths: list[str] | None = None) -> Files:
        """The files at ``order``, in that order; read under ``paths`` (one per index) when given."""
        order = order if isinstance(order, list) else list(order)
        canonicals = [self.canonical(i) for i in order] if paths is not None else \
            None if self.canonicals is None else [self.canonicals[i] for i in order]
        names = paths if paths is not None else [self.paths[i] for i in order]
        columns = [_column(column, map(column.__getitem__, order)) for column in self.columns]
        return Files(self.root, names, columns, canonicals)

    def sorted(self) -> Files:
        """These files in path order (the read order); itself when they are already."""
        paths = self.paths
        if all(a < b for a, b in itertools.pairwise(paths)):
            return self
        return self.taken(sorted(range(len(paths)), key=paths.__getitem__))


def _column(like: Column, values: Iterable[int]) -> Column:
    return array(like.typecode, values) if isinstance(like, array) else list(values)


@dataclass(frozen=True, slots=True)
class Tree:
    """What a walk found: every regular file under its canonical path, and every symlink inside the root (its
    canonical location → :func:`link_target`), for :class:`collectors.links.LinkMap`."""

    files: Files
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
    found = Files.empty(str(root))
    links: dict[str, str | None] = {}

    def report(rel: str, exc: OSError) -> None:
        # Gone meanwhile, or a symlink loop (a broken link, like a dangling one): nothing there to read.
        if on_error is not None and not isinstance(exc, FileNotFoundError | NotADirectoryError) \
                and exc.errno != errno.ELOOP:
            on_error(rel, exc)

    def visit(abs_dir: str, rel_dir: str) -> None:
        # A folder's files go into the columns as they come (no entry per file held: the folders are big); what
        # is not a file is handled after, in name order, with its errors: as a walk in name order would.
        rest: list[tuple[str, str, str | OSError]] = []
        try:
            with os.scandir(abs_dir) as listing:
                for entry in listing:
                    if entry.name.startswith("."):
                        continue
                    rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                    try:
                        if entry.is_symlink():
                            rest.append((entry.name, rel, "link"))
                        elif entry.is_dir(follow_symlinks=False):
                            rest.append((entry.name, rel, "dir"))
                        elif entry.is_file(follow_symlinks=False):
                            found.append(rel, entry.stat(follow_symlinks=False))
                    except OSError as exc:
                        rest.append((entry.name, rel, exc))
        except OSError as exc:
            report(rel_dir or ".", exc)
            return
        rest.sort(key=lambda item: item[0])
        for name, rel, what in rest:
            if isinstance(what, OSError):
                report(rel, what)
            elif what == "link":
                links[rel] = link_target(root_real, os.path.join(abs_dir, name))
            else:
                visit(os.path.join(abs_dir, name), rel)

    visit(str(root), "")
    return Tree(found.sorted(), links)


def walk(root: Path, on_error: OnError | None = None) -> list[FileInfo]:
    """Every regular file under ``root`` once, under its canonical path, in read order (see :func:`walk_tree`)."""
    return list(walk_tree(root, on_error).files)
