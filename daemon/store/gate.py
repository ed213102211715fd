"""The gate between the writer's COMMITs and the snapshots of a reader that runs often (the daemon's evaluations)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: How long a COMMIT waits for a gated reader's snapshot to end (see :class:`Gate`). A sync reads for milliseconds
#: in a steady state; a catch-up sync may read for seconds, and a pass must not stall behind it for that long.
GATE_WAIT_S = 1.0


class Gate:
    """Keeps the snapshots of a reader that runs often (the daemon's evaluations) out of the writer's COMMITs.

    SQLite checkpoints the WAL inside a COMMIT once it passes 1,000 pages, and can copy back only the frames every
    open snapshot has seen; a checkpoint cut short leaves the WAL to grow by the next transaction instead of starting
    over. Without the gate, an evaluation reading at each COMMIT grew the WAL by one ingest group per overlap.

    A COMMIT waits at most ``GATE_WAIT_S`` for a read, and once only for the same read: the COMMITs after one that
    gave up go ahead at once while that read lasts (a catch-up sync of seconds costs a pass one wait, not one each).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reads = 0  # reads begun; the one holding the lock is number _reads
        self._gave_up_on = -1  # the read a COMMIT last stopped waiting for
        #: COMMITs that went ahead without the gate, while a read held it: each may have left its checkpoint cut short
        #: (the WAL grows by that transaction instead of starting over).
        self.ungated = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the gate for one read transaction."""
        with self._lock:
            self._reads += 1
            yield

    @contextmanager
    def committing(self) -> Iterator[None]:
        """Hold the gate for one COMMIT, if it comes free in time (see the class)."""
        if self._gave_up_on == self._reads:  # the read that outlasted a COMMIT's wait may still be on
            held = self._lock.acquire(blocking=False)
        else:
            held = self._lock.acquire(timeout=GATE_WAIT_S)
        if not held:
            self._gave_up_on = self._reads
            self.ungated += 1
        try:
            yield
        finally:
            if held:
                self._lock.release()

    def locked(self) -> bool:
        """True while a read or a COMMIT holds the gate."""
        return self._lock.locked()
