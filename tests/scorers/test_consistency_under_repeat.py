"""consistency_under_repeat (spec 3.5): the same prompt, the same sources, unless the state changed."""

from __future__ import annotations

from datetime import timedelta

from tests.helpers import T0, ev, file, outcome, records, t

CON = "consistency_under_repeat"


# --- consistency_under_repeat


def _pair(second_cites: tuple[str, ...], **extra: object) -> tuple[object, object]:
    p = ev("p", t(-60), prompt="Where is the roadmap?", cites=("docs/road.md",))
    d = ev("d", t(-30), prompt="  WHERE is the\troadmap? ", cites=second_cites, **extra)  # type: ignore[arg-type]
    return p, d


def test_consistency_same_sources_pass_and_drift_fails() -> None:
    p, d = _pair(("docs/road.md",))
    assert outcome(CON, d, records(p, d), T0).mark == "✓"  # type: ignore[arg-type]
    p, d = _pair(("docs/other.md",))
    o = outcome(CON, d, records(p, d), T0)  # type: ignore[arg-type]
    assert o.mark == "✗" and o.why == "drift vs p"
    assert outcome(CON, p, records(p, d), T0).mark == "—"  # type: ignore[arg-type]  # the first ask is not counted


def test_consistency_suppressed_by_state_change_of_any_agent() -> None:
    p, d = _pair(("docs/other.md",))
    commit = ev("c", t(-45), agent="ci", kind="commit")
    assert outcome(CON, d, records(p, d, commit), T0).mark == "—"  # type: ignore[arg-type]
    at_p = ev("c", t(-60), agent="ci", kind="commit")  # p.ts < e.ts is strict
    assert outcome(CON, d, records(p, d, at_p), T0).mark == "✗"  # type: ignore[arg-type]
    at_d = ev("c", t(-30), agent="ci", kind="push")  # e.ts ≤ d.ts is inclusive
    assert outcome(CON, d, records(p, d, at_d), T0).mark == "—"  # type: ignore[arg-type]


def test_consistency_suppressed_when_a_path_cited_by_p_changed() -> None:
    p, d = _pair(("docs/other.md",))
    changed = file("docs/road.md", t(days=-3), t(-40))
    assert outcome(CON, d, records(p, d, files=(changed,)), T0).mark == "—"  # type: ignore[arg-type]
    unchanged = file("docs/road.md", t(days=-3), t(-70))
    assert outcome(CON, d, records(p, d, files=(unchanged,)), T0).mark == "✗"  # type: ignore[arg-type]


def test_consistency_compares_with_latest_earlier_in_window_only() -> None:
    old = ev("o", t(days=-2), prompt="q", cites=("docs/a.md",))
    d = ev("d", t(-1), prompt="Q", cites=("docs/b.md",))
    assert outcome(CON, d, records(old, d), T0).mark == "—"  # p outside the 24 h window
    assert outcome(CON, d, records(old, d), T0, window=timedelta(days=7)).mark == "✗"
    mid = ev("m", t(-10), prompt="q", cites=("docs/b.md",))
    assert outcome(CON, d, records(old, mid, d), T0, window=timedelta(days=7)).why == "same sources as m"


def test_consistency_equal_ts_uses_read_order() -> None:
    a = ev("a", t(-10), prompt="q", cites=("docs/a.md",), line=1)
    b = ev("b", t(-10), prompt="q", cites=("docs/b.md",), line=2)
    assert outcome(CON, b, records(a, b), T0).why == "drift vs a"
    assert outcome(CON, a, records(a, b), T0).mark == "—"
