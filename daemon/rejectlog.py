"""Rejected lines in the log, at most so many per file per minute (``[limits] reject_log_per_minute``).

A file that fills with bad lines (a broken writer, or an agent doing it on purpose) would otherwise put one
log line per rejected line in the journal. The first ``limit`` rejects of a file in a minute are logged as
before; the rest are counted, and once that minute is over one line says how many more there were. Every
reject is still stored and counted in ``honesty_ingest_rejects_total``: only the log is thinned.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from collectors.records import Reject
from daemon.logsetup import BUDGETED

#: How long one file's budget of logged rejects lasts.
MINUTE = 60.0

log = logging.getLogger("honestyd.ingest")
#: These lines keep their own budget ([limits] reject_log_per_minute): the generic repeat filter lets them pass.
_BUDGETED = {BUDGETED: True}


@dataclass
class _Minute:
    """One file's current minute: when it began, rejects logged, rejects only counted."""

    start: float
    logged: int = 0
    counted: int = 0


class RejectLog:
    """Logs rejects, ``limit`` per file per minute, then one summary per file and minute (see the module)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, logger: logging.Logger = log) -> None:
        self.clock = clock
        self.log = logger
        self._files: dict[str, _Minute] = {}

    def reject(self, reject: Reject, limit: int) -> None:
        """Log ``reject`` if its file has logged fewer than ``limit`` this minute; count it otherwise."""
        now = self.clock()
        minute = self._files.get(reject.path)
        if minute is not None and now - minute.start >= MINUTE:
            self._summarise(reject.path, minute)
            minute = None
        if minute is None:
            minute = self._files[reject.path] = _Minute(now)
        if minute.logged < limit:
            minute.logged += 1
            where = f"{reject.path}:{reject.line}" if reject.line is not None else reject.path
            self.log.warning("%s: rejected (%s): %s", where, reject.reason, reject.snippet[:80], extra=_BUDGETED)
        else:
            minute.counted += 1

    def flush(self, *, everything: bool = False) -> None:
        """Summarise the minutes that are over (``everything``: all of them, as a command or the daemon ends)."""
        now = self.clock()
        for path, minute in list(self._files.items()):
            if everything or now - minute.start >= MINUTE:
                self._summarise(path, minute)
                del self._files[path]

    def _summarise(self, path: str, minute: _Minute) -> None:
        if minute.counted:
            self.log.warning("… and %d more rejected lines in %s in the last minute", minute.counted, path,
                             extra=_BUDGETED)
