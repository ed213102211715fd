"""Appends to known JSON Lines logs, found by polling their size and modification time.

A fleet of agents appends thousands of lines a second, each append an inotify ``IN_MODIFY`` event that
watchdog handles in Python over three threads before any handler could drop it: in the soak that was
a fifth of the daemon's CPU, contending for the GIL with ingest and scoring. So the daemon asks the
watcher only for events that change which files exist or close a written file (creation, move,
deletion, close-after-write), and finds appends to the logs it knows by a ``stat`` per log and poll
(~100 logs: well under a millisecond). The watcher tells it of new logs; the store's cursors, of the
logs it had before.
"""

from __future__ import annotations

import os
from pathlib import Path

#: What a poll compares: inode, size, modification time (a change to any means: read it again).
Signature = tuple[int, int, int]


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

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, rel: object) -> bool:
        return rel in self._seen

    def track(self, rel: str, *, seen: bool = True) -> None:
        """Poll ``rel`` (relative to the root) from now on. ``seen``: its current state is already being read
        (a pass is pending for it); otherwise the next poll reports it if it exists, so nothing appended
        between the caller's last read and now waits for another append.
        """
        self._seen[rel] = signature(os.path.join(self.root, rel)) if seen else None

    def changed(self) -> list[str]:
        """The tracked logs whose signature changed since last seen, in sorted order.

        A log that is gone is reported once and then dropped (its removal or rotation is the watcher's news,
        and it is tracked again when it reappears).
        """
        found = []
        for rel, before in list(self._seen.items()):
            now = signature(os.path.join(self.root, rel))
            if now == before:
                continue
            found.append(rel)
            if now is None:
                del self._seen[rel]
            else:
                self._seen[rel] = now
        return sorted(found)
