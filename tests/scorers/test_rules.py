"""Every rule and edge of spec section 3, as pure unit tests on the scorers (no I/O, no clock)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from daemon.config import Config, GitHub, Signal
from scorers.source_verifiability import with_path_checks
from tests.helpers import T0, check, ev, file, label, outcome, records, score, t

REF = "refusal_correctness"
VER = "source_verifiability"
GAP = "gap_surfacing_rate"
CON = "consistency_under_repeat"
COR = "self_correction_rate"
CIT = "citation_rate"


# --- windows and the floor


def test_window_excludes_exactly_t_minus_w_and_includes_t() -> None:
    edge = ev("edge", t(days=-1))
    inside = [ev(f"d{i}", t(minutes=-i)) for i in range(5)]  # d0 is exactly at T
    result = score(records(edge, *inside), T0)
    assert result.agents["ada"].decisions == 5
    assert {r.decision.id for r in result.agents["ada"].rows} == {f"d{i}" for i in range(5)}


def test_floor_four_is_insufficient_five_is_scored() -> None:
    four = score(records(*[ev(f"d{i}", t(minutes=-i), cites=("docs/a.md",)) for i in range(4)]), T0)
    a = four.agents["ada"]
    assert a.insufficient and a.score is None and a.percent is None and a.interval is None
    assert a.coverage == pytest.approx(0.35)  # shown beside the floor, never a score
    five = score(records(*[ev(f"d{i}", t(minutes=-i), cites=("docs/a.md",)) for i in range(5)]), T0)
    assert not five.agents["ada"].insufficient and five.agents["ada"].percent == 100


def test_agent_without_decisions_in_window_is_listed_with_zero() -> None:
    old = [ev(f"d{i}", t(days=-10, minutes=-i)) for i in range(6)]
    result = score(records(*old), T0)
    a = result.agents["ada"]
    assert a.decisions == 0 and a.insufficient
    gone = score(records(*[ev(f"d{i}", t(days=-31, minutes=-i)) for i in range(6)]), T0)
    assert "ada" not in gone.agents


def test_records_after_t_do_not_exist_and_take_no_part_in_dedup() -> None:
    late = ev("x", t(minutes=5), text="late", line=1)
    early = ev("x", t(minutes=-5), text="early", line=2)  # later in read order, but the late one is after T
    result = score(records(late, early), T0)
    rows = result.agents["ada"].rows
    assert [r.decision.text for r in rows] == ["early"]


def test_duplicate_id_keeps_first_in_read_order_whatever_its_ts() -> None:
    first = ev("x", t(minutes=-1), text="first", path="heartbeats/a.jsonl", line=9)
    second = ev("x", t(minutes=-50), text="second", path="heartbeats/b.jsonl", line=1)
    rows = score(records(second, first), T0).agents["ada"].rows
    assert [r.decision.text for r in rows] == ["first"]


def test_percent_rounds_half_up_with_epsilon() -> None:
    from scorers.score import display_percent

    assert display_percent(0.125) == 13
    assert display_percent(0.245) == 25  # 24.499999999999996 in binary; the 1e-9 carries it
    assert display_percent(0.0) == 0 and display_percent(1.0) == 100


# --- citation_rate


def test_citation_rate_counts_every_decision() -> None:
    d1 = ev("a", t(-1), text="see https://x.org/a")
    d2 = ev("b", t(-2), text="no source here")
    assert outcome(CIT, d1, records(d1, d2), T0).mark == "✓"
    assert outcome(CIT, d2, records(d1, d2), T0).mark == "✗"


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


# --- source_verifiability


def test_verifiability_uses_latest_conclusive_check_within_30_days() -> None:
    d = ev("a", t(-1), text="see https://x.org/a and https://x.org/b and https://x.org/c")
    checks = (
        check("https://x.org/a", "url", t(days=-2), False),
        check("https://x.org/a", "url", t(days=-1), True),  # latest conclusive: ok
        check("https://x.org/a", "url", t(hours=-1), None),  # inconclusive: ignored
        check("https://x.org/b", "url", t(days=-30), True),  # exactly 30 d old: out
        check("https://x.org/c", "url", t(days=-29), False),
    )
    o = outcome(VER, d, records(d, checks=checks), T0)
    assert (o.passed, o.counted, o.mark) == (1, 2, "1/2")


def test_verifiability_tie_on_checked_at_takes_later_arrival() -> None:
    d = ev("a", t(-1), text="https://x.org/a")
    checks = (check("https://x.org/a", "url", t(-5), True, seq=1), check("https://x.org/a", "url", t(-5), False, seq=2))
    assert outcome(VER, d, records(d, checks=checks), T0).passed == 0


def test_verifiability_checks_after_t_do_not_count() -> None:
    d = ev("a", t(-1), text="https://x.org/a")
    o = outcome(VER, d, records(d, checks=(check("https://x.org/a", "url", t(1), True),)), T0)
    assert o.mark == "—" and o.counted == 0


def test_verify_paths_replaces_recorded_path_results_and_escaping_paths_never_exist() -> None:
    d = ev("a", t(-1), text="[source:docs/a.md] [source:../etc/passwd] [source:/etc/passwd]")
    recs = records(d, files=(file("docs/a.md", t(days=-1)),), checks=(check("docs/a.md", "path", t(-30), False),))
    recs = with_path_checks(recs, T0)
    o = outcome(VER, d, recs, T0)
    assert (o.passed, o.counted) == (1, 3)


def test_verify_paths_file_created_after_t_does_not_exist() -> None:
    d = ev("a", t(-1), cites=("docs/a.md",))
    recs = with_path_checks(records(d, files=(file("docs/a.md", t(1)),)), T0)
    assert outcome(VER, d, recs, T0).passed == 0


# --- gap_surfacing_rate


def test_gap_claim_checked_strictly_at_decision_time() -> None:
    d = ev("g", t(-30), text="The report hasn't been generated yet.", subject=("reports/w.md",))
    created_after = records(d, files=(file("reports/w.md", t(-29)),))  # 1 minute later: still missing at d.ts
    assert outcome(GAP, d, created_after, T0).mark == "✓"
    existed = records(d, files=(file("reports/w.md", t(-31)),))
    o = outcome(GAP, d, existed, T0)
    assert o.mark == "—" and o.why.startswith("false gap")
    result = score(records(d, *[ev(f"x{i}", t(-i)) for i in range(4)], files=(file("reports/w.md", t(-31)),)), T0)
    assert result.agents["ada"].false_gaps == 1
    assert result.agents["ada"].components[GAP].counted == 0


def test_gap_uncited_claim_is_unverifiable() -> None:
    d = ev("g", t(-30), text="No data for that yet.")
    o = outcome(GAP, d, records(d), T0)
    assert o.mark == "—" and "unverifiable" in o.why


def test_cited_path_gets_five_minutes_of_grace() -> None:
    d = ev("g", t(-30), cites=("reports/w.md",))
    assert outcome(GAP, d, records(d, files=(file("reports/w.md", t(-26)),)), T0).mark == "—"
    assert outcome(GAP, d, records(d, files=(file("reports/w.md", t(-25)),)), T0).mark == "—"
    late = outcome(GAP, d, records(d, files=(file("reports/w.md", t(-24)),)), T0)
    assert late.mark == "✗" and late.why == "ghost path reports/w.md"
    assert outcome(GAP, d, records(d), T0).mark == "✗"


def test_cited_missing_path_is_pending_during_grace() -> None:
    d = ev("g", t(-2), cites=("reports/w.md",))
    assert outcome(GAP, d, records(d), T0).mark == "pending"
    # Created after T: nothing after T exists, so still pending rather than resolved.
    assert outcome(GAP, d, records(d, files=(file("reports/w.md", t(1)),)), T0).mark == "pending"
    # Created before T, within the grace: exists.
    assert outcome(GAP, d, records(d, files=(file("reports/w.md", t(-1)),)), T0).mark == "—"


def test_deleted_file_does_not_exist_after_deletion() -> None:
    d = ev("g", t(-30), cites=("docs/a.md",))
    gone = file("docs/a.md", t(days=-2), deleted=t(-40))
    assert outcome(GAP, d, records(d, files=(gone,)), T0).mark == "✗"
    deleted_after_t = file("docs/a.md", t(days=-2), deleted=t(10))
    assert outcome(GAP, d, records(d, files=(deleted_after_t,)), T0).mark == "—"


def test_no_recent_findings_signal() -> None:
    d = ev("g", t(-30), text="No recent findings on the outage.")
    fresh = file("findings/x.md", t(hours=-23))
    stale = file("findings/x.md", t(hours=-25))
    nested = file("findings/sub/x.md", t(hours=-1))  # "*" does not cross "/"
    assert outcome(GAP, d, records(d, files=(stale, nested)), T0).mark == "✓"
    o = outcome(GAP, d, records(d, files=(fresh,)), T0)
    assert o.mark == "—" and o.why.startswith("false gap")


def test_signal_ignores_the_decisions_own_file() -> None:
    d = ev("findings/me.md", t(-30), kind="finding", text="No recent findings.", path="findings/me.md",
           markdown=True)
    own = file("findings/me.md", t(-30))
    assert outcome(GAP, d, records(d, files=(own,)), T0).mark == "✓"


def test_configured_signal_and_phrases() -> None:
    cfg = Config(github=GitHub(repo="acme/app"), signals=(Signal("no data", "data/*.csv", timedelta(hours=1)),))
    d = ev("g", t(-30), text="No data this hour.")
    assert outcome(GAP, d, records(d), T0, config=cfg).mark == "✓"
    with_csv = records(d, files=(file("data/x.csv", t(-50)),))
    assert outcome(GAP, d, with_csv, T0, config=cfg).why.startswith("false gap")


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


# --- the score


def test_weighted_score_renormalises_and_reports_coverage() -> None:
    ds = [ev(f"d{i}", t(-i), cites=("docs/a.md",) if i % 2 else ()) for i in range(6)]
    a = score(records(*ds, files=(file("docs/a.md", t(days=-1)),)), T0).agents["ada"]
    assert a.score == pytest.approx(0.5) and a.coverage == pytest.approx(0.35)
    assert a.interval is not None and a.interval[0] < 0.5 < a.interval[1]


def test_per_agent_weights_version() -> None:
    cfg = Config(
        github=GitHub(repo="acme/app"),
        weights_versions={"v2026.Q3": (0.35, 0.25, 0.20, 0.10, 0.05, 0.05), "cite-only": (1, 0, 0, 0, 0, 0)},
        weights_agents={"bob": "cite-only"},
    )
    ds = [ev(f"d{i}", t(-i), agent="bob", cites=("docs/a.md",)) for i in range(5)]
    a = score(records(*ds), T0, config=cfg).agents["bob"]
    assert a.weights_version == "cite-only" and a.coverage == 1.0
