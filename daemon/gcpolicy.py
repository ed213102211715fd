"""Keep the cyclic garbage collector off the scoring model's objects as they arrive.

The model holds a Python object per record (scorers/live/), hundreds of thousands of them, and CPython's full
collection walks every tracked object outside the permanent generation. The daemon freezes the model it loads
(daemon/modelkeeper.py ``load_feed``), but records that arrive later pile up in the oldest generation, and each full
collection then walks all of them, pausing the threads that wait for the GIL (the figures are in
docs/performance.md).

So after evaluations, at most every ``every`` seconds, the young generations are collected (their cyclic garbage
goes) and everything left is frozen: a full collection then walks only what arrived since. The model's records
hold no reference cycles, so frozen ones are still freed by reference counting when the model lets them go. What
freezing can keep is cyclic garbage already in the oldest generation (objects that survived two collections and
then fell into a cycle), and it is little. To bound it, once every ``sweep_every`` seconds everything is unfrozen
and collected in full: one pause, once a day by default, logged with its length.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

log = logging.getLogger("honestyd.gc")

#: Seconds between two freezes: a full collection walks at most this long's new objects.
FREEZE_EVERY = 5.0
#: Seconds between two full sweeps of everything, frozen or not (what bounds the cyclic garbage freezing keeps).
SWEEP_EVERY = 86_400.0


#: Pauses under way (any thread), and whether the collector was on when the first of them began.
_pauses = 0
_resume = False
_pause_lock = threading.Lock()


@contextmanager
def paused(*, freeze: bool) -> Iterator[None]:
    """No garbage collection while millions of long-lived objects are made (each collection would walk them again, and
    the oldest generation's walks all of them); with ``freeze``, everything made so far is frozen out of it afterwards,
    else the next allocation would start a full collection walking them all once more. The collector is left as it
    was found (a caller that had it off keeps it off).

    The collector is the process's: pauses in several threads (an ingest batch beside a first evaluation) overlap, and
    it comes back on only when the last of them ends, not when the first does.
    """
    global _pauses, _resume
    with _pause_lock:
        if not _pauses:
            _resume = gc.isenabled()
        _pauses += 1
        gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        with _pause_lock:
            _pauses -= 1
            if not _pauses and _resume:
                gc.enable()


T = TypeVar("T")
#: Records read between two freezes of :func:`frozen_as_read`: what a collection meanwhile walks at most.
FREEZE_READ = 50_000


def frozen_as_read(items: Iterable[T], every: int = FREEZE_READ) -> Iterator[T]:
    """``items``, with everything the collector tracks frozen after each ``every`` of them: records kept as they are
    read leave its walks in batches, while it goes on collecting the other threads' garbage (a pause would keep that
    until the end: the start's scan runs beside the load)."""
    for k, item in enumerate(items, 1):
        yield item
        if not k % every:
            gc.freeze()


class Freezer:
    """Freeze what survived since the last freeze, now and then; sweep everything once in a long while."""

    def __init__(self, every: float = FREEZE_EVERY, sweep_every: float = SWEEP_EVERY,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every
        self.sweep_every = sweep_every
        self.clock = clock
        now = clock()
        self._frozen = now
        self._swept = now
        self.freezes = 0
        self.sweeps = 0

    def after_evaluation(self) -> None:
        """Called after each evaluation (in the event loop: a young collection costs a few ms at most)."""
        now = self.clock()
        if now - self._swept >= self.sweep_every:
            self.sweep()
        elif now - self._frozen >= self.every:
            gc.collect(1)  # the young generations' cyclic garbage goes now, not into the permanent generation
            gc.freeze()
            self._frozen = now
            self.freezes += 1

    def after_audit(self) -> None:
        """Called (in the request thread) once an audit's rows are built: tens of thousands of objects that live until
        it is answered, which every collection meanwhile walked again, the loop waiting. The young generations are
        collected and what survives frozen, as after an evaluation; the rows hold no cycles, so they are freed by
        reference counting when the answer is sent."""
        gc.collect(1)
        gc.freeze()
        self.freezes += 1

    def sweep(self) -> None:
        """Unfreeze everything, collect it all, freeze what survives (one full pause)."""
        started = time.perf_counter()
        frozen = gc.get_freeze_count()
        gc.unfreeze()
        collected = gc.collect()
        gc.freeze()
        self._frozen = self._swept = self.clock()
        self.sweeps += 1
        log.info("garbage collector: full sweep of %d frozen objects collected %d in %.2f s", frozen, collected,
                 time.perf_counter() - started)
