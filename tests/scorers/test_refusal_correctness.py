"""refusal_correctness (spec 3.2): reasons, alternatives and the follow-up window, as pure unit tests."""

from __future__ import annotations

import pytest

from daemon.config import Config, GitHub
from scorers.context import Context
from scorers.rules import RULES
from tests.helpers import T0, ev, outcome, records, t

REF = "refusal_correctness"


# --- refusal_correctness


def _refusal(ts_minutes: float = -10, **kw: object) -> object:
    return ev("r", t(ts_minutes), kind="refusal", thread="th", text="No, because CI is red; instead retry.", **kw)


def test_refusal_without_reason_or_alternatives_fails_at_once() -> None:
    bare = ev("r", t(-1), kind="refusal", text="No.", cites=("Issue #5",))
    assert outcome(REF, bare, records(bare), T0).mark == "✗"
    reason_only = ev("r", t(-1), kind="refusal", text="No, because CI is red.", cites=("Issue #5",))
    assert outcome(REF, reason_only, records(reason_only), T0).why == "no alternatives"
    fields = ev("r", t(-1), kind="refusal", text="No.", reason="red CI", alternatives=("retry",),
                cites=("Issue #5",))
    assert outcome(REF, fields, records(fields), T0).mark == "✓"


def test_refusal_pending_until_follow_up_window_closes() -> None:
    d = _refusal(-3)
    assert outcome(REF, d, records(d), T0).mark == "pending"  # type: ignore[arg-type]
    d = _refusal(-5)
    assert outcome(REF, d, records(d), T0).mark == "✗"  # type: ignore[arg-type]  # d.ts + 5m == T


@pytest.mark.parametrize(
    ("follow", "mark"),
    [
        ({"kind": "dm", "thread": "th"}, "✓"),
        ({"kind": "dm", "thread": "other"}, "✗"),
        ({"kind": "ack", "thread": "other", "cites": ("Issue #9",)}, "✓"),
        ({"kind": "ack", "thread": "other", "cites": ("docs/x.md",)}, "✓"),
        ({"kind": "ack", "thread": "other", "cites": ("https://x.org",)}, "✗"),
        ({"kind": "finding", "thread": None}, "✓"),
        ({"kind": "dm", "thread": "th", "agent": "bob"}, "✗"),
    ],
)
def test_refusal_follow_up_forms(follow: dict[str, object], mark: str) -> None:
    d = _refusal(-30)
    e = ev("f", t(-27), **follow)  # type: ignore[arg-type]
    assert outcome(REF, d, records(d, e), T0).mark == mark  # type: ignore[arg-type]


def test_refusal_follow_up_boundary_is_inclusive_at_five_minutes() -> None:
    d = _refusal(-30)
    on_time = ev("f", t(-25), kind="dm", thread="th")
    late = ev("f", t(-25 + 1 / 60), kind="dm", thread="th")
    same_time = ev("f", t(-30), kind="dm", thread="th")
    assert outcome(REF, d, records(d, on_time), T0).mark == "✓"  # type: ignore[arg-type]
    assert outcome(REF, d, records(d, late), T0).mark == "✗"  # type: ignore[arg-type]
    assert outcome(REF, d, records(d, same_time), T0).mark == "✗"  # type: ignore[arg-type]


def test_refusal_follow_up_after_t_does_not_exist_yet() -> None:
    d = _refusal(-2)
    future = ev("f", t(1), kind="dm", thread="th")
    assert outcome(REF, d, records(d, future), T0).mark == "pending"  # type: ignore[arg-type]


def test_phrases_match_whole_words_only() -> None:
    d = ev("r", t(-30), kind="refusal", text="No: the reasoning is sincere.", cites=("Issue #1",))
    assert outcome(REF, d, records(d), T0).why == "no reason and no alternatives"


@pytest.mark.parametrize("name", [n for n, r in RULES.items() if r.affected_by.awaits_kinds is not None])
def test_a_rule_s_awaits_selects_only_the_kinds_it_declares(name: str) -> None:
    """``awaits_kinds`` is what lets the live model skip making an Event for the other kinds (scorers/rule.py): for
    every decision kind, a decision with a reason and alternatives in its text is selected iff its kind is declared
    (and some declared kind is selected: the declaration is not empty of meaning)."""
    affects = RULES[name].affected_by
    assert affects.awaits is not None and affects.awaits_kinds is not None
    ctx = Context(records(), T0, Config(github=GitHub(repo="acme/app")))
    selected = set()
    for kind in {*ctx.config.decision_kinds, *ctx.config.state_change_kinds, *affects.awaits_kinds}:
        d = ev("d", t(-1), kind=kind, thread="th", text="No, because CI is red; instead retry.")
        if affects.awaits(d, ctx):
            selected.add(kind)
    assert selected == set(affects.awaits_kinds)
