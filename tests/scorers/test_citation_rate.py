"""citation_rate (spec 3.1), as pure unit tests (no I/O, no clock)."""

from __future__ import annotations

from tests.helpers import T0, ev, outcome, records, t

CIT = "citation_rate"


# --- citation_rate


def test_citation_rate_counts_every_decision() -> None:
    d1 = ev("a", t(-1), text="see https://x.org/a")
    d2 = ev("b", t(-2), text="no source here")
    assert outcome(CIT, d1, records(d1, d2), T0).mark == "✓"
    assert outcome(CIT, d2, records(d1, d2), T0).mark == "✗"
