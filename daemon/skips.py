"""What ingest could not read, said and counted: unreadable files and folders, and lines lost to fast rotation.

Nothing under the state root is skipped silently. A file or folder that cannot be read is logged once and counted
(``honesty_unreadable_files``) until it can; a generation of a log that rotation took away before a pass could read
it is counted as far as anything can still tell (``honesty_ingest_lost_lines_total``, ``..._bytes_total``).
"""

from __future__ import annotations

import logging
import math
import os
import posixpath
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from collectors.poll import Seen, Sighting
from collectors.safeopen import open_regular
from collectors.statedir import FileInfo, inside
from collectors.tail import Cursor, count_lines, matches

log = logging.getLogger("honestyd.ingest")

#: Cursors a log had, kept to recognise a rotated file already read (up to its cursor) when its rename is told late.
FOLLOWED = 4
#: Seconds between two WARNING lines about one log's lines lost to rotation.
LOSS_LOG_EVERY = 60.0


def vanished(exc: OSError) -> bool:
    """True when a read failed because the file went away meanwhile (not a reason to report it)."""
    return isinstance(exc, FileNotFoundError | NotADirectoryError)


class Unreadable:
    """Files and folders under the root that exist but cannot be read (mode 000, another owner, EIO).

    Each is logged once, as a WARNING naming it and the error, when it becomes unreadable; not again while it stays
    so, and again if it is read in between and then fails once more. Nothing about it is forgotten or deleted: it is
    retried at every pass that reaches it, a full scan reaching all (``honesty_unreadable_files`` is ``len``).
    """

    def __init__(self) -> None:
        self._paths: dict[str, str] = {}
        self._scan: set[str] | None = None  # the failures of the full scan under way

    def __len__(self) -> int:
        return len(self._paths)

    def __contains__(self, rel: object) -> bool:
        return rel in self._paths

    def failed(self, rel: str, exc: OSError) -> None:
        """``rel`` ("." for the root) could not be read or listed."""
        if self._scan is not None:
            self._scan.add(rel)
        if rel not in self._paths:
            log.warning("%s: cannot be read (%s); skipped until it can, retried at every rescan", rel,
                        exc.strerror or exc)
        self._paths[rel] = exc.strerror or str(exc)

    def read(self, rel: str) -> None:
        """``rel`` was read."""
        if self._paths.pop(rel, None) is not None:
            log.info("%s: readable again", rel)

    def begin_scan(self) -> None:
        """A full scan starts: what it does not find unreadable again is readable (or gone) at its end."""
        self._scan = set()

    def end_scan(self, complete: bool) -> None:
        """A full scan ended (``complete``: it walked the whole root, so its failures are all there are)."""
        failures, self._scan = self._scan, None
        if complete and failures is not None:
            for rel in [r for r in self._paths if r not in failures]:
                self.read(rel)

    def hides(self, rel: str) -> bool:
        """True iff ``rel`` lies in a folder that could not be listed (so its absence from a walk means nothing)."""
        return any(d == "." or rel.startswith(d + "/") for d in self._paths)


def lost_generations(sighted: Sequence[Sighting], info: FileInfo | None, cursor: Cursor | None, *,
                     drained: bool) -> dict[int, int]:
    """{inode: bytes never read} of the generations of a log that the poll saw (oldest first, before the stat that
    gave ``info``) and that are not the file read now (pure).

    The file read now is the last generation with its inode; later ones are left alone (a stat's timing). The first
    with the cursor's inode is the file the cursor read: what it held past the cursor is lost unless it was drained
    from where it was rotated to. Any other generation came and went between two passes: all of it is lost.
    """
    current = max((i for i, g in enumerate(sighted) if info is not None and g.ino == info.ino), default=len(sighted))
    lost: dict[int, int] = {}
    followed = False
    for g in sighted[:current]:
        size = g.size
        if cursor is not None and g.ino == cursor.ino and not followed:
            followed = True
            size = 0 if drained else g.size - cursor.offset
        if size > 0:
            lost[g.ino] = lost.get(g.ino, 0) + size
    return lost


