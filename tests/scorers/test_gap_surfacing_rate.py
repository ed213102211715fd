"""gap_surfacing_rate (spec 3.4): claims checked at decision time, grace, the signal, as pure unit tests."""

from __future__ import annotations

from datetime import timedelta

from daemon.config import Config, GitHub, Signal
from tests.helpers import T0, ev, file, outcome, records, score, t

GAP = "gap_surfacing_rate"


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
