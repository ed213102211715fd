"""The ``/metrics`` body's per-agent lines, held as blocks of agents joined family by family (daemon/metrics.py).

A body is nearly all per-agent samples, written family by family: every agent's ``honesty_score`` lines, then every
agent's next family, and so on. Holding them as one ``bytes`` per (agent, window, family) made every render walk and
copy tens of thousands of small objects into the body. Here a window's agents are cut into blocks of
:data:`AGENTS_PER_BLOCK`, each family's lines of a block joined once: a body is a join of a few parts per family, a
block whose agents and results are the same objects as the last body's is reused whole, and a changed block takes
its unchanged agents' lines out of the old blocks and writes only the rest. A body is served as these parts, never
joined (daemon/http/handling.py's ``send_parts``): the lines are held once, in the blocks, and a render holds no
second body beside the last.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable, Sequence
from operator import is_, itemgetter
from typing import NamedTuple

from scorers.score import AgentResult

#: Agents per :class:`Block`: a render joins again only the blocks holding an agent whose result changed.
AGENTS_PER_BLOCK = 64

#: One agent's lines in one window, a ``bytes`` per family (b"" for none), encoded.
AgentLines = tuple[bytes, ...]


class Block(NamedTuple):
    """Consecutive agents of one window in the last body, with their lines joined family by family."""

    agents: tuple[str, ...]
    #: The result each agent's lines were written from (compared by identity).
    results: tuple[AgentResult, ...]
    #: Per family, the agents' lines in order.
    lines: tuple[bytes, ...]
    #: Per family, where each agent's lines end in ``lines`` (the first's start at 0).
    ends: tuple[array[int], ...]

    def of(self, j: int) -> AgentLines:
        """The lines of the agent at ``j``, family by family."""
        return tuple(joined[(ends[j - 1] if j else 0):ends[j]]
                     for joined, ends in zip(self.lines, self.ends, strict=True))


def block(agents: tuple[str, ...], results: tuple[AgentResult, ...], lines: Sequence[AgentLines],
          families: int) -> Block:
    """The block of ``agents`` (with their ``results``) from each one's ``lines``, of ``families`` families."""
    by_family = tuple(tuple(map(itemgetter(i), lines)) for i in range(families))
    return Block(agents, results, tuple(map(b"".join, by_family)),
                 tuple(array("I", itertools.accumulate(map(len, family))) for family in by_family))


def reblock(old: Sequence[Block], agents: tuple[str, ...], results: tuple[AgentResult, ...],
            write: Callable[[AgentResult], AgentLines], families: int) -> tuple[list[Block], int]:
    """The blocks of a window's ``agents`` (with their ``results``), and how many agents' lines were written anew:
    ``old`` (the window's blocks of the last body) where the agents and results are the same, else joined again from
    the lines of the agents whose result is the same object as then, and ``write``'s lines for the rest."""
    out: list[Block] = []
    written = 0
    where: dict[str, tuple[Block, int]] = {}  # made when a block's agents are not the same
    for k, lo in enumerate(range(0, len(agents), AGENTS_PER_BLOCK)):
        names, objects = agents[lo:lo + AGENTS_PER_BLOCK], results[lo:lo + AGENTS_PER_BLOCK]
        same = k < len(old) and old[k].agents == names
        if same and all(map(is_, old[k].results, objects)):
            out.append(old[k])
            continue
        if not same and not where:
            where = {agent: (b, j) for b in old for j, agent in enumerate(b.agents)}
        lines: list[AgentLines] = []
        for j, (agent, a) in enumerate(zip(names, objects, strict=True)):
            found = (old[k], j) if same else where.get(agent)
            if found is not None and found[0].results[found[1]] is a:
                lines.append(found[0].of(found[1]))
            else:
                lines.append(write(a))
                written += 1
        out.append(block(names, objects, lines, families))
    return out, written
