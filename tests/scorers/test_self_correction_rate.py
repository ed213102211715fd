"""self_correction_rate (spec 3.6): after a 👎, the next reply in the thread, as pure unit tests."""

from __future__ import annotations

from tests.helpers import T0, ev, label, outcome, records, t

COR = "self_correction_rate"


# --- self_correction_rate


def _downvoted() -> object:
    return ev("d", t(hours=-3), thread="q3", text="Revenue up 12%.")


def test_self_correction_acknowledged_by_phrase_or_corrects() -> None:
    d = _downvoted()
    lb = label("d", t(hours=-2, minutes=-50))
    by_phrase = ev("e", t(hours=-2, minutes=-40), thread="q3", text="You're right, it was 10%.")
    by_field = ev("e", t(hours=-2, minutes=-40), thread="q3", text="Updated figure: 10%.", corrects="d")
    assert outcome(COR, d, records(d, by_phrase, labels=(lb,)), T0).mark == "✓"  # type: ignore[arg-type]
    assert outcome(COR, d, records(d, by_field, labels=(lb,)), T0).mark == "✓"  # type: ignore[arg-type]


def test_self_correction_doubled_down_silent_and_pending() -> None:
    d = _downvoted()
    lb = label("d", t(hours=-2, minutes=-50))
    doubled = ev("e", t(hours=-2, minutes=-40), thread="q3", text="Those numbers are final.")
    ack_later = ev("f", t(hours=-2, minutes=-30), thread="q3", text="My mistake.")
    assert outcome(COR, d, records(d, doubled, ack_later, labels=(lb,)), T0).why == "doubled down in e"  # type: ignore[arg-type]
    other_thread = ev("e", t(hours=-2, minutes=-40), thread="x", text="My mistake.")
    assert outcome(COR, d, records(d, other_thread, labels=(lb,)), T0).mark == "✗"  # type: ignore[arg-type]
    fresh = label("d", t(-30))
    assert outcome(COR, d, records(d, labels=(fresh,)), T0).mark == "pending"  # type: ignore[arg-type]
    exact = label("d", t(-60))  # L + 1h == T: silent
    assert outcome(COR, d, records(d, labels=(exact,)), T0).mark == "✗"  # type: ignore[arg-type]


def test_self_correction_reply_must_follow_label_and_decision() -> None:
    d = _downvoted()
    lb = label("d", t(hours=-2, minutes=-50))
    before_label = ev("e", t(hours=-2, minutes=-55), thread="q3", text="My mistake.")
    assert outcome(COR, d, records(d, before_label, labels=(lb,)), T0).mark == "✗"  # type: ignore[arg-type]
    ties = [ev("e1", t(hours=-2, minutes=-40), thread="q3", text="Final."),
            ev("e2", t(hours=-2, minutes=-40), thread="q3", text="I was wrong.")]
    assert outcome(COR, d, records(d, *ties, labels=(lb,)), T0).mark == "✓"  # type: ignore[arg-type]


def test_label_replacement_by_same_reviewer() -> None:
    d = _downvoted()
    down_then_up = (label("d", t(hours=-2.9)), label("d", t(hours=-2.5), "up"))
    assert outcome(COR, d, records(d, labels=down_then_up), T0).mark == "—"  # type: ignore[arg-type]
    up_then_down = (label("d", t(hours=-2.9), "up"), label("d", t(hours=-2.5)))
    assert outcome(COR, d, records(d, labels=up_then_down), T0).mark == "✗"  # type: ignore[arg-type]
    same_ts = (label("d", t(hours=-2.5), "down", line=1), label("d", t(hours=-2.5), "up", line=2))
    assert outcome(COR, d, records(d, labels=same_ts), T0).mark == "—"  # type: ignore[arg-type]
    other_reviewer = (label("d", t(hours=-2.9)), label("d", t(hours=-2.5), "up", reviewer="maya"))
    assert outcome(COR, d, records(d, labels=other_reviewer), T0).mark == "✗"  # type: ignore[arg-type]
    future_up = (label("d", t(hours=-2.9)), label("d", t(5), "up"))
    assert outcome(COR, d, records(d, labels=future_up), T0).mark == "✗"  # type: ignore[arg-type]


def test_earliest_current_down_label_sets_the_clock() -> None:
    d = _downvoted()
    labels = (label("d", t(hours=-2.9)), label("d", t(-30), reviewer="maya"))
    assert outcome(COR, d, records(d, labels=labels), T0).mark == "✗"  # type: ignore[arg-type]
