"""source_verifiability (spec 3.3): the latest conclusive check, path checks at T, as pure unit tests."""

from __future__ import annotations

from scorers.source_verifiability import with_path_checks
from tests.helpers import T0, check, ev, file, outcome, records, t

VER = "source_verifiability"


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
