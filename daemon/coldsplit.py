"""A rebuild's rules on two cores: a forked copy of the process works out the outcomes of half the decisions.

A model's first evaluation runs every rule for every decision (scorers/live/sums.py ``rerun_all``): a cold start's
largest single part. The rules read the model and change nothing of it, and one agent's outcomes never depend on
another's being kept, so the work splits by agent. :func:`forked` forks the model's thread: the child has the model
as it was at the fork, copy-on-write, works out the outcomes of the first agents (about half the decisions) and
writes them to a pipe in a compact form (counts as indexes into a table of distinct counts, times as microseconds);
meanwhile the parent works out and keeps the rest, then reads the child's and keeps them. If the child fails in any
way, the parent works out those agents itself: the result is the same either way, only slower.

The child, like the model cache's writer (daemon/cachewriter.py), runs no other thread's code, logs nothing, touches no
store, closes every descriptor it inherited but its pipe, dies with the thread that forked it and ends with
:func:`os._exit`. Its pages are the parent's until it touches them: reading the records changes their reference
counts, so the host needs up to the model's size again in free memory for the seconds the child runs.
"""

from __future__ import annotations

import bisect
import gc
import logging
import os
import pickle
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.rfc3339 import from_us, to_us
from daemon import forking
from scorers.live.base import NEVER
from scorers.live.sums import Anchor, Outcomes

log = logging.getLogger("honestyd")

#: A rebuild of fewer decisions than this runs on one core: the fork and the copy would cost more than they save.
SPLIT_FROM = 50_000
#: The child's share of the decisions (the parent keeps the child's outcomes after its own, but the child pays for
#: the pages it copies and for writing them).
CHILD_SHARE = 0.5
#: In the anchors' time column: set with no time.
_NO_TIME = -(2**63)

Work = Callable[[Sequence[str]], list[list[Outcomes]]]
#: What gives the child's outcomes by agent, once it is done.
Collected = Callable[[], Mapping[str, Sequence[Outcomes]]]


def cores() -> int:
    """How many cores this process may run on (1 when it cannot tell: then nothing is forked)."""
    try:
        return len(os.sched_getaffinity(0))
    except OSError:  # a seccomp filter stricter than the unit's (sched_getaffinity is in systemd's @default)
        return 1


def forked(names: list[str], sizes: list[int], work: Work, *, split_from: int = SPLIT_FROM,
           share: float = CHILD_SHARE, cores: Callable[[], int] = cores) -> tuple[frozenset[str], Collected]:
    """A ``split`` for :meth:`scorers.live.LiveModel.evaluate`: the first of ``names`` (the agents, each with ``sizes``
    decisions) up to a ``share`` of the decisions go to a forked child working them out with ``work``; returns them and
    the call that waits for the child and gives its outcomes by agent (an empty map when it failed: the model then
    works them out itself). Nothing is forked for fewer than ``split_from`` decisions or on one core."""
    total = sum(sizes)
    if total < split_from or cores() < 2:
        return frozenset(), dict
    taken, count = [], 0
    for name, size in zip(names, sizes, strict=True):
        if count >= total * share:
            break
        taken.append(name)
        count += size
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:  # no memory or no process left to fork
        os.close(read_end)
        os.close(write_end)
        log.warning("a rebuild's rules on one core: %s", exc)
        return frozenset(), dict
    if pid == 0:
        _child(taken, work, write_end, os.getppid())
    os.close(write_end)

    def collect() -> Mapping[str, Sequence[Outcomes]]:
        data: tuple[Any, ...] | None = None
        try:
            with os.fdopen(read_end, "rb") as pipe:  # unpickled as it arrives: never the whole of it as bytes too
                data = pickle.load(pipe)
        except (OSError, EOFError, pickle.UnpicklingError):
            pass  # the child's status says why
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0 or data is None:
            log.warning("a rebuild's second core failed (exit status %d): its agents were worked out here", code)
            return {}
        return decode(data)

    return frozenset(taken), collect


