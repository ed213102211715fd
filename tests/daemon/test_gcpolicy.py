"""The daemon's garbage-collector policy (daemon/gcpolicy.py), on the real collector with an injected clock."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from daemon import gcpolicy
from daemon.gcpolicy import Freezer


class Node:
    """Something that can sit in a reference cycle."""

    def __init__(self) -> None:
        self.other: object = None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _thawed() -> Iterator[None]:
    gc.collect()
    yield
    gc.unfreeze()  # what a test froze goes back to the collector


def _tracked(obj: object) -> bool:
    """True iff ``obj`` is in one of the collector's generations (frozen objects are not)."""
    return any(o is obj for o in gc.get_objects())


def _cycle() -> weakref.ref[Node]:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_nothing_before_its_time_then_survivors_frozen_and_young_cycles_collected() -> None:
    clock = Clock()
    freezer = Freezer(every=5.0, sweep_every=100.0, clock=clock)
    kept = [Node()]
    clock.now = 4.9
    freezer.after_evaluation()
    assert freezer.freezes == 0 and _tracked(kept)
    garbage = _cycle()  # young cyclic garbage: a freeze now must not keep it
    assert garbage() is not None
    clock.now = 5.0
    freezer.after_evaluation()
    assert freezer.freezes == 1
    assert garbage() is None
    assert not _tracked(kept) and gc.get_freeze_count() > 0
    newer = [Node()]
    freezer.after_evaluation()  # within `every` of the last freeze
    assert freezer.freezes == 1 and _tracked(newer)


def test_a_sweep_collects_cyclic_garbage_that_was_frozen() -> None:
    clock = Clock()
    freezer = Freezer(every=5.0, sweep_every=100.0, clock=clock)
    garbage = _cycle()
    gc.freeze()  # frozen while alive, then dropped: only a sweep can find it
    gc.collect()
    assert garbage() is not None
    clock.now = 99.0
    freezer.after_evaluation()  # a freeze, not a sweep
    assert garbage() is not None and (freezer.freezes, freezer.sweeps) == (1, 0)
    clock.now = 100.0
    kept = [Node()]
    freezer.after_evaluation()
    assert freezer.sweeps == 1
    assert garbage() is None
    assert not _tracked(kept)  # what survived the sweep is frozen again


def test_after_an_audit_its_rows_are_frozen_young_cycles_collected_and_the_rows_still_freed() -> None:
    freezer = Freezer(every=5.0, sweep_every=100.0, clock=Clock())
    rows = [Node() for _ in range(1000)]  # an audit's rows: alive until it is answered, no cycles among them
    first = weakref.ref(rows[0])
    garbage = _cycle()
    freezer.after_audit()
    assert freezer.freezes == 1 and garbage() is None
    assert not _tracked(rows[0])  # no collection walks them while the answer is built
    del rows
    assert first() is None  # answered: freed by reference counting, frozen or not


def test_items_read_are_frozen_in_batches_and_the_collector_stays_on() -> None:
    """frozen_as_read: what was read up to each batch's end is out of the collector's walks; what comes after is not
    yet."""
    read = gcpolicy.frozen_as_read(([k] for k in range(25)), every=10)  # lists: tracked by the collector until frozen
    taken = [next(read) for _ in range(21)]  # the second batch is frozen as the 21st item is asked for, then made
    assert gc.isenabled()
    assert not any(_tracked(x) for x in taken[:20])
    assert _tracked(taken[20])
    assert [*taken, *read] == [[k] for k in range(25)]


def test_overlapping_pauses_turn_the_collector_on_when_the_last_ends() -> None:
    """An ingest batch's pause and a first evaluation's, in two threads, end in either order: the first to end must
    not turn the collector back on under the other."""
    assert gc.isenabled()
    first, second = gcpolicy.paused(freeze=False), gcpolicy.paused(freeze=False)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # not the innermost: as another thread's pause ends
    assert not gc.isenabled()
    second.__exit__(None, None, None)
    assert gc.isenabled()
    gc.disable()
    try:
        with gcpolicy.paused(freeze=False):
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()
