"""Appends to known JSON Lines logs, found by polling their size and modification time.

A fleet of agents appends thousands of lines a second, each append an inotify ``IN_MODIFY`` event that watchdog
handles in Python over three threads before any handler could drop it, contending for the GIL with ingest and scoring
(docs/performance.md has the soak's figure). So the daemon asks the watcher only for events that change which files
exist or close a written file (creation, move, deletion, close-after-write), and finds appends to the logs it knows by
one ``stat`` per log and poll. The watcher tells it of new logs; the store's cursors, of the logs it had before.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import NamedTuple

#: What a poll compares: inode, size, modification time (a change to any means: read it again).
Signature = tuple[int, int, int]


class Sighting(NamedTuple):
    """One generation of a log as the poll saw it: its inode, the largest size seen, when it was first seen."""

    ino: int
    size: int
    since: float  # time.monotonic()


class Seen(NamedTuple):
    """What was seen of one log between two passes: its generations (oldest first), and the paths it was moved to
    (rotated; from the watcher)."""

    generations: list[Sighting]
    moved_to: list[str]


def signature(path: str) -> Signature | None:
    """The file's (inode, size, mtime_ns), or None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class LogPoller:
    """The logs under ``root`` being polled, with the signature each had when last seen."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._seen: dict[str, Signature | None] = {}
        #: The generations seen of each log since the ingester last took them (see :meth:`take`); the poll, the event
        #: loop (tracking) and the ingester run on three threads, hence the lock.
        self._generations: dict[str, list[Sighting]] = {}
        self._moves: dict[str, list[tuple[float, str]]] = {}  # (time.monotonic(), destination) since the last take
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, rel: object) -> bool:
        return rel in self._seen

    def track(self, rel: str, *, seen: bool = True) -> None:
        """Poll ``rel`` (relative to the root) from now on. ``seen``: its current state is already being read
        (a pass is pending for it); otherwise the next poll reports it if it exists, so nothing appended
        between the caller's last read and now waits for another append.
        """
        now = signature(os.path.join(self.root, rel))
        with self._lock:
            self._sighted(rel, now)
            self._seen[rel] = now if seen else None

    def _sighted(self, rel: str, sig: Signature | None) -> None:
        """Note a sighting of ``rel``; the caller holds the lock."""
        if sig is None or not sig[1]:
            return
        ino, size, _ = sig
        generations = self._generations.setdefault(rel, [])
        last = generations[-1] if generations else None
        if last is not None and last.ino == ino and size >= last.size:
            generations[-1] = last._replace(size=size)
        else:  # another inode at the name, or the same one shorter (truncated, or the inode given to a new file)
            generations.append(Sighting(ino, size, time.monotonic()))

    def moved(self, rel: str, dest: str) -> None:
        """The watcher saw the tracked log ``rel`` renamed to ``dest`` (an absolute path): a rotation."""
        with self._lock:
            if rel in self._seen or rel in self._generations:
                self._moves.setdefault(rel, []).append((time.monotonic(), dest))

    def take(self, rel: str, before: float) -> Seen:
        """What was seen of ``rel`` since the last call and before ``before`` (``time.monotonic()`` of the ingester's
        stat); what came later is kept for the next call.

        The ingester compares it with what it read: a generation rotated away before a pass could read it is
        counted as lost (daemon/ingest/), where it would have passed silently.
        """
        with self._lock:
            generations = self._generations.pop(rel, [])
            moves = self._moves.pop(rel, [])
            later = [g for g in generations if g.since >= before]
            if later:
                self._generations[rel] = later
            later_moves = [m for m in moves if m[0] >= before]
            if later_moves:
                self._moves[rel] = later_moves
            return Seen([g for g in generations if g.since < before], [dest for at, dest in moves if at < before])

    def changed(self) -> list[str]:
        """The tracked logs whose signature changed since last seen, in sorted order.

        A log that is gone is reported once and then dropped (its removal or rotation is the watcher's news,
        and it is tracked again when it reappears).

        The daemon calls this on a thread of its own while the event loop tracks logs: the stats (one per log) are
        made without the lock, and a log tracked again meanwhile is left to :meth:`track`, which saw it itself.
        """
        with self._lock:
            tracked = list(self._seen.items())
        looked = [(rel, before, signature(os.path.join(self.root, rel))) for rel, before in tracked]
        found = []
        with self._lock:
            for rel, before, now in looked:
                if now == before or rel not in self._seen or self._seen[rel] is not before:
                    continue
                self._sighted(rel, now)
                found.append(rel)
                if now is None:
                    del self._seen[rel]
                else:
                    self._seen[rel] = now
        return sorted(found)
