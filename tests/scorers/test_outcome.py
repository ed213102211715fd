"""Outcomes (scorers/outcome.py): the constructors build the same values as the NamedTuple itself."""

from __future__ import annotations

from scorers.outcome import FAIL, NA, NOT_APPLICABLE, PASS, PENDING, Outcome, failed, not_applicable, passed, pending


def test_constructors_are_the_named_tuple() -> None:
    cases = [(passed("x"), Outcome(PASS, "x", 1, 1)), (passed(), Outcome(PASS, "", 1, 1)),
             (failed("y"), Outcome(FAIL, "y", 0, 1)), (pending("z"), Outcome(PENDING, "z", 0, 0)),
             (not_applicable("w"), Outcome(NA, "w", 0, 0)), (not_applicable(), Outcome(NA))]
    for built, expected in cases:
        assert built == expected and type(built) is Outcome
        assert built.passed == expected.passed and built.counted == expected.counted
    assert pending("z").pending and not passed().pending
    assert not_applicable() is NOT_APPLICABLE
