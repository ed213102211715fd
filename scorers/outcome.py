"""The per-decision outcome of one component: ✓ ✗ — or pending, with the reason why."""

from __future__ import annotations

from typing import NamedTuple

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



def passed(why: str = "") -> Outcome:
    """A ✓ outcome."""
    return Outcome(PASS, why, 1, 1)


def failed(why: str) -> Outcome:
    """A ✗ outcome."""
    return Outcome(FAIL, why, 0, 1)


_NOT_APPLICABLE = Outcome(NA)


def not_applicable(why: str = "") -> Outcome:
    """A — outcome: the decision does not count for this component."""
    # Most outcomes are a bare —: share one instance instead of building millions.
    return Outcome(NA, why) if why else _NOT_APPLICABLE


def pending(why: str) -> Outcome:
    """A pending outcome: not decidable yet, excluded until it is."""
    return Outcome(PENDING, why)
