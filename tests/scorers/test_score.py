"""The score of spec section 4 over the windows: window edges, the floor of five, deduplication, rounding, weights."""

from __future__ import annotations

import pytest

from daemon.config import Config, GitHub
from tests.helpers import T0, ev, file, records, score, t

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
