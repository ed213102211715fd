"""A rebuild's rules on two cores: a forked copy of the process works out agents' outcomes from the first agent on,
while the model works from the last one back, until the two meet.

A model's first evaluation runs every rule for every decision (scorers/live/sums.py ``rerun_all``): a cold start's
largest single part. The rules read the model and change nothing of it, and one agent's outcomes never depend on
another's being kept, so the work splits by agent. :func:`forked` forks the model's thread: the child has the model
as it was at the fork, copy-on-write, and works out the agents' outcomes in order, writing each agent's to a pipe as
soon as it has them, in a compact form (counts as indexes into a table of distinct counts, times as microseconds),
with the paths and signals its decisions are filed under. Meanwhile the model works out and keeps agents from the
end, and between two of its own keeps what the child sent. Where they meet depends on how fast each side goes (the
model also keeps the child's outcomes; a host busy elsewhere may slow either): no share is fixed in advance. Once
every agent is kept, the child is killed. If the child fails in any way, the model works out the agents it did not
send itself: the result is the same either way, only slower.

The child, like the model cache's writer (daemon/cachewriter.py), runs no other thread's code, logs nothing, touches no
store, closes every descriptor it inherited but its pipe, dies with the thread that forked it and ends with
:func:`os._exit`. Its pages are the parent's until it touches them: reading the records changes their reference
counts, so the host needs up to the model's size again in free memory for the seconds the child runs.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import gc
import logging
import os
import pickle
import select
import signal
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.rfc3339 import from_us, to_us
from daemon import forking
from scorers.live.agents import NONE
from scorers.live.base import NEVER
from scorers.live.sums import Anchor, Outcomes, Worked

log = logging.getLogger("honestyd")

#: A rebuild of fewer decisions than this runs on one core: the fork and the copy would cost more than they save.
SPLIT_FROM = 50_000
#: The pipe's buffer asked for (F_SETPIPE_SZ; Linux's default unprivileged ceiling): the child writes an agent's
#: outcomes without waiting for the model, which reads them only between two agents of its own.
PIPE_BYTES = 1 << 20
#: In the anchors' time column: set with no time.
_NO_TIME = -(2**63)
#: Each agent's outcomes on the pipe: their length as 8 bytes, then their pickle.
_LENGTH = 8

Work = Callable[[Sequence[str]], list[Worked]]


def cores() -> int:
    """How many cores this process may run on (1 when it cannot tell: then nothing is forked)."""
    try:
        return len(os.sched_getaffinity(0))
    except OSError:  # a seccomp filter stricter than the unit's (sched_getaffinity is in systemd's @default)
        return 1


class Child:
    """The forked child working out agents' outcomes in order (see :func:`forked`): what it has sent so far, read
    without waiting, and its end."""

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid, self.pipe = pid, pipe
        self._buffer = bytearray()
        self._reaped = False

    def poll(self, timeout: float = 0.0) -> list[Worked]:
        """The work of the next agents in order (one per agent) that the child sent since the last call,
        waiting at most ``timeout`` seconds for the first; none once it ended (done, failed or closed)."""
        if self._reaped:
            return []
        ready, _, _ = select.select([self.pipe], [], [], timeout)
        while ready:
            try:
                chunk = os.read(self.pipe, PIPE_BYTES)
            except BlockingIOError:
                break
            if not chunk:  # the child's end: done with every agent, or failed
                out = self._frames()
                self._reap(killed=False)
                return out
            self._buffer += chunk
        return self._frames()

    def _frames(self) -> list[Worked]:
        out: list[Worked] = []
        buffer = self._buffer
        while len(buffer) >= _LENGTH:
            n = int.from_bytes(buffer[:_LENGTH], "little")
            if len(buffer) < _LENGTH + n:
                break
            (worked,) = decode(pickle.loads(buffer[_LENGTH:_LENGTH + n])).values()
            out.append(worked)
            del buffer[:_LENGTH + n]
        return out

    @property
    def ended(self) -> bool:
        """True once the child is reaped (it ended, or :meth:`close` stopped it)."""
        return self._reaped

    def close(self) -> None:
        """Stop the child (every agent is kept, or the model failed) and reap it."""
        if not self._reaped:
            self._reap(killed=True)

    def _reap(self, *, killed: bool) -> None:
        self._reaped = True
        os.close(self.pipe)
        if killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        _, status = os.waitpid(self.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if not killed and code != 0:
            log.warning("a rebuild's second core failed (exit status %d): the agents it did not send were worked out "
                        "here", code)


def forked(names: list[str], sizes: list[int], work: Work, *, split_from: int = SPLIT_FROM,
           cores: Callable[[], int] = cores) -> Child | None:
    """A ``split`` for :meth:`scorers.live.LiveModel.evaluate`: a forked child working out the outcomes of ``names``
    (the agents, each with ``sizes`` decisions) with ``work``, one agent at a time from the first, sending each as it
    goes (:meth:`Child.poll`) until it is stopped (:meth:`Child.close`). None, and nothing forked, for fewer than
    ``split_from`` decisions, on one core, or when no process can be forked."""
    if sum(sizes) < split_from or cores() < 2:
        return None
    read_end, write_end = os.pipe()
    with contextlib.suppress(OSError):  # a smaller buffer only makes the child wait for the model more often
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    try:
        pid = os.fork()
    except OSError as exc:  # no memory or no process left to fork
        os.close(read_end)
        os.close(write_end)
        log.warning("a rebuild's rules on one core: %s", exc)
        return None
    if pid == 0:
        _child(names, work, write_end, os.getppid())
    os.close(write_end)
    os.set_blocking(read_end, False)
    return Child(pid, read_end)


def _child(names: list[str], work: Work, out: int, parent: int) -> None:
    """The forked child: never returns."""
    status = 1
    try:
        gc.disable()  # a collection would touch (so copy) every page of the model; the child ends soon anyway
        forking.become_child(parent, keep={0, 1, 2, out})
        for name in names:
            data = pickle.dumps(encode([name], work([name])), protocol=pickle.HIGHEST_PROTOCOL)
            forking.write_all(out, len(data).to_bytes(_LENGTH, "little") + data)
        status = 0
    finally:
        os._exit(status)


def encode(names: list[str], worked: list[Worked]) -> tuple[Any, ...]:
    """The work of these agents with their outcomes as a few flat columns (no object per decision: the parent would
    hold them all): per decision the index of its counts in a table of distinct ones; the times that are not NEVER
    and the anchors that are not None, each beside its position (most decisions have neither). The filings stay as
    they are (few decisions have one)."""
    outcomes = [o for o, _ in worked]
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
    return (names, [len(o) for o in outcomes], [list(f) for _, f in worked], list(table), list(contributions), width,
            counts, until_at, until, anchor_at, times, added)


def decode(data: tuple[Any, ...]) -> dict[str, Worked]:
    """The work :func:`encode` wrote, by agent: the outcomes read from the columns as they are asked for, so that the
    parent holds no object per decision meanwhile."""
    names, lengths, filings, *rest = data
    columns = _Columns(*rest)
    out: dict[str, Worked] = {}
    start = 0
    for name, n, filed in zip(names, lengths, filings, strict=True):
        out[name] = (_Decoded(columns, start, n), filed)
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

    # --- as a Packed (scorers/live/sums.py): kept by the model without an Outcomes tuple per decision

    def counts(self) -> tuple[Sequence[tuple[int, ...]], Sequence[int]]:
        """The distinct counts, and per decision the position of its own among them."""
        c = self.columns
        return c.table, c.counts[self.start:self.start + self.n]

    def expiries(self) -> Iterator[tuple[int, int]]:
        """(position, microseconds) of each decision whose outcomes stop being valid at a time, in order."""
        c, start = self.columns, self.start
        at = c.until_at
        for u in range(bisect.bisect_left(at, start), bisect.bisect_left(at, start + self.n)):
            yield at[u] - start, c.until[u]

    def anchors(self) -> Iterator[tuple[int, int, int, tuple[int, int, int, int]]]:
        """(position, anchored rule, the time the window must hold: microseconds or NONE, what it adds) of each
        anchor that is not None, in order."""
        c = self.columns
        width, at = c.width, c.anchor_at
        lo = self.start * width
        for x in range(bisect.bisect_left(at, lo), bisect.bisect_left(at, lo + self.n * width)):
            k, j = divmod(at[x] - lo, width)
            t = c.times[x]
            yield k, j, NONE if t == _NO_TIME else t, c.contributions[c.added[x]]
