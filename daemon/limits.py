"""Which agents get per-agent series (``[limits]``): a bound on what a log full of agent names can cost.

Every agent a log names costs a few dozen series per window in /metrics, rows in the daily history and
lines in the changelog's digest, so without a bound /metrics grows with whatever the logs name
(docs/performance.md, "Many agents"). The daemon exports at most ``max_agents`` agents, those with the most
recent decisions (ties: by name), and never one whose name is longer than ``max_agent_name`` UTF-8 bytes.
The others are still scored and shown by the API and pages; ``honesty_agents_over_limit`` says how many are
held back, by reason.

:func:`select` is pure and runs once per evaluation (the daemon's, or :func:`daemon.snapshot.build_snapshot`);
scrapes only read its result from the snapshot. :class:`HeldBackLog` names each agent once in the log.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from collectors.rfc3339 import to_us
from daemon.config import Limits

#: The reasons an agent is not exported, as ``honesty_agents_over_limit{reason=…}`` names them.
MAX_AGENTS = "max_agents"
NAME_TOO_LONG = "agent_name_too_long"
REASONS = (MAX_AGENTS, NAME_TOO_LONG)

T = TypeVar("T")
Activity = Callable[[Collection[str]], Mapping[str, datetime]]

log = logging.getLogger("honestyd.limits")


def name_bytes(agent: str) -> int:
    """The length of an agent name in UTF-8 bytes (a lone surrogate, legal in JSON, counts as its 3 bytes)."""
    return len(agent.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True)
class Exported:
    """The agents exported as series: every agent but those ``held`` back (agent → reason).

    The default exports everyone (a snapshot built without limits, as tests build them).
    ``max_name``, when set, also holds back an agent that was not listed (one named only in the config).
    """

    held: Mapping[str, str] = field(default_factory=dict)
    max_name: int | None = None
    #: The listed agents exported, sorted (None: every agent a window lists), so that a render walks only them.
    agents: tuple[str, ...] | None = None

    def items(self, agents: Mapping[str, T]) -> Iterator[tuple[str, T]]:
        """The exported entries of ``agents`` (a window's results, say), sorted by agent."""
        if self.agents is None:
            return ((a, v) for a, v in sorted(agents.items()) if a in self)
        return ((a, agents[a]) for a in self.agents if a in agents)

    def __contains__(self, agent: object) -> bool:
        if not isinstance(agent, str) or agent in self.held:
            return False
        return self.max_name is None or name_bytes(agent) <= self.max_name

    def over_limit(self) -> dict[str, int]:
        """How many listed agents are held back, for every reason (0 included)."""
        counts = dict.fromkeys(REASONS, 0)
        for reason in self.held.values():
            counts[reason] += 1
        return counts


def _recency(latest: Mapping[str, datetime]) -> Callable[[str], tuple[int, int, str]]:
    def key(agent: str) -> tuple[int, int, str]:
        at = latest.get(agent)
        # Most recent first; an agent with no decision up to the evaluation time last; then by name.
        return (0, -to_us(at), agent) if at is not None else (1, 0, agent)

    return key


def select(listed: Collection[str], limits: Limits, activity: Activity) -> Exported:
    """The agents of ``listed`` to export under ``limits``.

    ``activity(agents)`` gives each agent's latest decision time; it is asked only when more than
    ``max_agents`` agents have names short enough, so the common case costs one pass over the names.
    """
    held = {a: NAME_TOO_LONG for a in listed if name_bytes(a) > limits.max_agent_name}
    eligible = [a for a in listed if a not in held]
    if len(eligible) > limits.max_agents:
        ranked = sorted(eligible, key=_recency(activity(eligible)))
        held.update(dict.fromkeys(ranked[limits.max_agents:], MAX_AGENTS))
    return Exported(held, limits.max_agent_name, tuple(sorted(a for a in eligible if a not in held)))


def _shown(agent: str, most: int = 200) -> str:
    """An agent name for the log: quoted, and cut short when long (the formatter escapes what it holds)."""
    if len(agent) <= most:
        return repr(agent)
    return f"{agent[:most]!r}… ({name_bytes(agent)} bytes)"


class HeldBackLog:
    """Logs each agent once (WARNING) when it is first held back, not at every evaluation.

    At most ``names`` agents are named per evaluation; the others are counted in one more line (10,000
    agents held back at the first evaluation make one summary, not 10,000 lines). An agent is forgotten once
    it is no longer listed, so one that comes back and is held back again is named again.
    """

    def __init__(self, names: int = 10, logger: logging.Logger = log) -> None:
        self.names = names
        self.log = logger
        self._logged: set[str] = set()
        self._lock = threading.Lock()  # evaluations run in worker threads

    def note(self, exported: Exported, listed: Collection[str]) -> list[str]:
        """Log the agents newly held back in ``exported``; returns them (sorted)."""
        with self._lock:
            return self._note(exported, listed)

    def _note(self, exported: Exported, listed: Collection[str]) -> list[str]:
        new = sorted(a for a in exported.held if a not in self._logged)
        for agent in new[:self.names]:
            self.log.warning("agent %s is not exported to /metrics (%s); its scores stay in the API and pages",
                             _shown(agent), exported.held[agent])
        if len(new) > self.names:
            counts = {r: n for r in REASONS if (n := sum(1 for a in new[self.names:] if exported.held[a] == r))}
            self.log.warning("%d more agents are not exported to /metrics (%s); see honesty_agents_over_limit",
                             len(new) - self.names, ", ".join(f"{r} {n}" for r, n in counts.items()))
        listed_set = listed if isinstance(listed, (set, frozenset)) else set(listed)
        self._logged = {a for a in self._logged if a in listed_set}
        self._logged.update(new)
        return new
