"""When honestyd opens a review by itself (pure): the opening rule.

Two reasons, judged on each evaluation for every agent with per-agent series ([limits]) whose dashboard (24 h)
result is not INSUFFICIENT:

* ``below``: the dashboard score is under ``alert_below``;
* ``drop``: it is more than ``drop_alert`` under the agent's own 7 d score (never against an INSUFFICIENT 7 d one).

A reason that holds is *firing*. A review for (agent, reason) is due when it fires, none is open for it, and

* it did not fire at the previous evaluation of this run: it has just begun (a first one opens, one closed before
  reopens); or
* this is the first evaluation of the run, and no review for (agent, reason) exists at all: an agent already below
  at start gets one ``below`` review, once (a restart finds it in the queue, open or closed, and opens nothing);
  a ``drop`` at start is opened only for an agent that is not also below (its ``below`` review says it all), so an
  agent always low is never said to have dropped.

A review a reviewer closed while its reason still fires is not reopened until the reason has stopped firing and
fired again ("the agent slips again"). Nothing here reads a clock or a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from daemon.reviews.queue import Queue
from daemon.snapshot import Snapshot
from scorers.score import AgentResult

#: The tolerance of the displayed percent (spec 4), so 0.7 is not "below 0.7" (as the alert rules' 1e-9).
FLOAT_SLACK = 1e-9

Key = tuple[str, str]
#: The reasons a review opens for, in the order they are judged.
REASONS = ("below", "drop")


@dataclass(frozen=True)
class Condition:
    """One agent's standing at an evaluation, for one reason: what a review of it says when it opens."""

    agent: str
    reason: str
    window: str
    result: AgentResult
    reference_window: str | None
    reference: AgentResult | None
    threshold: float
    drop_alert: float

    @property
    def key(self) -> Key:
        """(agent, reason): one review at a time for each."""
        return (self.agent, self.reason)


def window_names(snapshot: Snapshot) -> tuple[str | None, str | None]:
    """(dashboard window, comparison window): "24h" else the first; "7d" else the next configured one."""
    names = [name for name, _ in snapshot.config.scoring.windows if name in snapshot.windows]
    if not names:
        return None, None
    dash = "24h" if "24h" in names else names[0]
    rest = [n for n in names if n != dash]
    week = "7d" if "7d" in rest else (rest[0] if rest else None)
    return dash, week


def standing(snapshot: Snapshot, agent: str, reason: str) -> Condition | None:
    """The condition of ``agent`` for ``reason`` at ``snapshot``, firing or not; None when its dashboard result is
    missing or INSUFFICIENT, or it has no per-agent series ([limits])."""
    dash, week = window_names(snapshot)
    if dash is None or agent not in snapshot.exported:
        return None
    now = _sufficient(snapshot.windows[dash].agents.get(agent))
    if now is None:
        return None
    return _condition(snapshot, agent, reason, dash, now, week, _reference(snapshot, week, agent))


def _sufficient(result: AgentResult | None) -> AgentResult | None:
    """``result`` when it has a score (not missing, not INSUFFICIENT), else None."""
    return None if result is None or result.insufficient or result.score is None else result


def _reference(snapshot: Snapshot, week: str | None, agent: str) -> AgentResult | None:
    """The agent's comparison result, when it has a score."""
    return _sufficient(snapshot.windows[week].agents.get(agent)) if week is not None else None


def _condition(snapshot: Snapshot, agent: str, reason: str, dash: str, now: AgentResult, week: str | None,
               ref: AgentResult | None) -> Condition:
    s = snapshot.config.scoring
    return Condition(agent, reason, dash, now, week, ref, s.alert_below, s.drop_alert)


def fires(c: Condition) -> bool:
    """True iff the condition's reason holds."""
    score = c.result.score
    assert score is not None  # standing() keeps only sufficient results
    return holds(c.reason, score, None if c.reference is None else c.reference.score, c.threshold, c.drop_alert)


def holds(reason: str, score: float, reference: float | None, threshold: float, drop_alert: float) -> bool:
    """:func:`fires` of the condition these figures make (``reference``: the comparison score, if any)."""
    if reason == "below":
        return score < threshold - FLOAT_SLACK
    return reference is not None and reference - score > drop_alert + FLOAT_SLACK


def writable(agent: str) -> bool:
    """False for a name holding a lone surrogate (a JSON "\\ud800" in Markdown front matter): no review file line can
    hold it as UTF-8, so no review is opened for it (its series in /metrics still show it)."""
    try:
        agent.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def firing(snapshot: Snapshot) -> dict[Key, Condition]:
    """Every (agent, reason) that fires at ``snapshot``, among the agents with per-agent series whose name a review
    file can hold."""
    dash, week = window_names(snapshot)
    if dash is None:
        return {}
    s = snapshot.config.scoring
    found: dict[Key, Condition] = {}
    # Run after every evaluation, on the event loop, for every agent: a Condition is made only for a reason that holds.
    for agent, result in snapshot.exported.items(snapshot.windows[dash].agents):
        now = _sufficient(result)
        if now is None or now.score is None or not writable(agent):
            continue
        ref = _reference(snapshot, week, agent)
        reference = None if ref is None else ref.score
        for reason in REASONS:
            if holds(reason, now.score, reference, s.alert_below, s.drop_alert):
                found[(agent, reason)] = _condition(snapshot, agent, reason, dash, now, week, ref)
    return found


def due(now: Mapping[Key, Condition], queue: Queue, previous: frozenset[Key] | None) -> list[Condition]:
    """The reviews to open (or reopen) now, in agent then reason order: see the module.

    ``now``: what fires at this evaluation (:func:`firing`); ``previous``: what fired at the previous evaluation of
    this run, None at the first one after a start.
    """
    out = []
    opened = queue.keys(open_only=True)  # once, not a walk of the queue per key (hundreds of keys, on the event loop)
    known = queue.keys() if previous is None else set()
    for key in sorted(now):
        if key in opened:
            continue  # one at a time: it joins the open one
        if previous is not None:
            if key not in previous:
                out.append(now[key])
        elif key not in known and not (key[1] == "drop" and (key[0], "below") in now):
            out.append(now[key])
    return out