def _child(names: list[str], work: Work, out: int, parent: int) -> None:
    """The forked child: never returns."""
    status = 1
    try:
        gc.disable()  # a collection would touch (so copy) every page of the model; the child ends soon anyway
        forking.become_child(parent, keep={0, 1, 2, out})
        forking.write_all(out, pickle.dumps(encode(names, work(names)), protocol=pickle.HIGHEST_PROTOCOL))
        status = 0
    finally:
        os._exit(status)


def encode(names: list[str], outcomes: list[list[Outcomes]]) -> tuple[Any, ...]:
    """The outcomes of these agents as a few flat columns (no object per decision: the parent would hold them all):
    per decision the index of its counts in a table of distinct ones; the times that are not NEVER and the anchors
    that are not None, each beside its position (most decisions have neither)."""
    table: dict[tuple[int, ...], int] = {}
    contributions: dict[tuple[int, int, int, int], int] = {}
    counts, until_at, until = array("I"), array("I"), array("q")
    width = next((len(o[2]) for per_agent in outcomes for o in per_agent), 0)
    anchor_at, times, added = array("I"), array("q"), array("I")
    k = 0
    for per_agent in outcomes:
        for c, u, anchors in per_agent:
            counts.append(table.setdefault(c, len(table)))
            if u != NEVER:
                until_at.append(k)
                until.append(to_us(u))
            for j, anchor in enumerate(anchors):
                if anchor is not None:
                    t, contribution = anchor
                    anchor_at.append(k * width + j)
                    times.append(_NO_TIME if t is None else to_us(t))
                    added.append(contributions.setdefault(contribution, len(contributions)))
            k += 1
    return (names, [len(o) for o in outcomes], list(table), list(contributions), width, counts, until_at, until,
            anchor_at, times, added)


def decode(data: tuple[Any, ...]) -> dict[str, Sequence[Outcomes]]:
    """The outcomes :func:`encode` wrote, by agent: read from the columns as they are asked for, so that the parent
    holds no object per decision meanwhile."""
    names, lengths, *rest = data
    columns = _Columns(*rest)
    out: dict[str, Sequence[Outcomes]] = {}
    start = 0
    for name, n in zip(names, lengths, strict=True):
        out[name] = _Decoded(columns, start, n)
        start += n
    return out


@dataclass(frozen=True, slots=True)
class _Columns:
    table: list[tuple[int, ...]]
    contributions: list[tuple[int, int, int, int]]
    width: int
    counts: array[int]
    until_at: array[int]
    until: array[int]
    anchor_at: array[int]
    times: array[int]
    added: array[int]

    def outcomes(self, start: int, n: int) -> Iterator[Outcomes]:
        """The outcomes of decisions ``start`` to ``start + n`` written, in order."""
        width, until_at, anchor_at = self.width, self.until_at, self.anchor_at
        u = bisect.bisect_left(until_at, start)
        a = bisect.bisect_left(anchor_at, start * width)
        none = (None,) * width
        for k in range(start, start + n):
            until = NEVER
            if u < len(until_at) and until_at[u] == k:
                until = from_us(self.until[u])
                u += 1
            anchors: tuple[Anchor | None, ...] = none
            if a < len(anchor_at) and anchor_at[a] < (k + 1) * width:
                held: list[Anchor | None] = list(none)
                while a < len(anchor_at) and anchor_at[a] < (k + 1) * width:
                    t = self.times[a]
                    held[anchor_at[a] - k * width] = (None if t == _NO_TIME else from_us(t),
                                                      self.contributions[self.added[a]])
                    a += 1
                anchors = tuple(held)
            yield self.table[self.counts[k]], until, anchors


class _Decoded(Sequence[Outcomes]):
    """One agent's outcomes in the columns: decisions ``start`` to ``start + n`` of them."""

    def __init__(self, columns: _Columns, start: int, n: int) -> None:
        self.columns, self.start, self.n = columns, start, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k: int) -> Outcomes:  # type: ignore[override]
        if not 0 <= k < self.n:
            raise IndexError(k)
        return next(self.columns.outcomes(self.start + k, 1))

    def __iter__(self) -> Iterator[Outcomes]:
        return self.columns.outcomes(self.start, self.n)
