"""The changelog file: entries appended atomically under the state root, each key written once.

File format (one ``## YYYY-MM-DD`` heading per day; each entry's first line is its key)::

    # Honesty score changelog

    <one line explaining the file>

    ## 2026-06-01

    <!-- honestyd:digest:2026-06-01 -->
    **Daily digest** · ...

Every write goes through :mod:`daemon.safefile` (no symlink, FIFO or device is followed or written through), and
the file is append-only: its old bytes are always a prefix of the new ones.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import threading
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from daemon import safefile
from daemon.changelog.entries import Entry

TITLE = "# Honesty score changelog"
INTRO = (
    "Append-only record written by honestyd (spec section 5): every methodology change, every score drop "
    "and a daily digest of every agent's scores, under one heading per UTC day. The `<!-- honestyd:… -->` "
    "comments are keys that keep an entry from being written twice; do not edit them."
)

# A key is one run of these characters: no white space (the key line is found by a regex), no
# `<`/`>` (it sits inside an HTML comment) and, checked separately, no `--` (which could end one).
_KEY_CHARS = re.compile(r"[A-Za-z0-9:._~%+=-]+")
# Lines are matched with an optional `\r` so a file saved with CRLF by a human editor still reads.
_KEY_LINE = re.compile(r"^<!-- honestyd:(\S+) -->\r?$", re.MULTILINE)
_HEADING = re.compile(r"^## (\d{4}-\d{2}-\d{2})[ \t]*\r?$", re.MULTILINE)
# Any ATX heading (CommonMark allows up to three spaces of indentation): an entry must not hold one.
_ANY_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)", re.MULTILINE)


def _check(entry: Entry) -> None:
    """Refuse an entry whose key could not be found again, or whose text could forge structure."""
    if not _KEY_CHARS.fullmatch(entry.key) or "--" in entry.key:
        raise ValueError(f"changelog entry key {entry.key!r} has characters a key comment cannot hold")
    lines = entry.markdown.split("\n")
    if lines[0] != f"<!-- honestyd:{entry.key} -->":
        raise ValueError(f"changelog entry {entry.key!r} must start with its key comment")
    if "\r" in entry.markdown or len(_KEY_LINE.findall(entry.markdown)) != 1 or _ANY_HEADING.search(entry.markdown):
        raise ValueError(f"changelog entry {entry.key!r} holds a line break, a second key or a heading")


def _confined(path: Path, root: Path | None) -> tuple[Path, str]:
    """(root, ``path`` relative to it) for :mod:`daemon.safefile`; with no root, the file's own directory is one."""
    if root is None:
        return path.parent, path.name
    return root, path.relative_to(root).as_posix()


def _read(path: Path, root: Path | None = None) -> bytes:
    """The file's bytes (b"" when missing), never through a symlink nor from a FIFO or device: the state root is
    written by agents (see :mod:`daemon.safefile`; ``root``: the directories below it must be real ones too)."""
    return safefile.read(*_confined(path, root)) or b""


def _write_atomic(path: Path, data: bytes, mode: int, root: Path | None = None) -> None:
    """Replace ``path`` with ``data``: readers see the old file or the new one, never a torn one."""
    if root is None:
        path.parent.mkdir(parents=True, exist_ok=True)  # no root to confine to: the caller's own directory
    safefile.replace(*_confined(path, root), data, mode)


class Appender:
    """:func:`append_entries` for one path, remembering the keys the file holds between calls.

    The daemon offers the day's score-drop entries after every evaluation, nearly always all of them written
    already; finding them present read and searched the whole file each time, a cost that grows with the history
    (docs/performance.md). The keys are read again whenever the file's inode, size or modification time differ
    from what this appender last read or wrote (a hand edit, a restore, a deletion); the file itself is read only
    when something is to be written.
    Thread-safe: the daemon appends from worker threads (drops after an evaluation, the digest job), and two
    read-then-replace writes at once would lose one's entries.
    """

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        self.root = root  # the state root the file is confined to (None: its own directory)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._present: set[str] = set()

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def append(self, entries: Sequence[Entry]) -> list[Entry]:
        """Append the entries not in the file yet, as :func:`append_entries` does; return those written."""
        for entry in entries:
            _check(entry)
        with self._lock:
            signature = self._signature()
            if signature is None or signature != self._seen:
                # Taken before the read: a change in between makes the next call read again.
                self._present = set(_KEY_LINE.findall(changelog_text(self.path, self.root)))
                self._seen = signature
            new = [e for e in entries if e.key not in self._present]
            if not new:
                return []
            written = append_entries(self.path, new, self.root)  # which checks the file itself again
            self._present.update(e.key for e in written)
            self._seen = self._signature()
            return written


def changelog_text(path: Path, root: Path | None = None) -> str:
    """The changelog's text ("" when missing), read as :func:`_read` reads it (for the start-up fingerprint)."""
    return _read(path, root).decode("utf-8", errors="replace")


def append_entries(path: Path, entries: Sequence[Entry], root: Path | None = None) -> list[Entry]:
    """Append the entries whose key is not in the file yet; return those written, in file order.

    A missing (or empty) file starts with the title and one explaining line. The file is append-only:
    its old bytes are always a prefix of the new ones, written atomically (temp file, fsync, rename).

    Placement rule (one heading per day, dates ascending): entries are sorted by date (stably) and
    appended at the end; a ``## YYYY-MM-DD`` heading is added only for a date later than every heading
    already in the file. Entries are meant for "today or later", so that is the usual case; an entry
    dated earlier (a clock stepped back) goes under the last heading rather than repeat a day's heading,
    and its own text carries its timestamp. Single writer: the daemon is the only process appending.
    Raises ValueError for a malformed entry and OSError (:class:`daemon.safefile.RefusedFile`) when the path is a
    symlink or not a regular file, or (``root`` given) a directory between ``root`` and the file is not a real one.
    """
    for entry in entries:
        _check(entry)
    old = _read(path, root)
    text = old.decode("utf-8", errors="replace")
    present = set(_KEY_LINE.findall(text))
    last: date | None = None
    for found in _HEADING.findall(text):
        with contextlib.suppress(ValueError):  # a hand-edited "## 2026-02-30" is not a day
            day = date.fromisoformat(found)
            last = day if last is None or day > last else last
    written: list[Entry] = []
    parts: list[str] = []
    if not old.strip():
        parts.append(f"{TITLE}\n\n{INTRO}\n")
    elif not old.endswith(b"\n"):
        parts.append("\n")
    for entry in sorted(entries, key=lambda e: e.date):
        if entry.key in present:
            continue
        present.add(entry.key)
        if last is None or entry.date > last:
            parts.append(f"\n## {entry.date.isoformat()}\n")
            last = entry.date
        parts.append("\n" + entry.markdown.rstrip("\n") + "\n")
        written.append(entry)
    if not written:
        return []
    try:
        mode = stat.S_IMODE(path.lstat().st_mode)
    except FileNotFoundError:
        mode = 0o644
    _write_atomic(path, old + "".join(parts).encode("utf-8"), mode, root)
    return written
