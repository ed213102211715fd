"""The per-decision outcome of one component: ✓ ✗ — or pending, with the reason why."""

from __future__ import annotations

from typing import Any, NamedTuple

PASS, FAIL, NA, PENDING = "✓", "✗", "—", "pending"


class Outcome(NamedTuple):
    """``mark`` is the audit cell (✓ ✗ — pending, or resolved/checked for source_verifiability);
    ``passed``/``counted`` are what it adds to the component's ratio.
    """

    mark: str
    why: str = ""
    passed: int = 0
    counted: int = 0

    @property
    def pending(self) -> bool:
        """True when the outcome cannot be decided yet (excluded from the ratio)."""
        return self.mark == PENDING


# The constructors below run for every rule of every decision: they build the tuple directly (the same value as
# Outcome(...), without the extra call of its generated __new__).
_new: Any = tuple.__new__


def passed(why: str = "") -> Outcome:
    """A ✓ outcome."""
    outcome: Outcome = _new(Outcome, (PASS, why, 1, 1))
    return outcome


def failed(why: str) -> Outcome:
    """A ✗ outcome."""
    outcome: Outcome = _new(Outcome, (FAIL, why, 0, 1))
    return outcome


#: A bare —, the most common outcome of all: one shared instance instead of millions (rules return it directly).
NOT_APPLICABLE = Outcome(NA)


def not_applicable(why: str = "") -> Outcome:
    """A — outcome: the decision does not count for this component."""
    return Outcome(NA, why) if why else NOT_APPLICABLE


def pending(why: str) -> Outcome:
    """A pending outcome: not decidable yet, excluded until it is."""
    outcome: Outcome = _new(Outcome, (PENDING, why, 0, 0))
    return outcome
