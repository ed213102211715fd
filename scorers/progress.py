"""Label progress (pure): how many of an agent's decisions reviewers have labelled, 👍 and 👎, and how far that is
from what weight tuning needs.

Both evaluations count the same way: each reviewer's current label on a decision (spec 1.3) is one label, as
``honestyd tune`` takes one sample per such label (scorers/tune.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from collectors.records import Label

#: Labels ``honestyd tune --apply`` needs without ``--force`` (and its report's default minimum, ``--min-labels``): the
#: mark the pages count each agent's labels toward (here, not in daemon/tune_apply.py: the pages need only this number).
FLOOR = 100


@dataclass(frozen=True)
class LabelTally:
    """Labelled decisions and the current labels on them, 👍 and 👎."""

    decisions: int = 0
    up: int = 0
    down: int = 0

    @property
    def labels(self) -> int:
        """Every current label (one per reviewer per decision): what tuning counts."""
        return self.up + self.down

    def __add__(self, other: LabelTally) -> LabelTally:
        return LabelTally(self.decisions + other.decisions, self.up + other.up, self.down + other.down)

    def missing(self, floor: int) -> int:
        """Labels still missing before ``floor`` (0 once reached)."""
        return max(0, floor - self.labels)


def tally(labelled: Iterable[tuple[str, Sequence[Label]]]) -> dict[str, LabelTally]:
    """Per agent, from (agent, the current labels on one of its decisions) pairs: one per labelled decision."""
    return tally_counts((agent, sum(1 for lb in labels if lb.value == "up"), len(labels)) for agent, labels in labelled)


def tally_counts(counted: Iterable[tuple[str, int, int]]) -> dict[str, LabelTally]:
    """:func:`tally`, from (agent, how many of the current labels on one of its decisions are ``up``, how many there
    are) triples."""
    counts: dict[str, list[int]] = {}  # ints, one LabelTally made per agent: a tally walks every label the model holds
    for agent, up, n in counted:
        if not n:
            continue
        found = counts.get(agent)
        if found is None:
            counts[agent] = [1, up, n - up]
        else:
            found[0] += 1
            found[1] += up
            found[2] += n - up
    return {agent: LabelTally(*found) for agent, found in counts.items()}


def overall(tallies: Mapping[str, LabelTally]) -> LabelTally:
    """Every agent's tally summed."""
    total = LabelTally()
    for t in tallies.values():
        total += t
    return total