class RotationLosses:
    """What rotation took from the logs under ``root`` before a pass could read it, counted where it can be.

    ``is_log(rel)``: whether a path is itself a log (a generation renamed to such a name is read under it).
    """

    def __init__(self, root: Path, is_log: Callable[[str], bool]) -> None:
        self.root = root
        self.is_log = is_log
        #: Lines in rotated files never read (still there under the name the watcher saw them renamed to).
        self.lines = 0
        #: Bytes the poll saw in generations gone before a pass could read them.
        self.bytes = 0
        self._followed: dict[str, deque[Cursor]] = {}
        self._logged: dict[str, tuple[float, tuple[int, int, int, int]]] = {}  # rel → (last line, sums since)

    def remember(self, rel: str, cursor: Cursor) -> None:
        """``rel`` was read up to ``cursor`` (a file renamed later is recognised by it, and counted past it)."""
        followed = self._followed.setdefault(rel, deque(maxlen=FOLLOWED))
        if not followed or followed[-1] != cursor:
            followed.append(cursor)

    def count(self, rel: str, seen: Seen, info: FileInfo | None, cursor: Cursor | None, old: str | None) -> None:
        """Count, and log (at most once per log and :data:`LOSS_LOG_EVERY`), what rotation took from ``rel``.

        ``info``: the file read now (None: gone); ``cursor``: where the last pass left ``rel``; ``old``: where that
        file was drained from this pass, if it was. Lines: in each file the watcher saw ``rel`` renamed to that is
        still there, not a log itself, nor the file read now or drained, the complete lines past what a cursor of
        ``rel`` read of it (all of them for a generation never followed). Bytes: of the generations the poll saw that
        are gone (:func:`lost_generations`). Both are lower bounds: a generation that neither the poll saw nor is
        still at its new name is not counted.
        """
        lost = lost_generations(seen.generations, info, cursor, drained=old is not None)
        root_real = os.path.realpath(self.root)
        drained = os.path.realpath(old) if old is not None else None
        skip = {(info.dev, info.ino)} if info is not None else set()
        lines = files = 0
        for dest in dict.fromkeys(seen.moved_to):
            real = os.path.realpath(dest)
            if not inside(root_real, real) or real == drained or self.is_log(os.path.relpath(real, root_real)):
                continue  # outside the root, drained just now, or read under its own name
            try:
                fd = open_regular(dest, follow=False)
            except OSError:
                continue  # renamed again, or deleted: gone
            try:
                st = os.fstat(fd)
                if (st.st_dev, st.st_ino) in skip:
                    continue
                skip.add((st.st_dev, st.st_ino))
                read = next((c.offset for c in reversed(self._followed.get(rel, ()))
                             if (c.dev, c.ino) == (st.st_dev, st.st_ino) and matches(fd, c)), 0)
                n = count_lines(fd, read)
            finally:
                os.close(fd)
            lost.pop(st.st_ino, None)  # counted in lines: not in bytes as well
            if n:
                lines, files = lines + n, files + 1
        self._drop_read_elsewhere(rel, lost)
        gone = sum(lost.values())
        if lines or gone:
            self.lines += lines
            self.bytes += gone
            self._log(rel, (lines, files, gone, len(lost)))

    def _drop_read_elsewhere(self, rel: str, lost: dict[int, int]) -> None:
        """Forget the generations in ``lost`` ({inode: bytes}) now at another name of ``rel``'s folder that is a
        log itself: they are read under that name."""
        if not lost:
            return
        folder, name = posixpath.split(rel)
        try:
            with os.scandir(os.path.join(self.root, folder)) as entries:
                for entry in entries:
                    if entry.name != name and entry.inode() in lost and self.is_log(posixpath.join(folder, entry.name)):
                        del lost[entry.inode()]
        except OSError:
            pass

    def _log(self, rel: str, loss: tuple[int, int, int, int]) -> None:
        """A WARNING with the sums since the last one for ``rel``, unless one was logged under a minute ago (a fast
        rotation loses at every pass); the counters count every loss."""
        now = time.monotonic()
        last, pending = self._logged.get(rel, (-math.inf, (0, 0, 0, 0)))
        lines, files, gone, generations = (a + b for a, b in zip(pending, loss, strict=True))
        if now - last < LOSS_LOG_EVERY:
            self._logged[rel] = (last, (lines, files, gone, generations))
            return
        self._logged[rel] = (now, (0, 0, 0, 0))
        log.warning("%s: rotated away before a pass could read them (lost): %d lines in %d rotated file(s) not"
                    " followed, %d bytes in %d generation(s) gone; rotate less often than the pass runs (see"
                    " docs/reliability.md)", rel, lines, files, gone, generations)
