"""What ingest could not read, said and counted.

Nothing under the state root is skipped silently. A file or folder that cannot be read is logged once and counted
(``honesty_unreadable_files``) until it can.
"""

from __future__ import annotations

import logging

log = logging.getLogger("honestyd.ingest")


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
