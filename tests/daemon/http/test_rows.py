"""daemon/http/rows.py: the agent page's query, filters, paging and rows as shown, over real scored decisions."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collectors.records import Label
from daemon.config import COMPONENTS
from daemon.http.rows import PER_PAGE, TEXT_HEAD, AgentQuery, paged, parse_query, row_view, select, split_text
from scorers.score import DecisionRow
from tests.helpers import T0, ev, records, score, t

WINDOWS = ["24h", "7d", "30d"]


def _rows() -> list[DecisionRow]:
    recs = records(
        ev("ok", t(-50), text="see https://x.org/a"),
        ev("bare", t(-40), text="trust me"),
        ev("refused", t(-30), kind="refusal", text="No."),
        ev("cited", t(-20), text="see Issue #4"),
    )
    return list(score(recs, T0).agents["ada"].rows)


def test_the_query_is_read_and_bad_values_are_named() -> None:
    assert parse_query({}, WINDOWS) == AgentQuery("24h")
    q = parse_query({"window": "7d", "page": "3", "only": "failures", "component": "citation_rate",
                     "unlabelled": "1", "orgId": "1"}, WINDOWS)
    assert q == AgentQuery("7d", 3, True, "citation_rate", True)
    for query, said in (({"window": "1y"}, "unknown window '1y': one of 24h, 7d, 30d"),
                        ({"page": "0"}, "page must be a whole number"), ({"page": "-1"}, "page must be"),
                        ({"page": "²"}, "page must be"), ({"page": "1" * 30}, "page must be"),
                        ({"only": "passes"}, "only must be 'failures'"), ({"component": "vibes"}, "unknown component"),
                        ({"unlabelled": "yes"}, "unlabelled must be 1 or 0")):
        refused = parse_query(query, WINDOWS)
        assert isinstance(refused, str) and refused.startswith(said), (query, refused)


def test_links_keep_the_query_and_a_filter_starts_at_page_one() -> None:
    q = AgentQuery("7d", 4, False, "citation_rate")
    assert q.href("a b/c") == "/agents/a%20b%2Fc?window=7d&page=4&component=citation_rate"
    assert q.href("ada", failures=True, page=1) == "/agents/ada?window=7d&only=failures&component=citation_rate"
    assert not AgentQuery("24h").filtered and q.filtered


def test_filters() -> None:
    rows = _rows()
    ids = lambda q, labelled=(): [r.decision.id for r in select(rows, q, labelled)]  # noqa: E731
    assert ids(AgentQuery("24h")) == ["cited", "refused", "bare", "ok"]  # newest first
    assert ids(AgentQuery("24h", failures=True)) == ["refused", "bare"]
    assert ids(AgentQuery("24h", component="refusal_correctness")) == ["refused"]  # where it applies
    assert ids(AgentQuery("24h", failures=True, component="citation_rate")) == ["refused", "bare"]
    assert ids(AgentQuery("24h", failures=True, component="gap_surfacing_rate")) == []
    assert ids(AgentQuery("24h", failures=True, unlabelled=True), {"bare"}) == ["refused"]


def test_pages_of_a_hundred() -> None:
    rows = _rows() * 60  # 240 rows
    first, pager = paged(rows, 1)
    assert len(first) == PER_PAGE and (pager.first, pager.last, pager.pages, pager.total) == (1, 100, 3, 240)
    last, pager = paged(rows, 3)
    assert len(last) == 40 and (pager.first, pager.last) == (201, 240)
    beyond, pager = paged(rows, 9)
    assert beyond == [] and (pager.first, pager.last, pager.pages) == (0, 0, 3)
    none, pager = paged([], 1)
    assert none == [] and pager.pages == 1 and pager.total == 0


def test_long_texts_fold_at_a_space_near_the_limit() -> None:
    text = "word " * 100
    head, rest = split_text(text)
    assert head + rest == text and TEXT_HEAD - 40 <= len(head) <= TEXT_HEAD and rest.startswith(" ")
    assert split_text("x" * 500) == ("x" * TEXT_HEAD, "x" * (500 - TEXT_HEAD))
    assert split_text("short") == ("short", "")


def _label(reviewer: str, value: str, minutes: float, line: int, note: str | None = None) -> Label:
    return Label(T0 + timedelta(minutes=minutes), "bare", value, reviewer, "labels/api.jsonl", line, 0, note)


def test_a_row_shows_each_reviewers_current_label_mine_apart() -> None:
    bare = next(r for r in _rows() if r.decision.id == "bare")
    labels = [_label("alice", "up", -9, 1), _label("alice", "down", -5, 2, "no source"),
              _label("maya", "up", -4, 3), _label("bob", "down", -3, 4, "<b>")]
    view = row_view(bare, "trust me", labels, "alice")
    assert view.mine is not None and (view.mine.value, view.mine.note, view.mine.emoji) == ("down", "no source", "👎")
    assert [(v.reviewer, v.value) for v in view.others] == [("bob", "down"), ("maya", "up")]
    assert view.failing and [c.component for c in view.cells] == list(COMPONENTS)
    anonymous = row_view(bare, "trust me", labels, None)
    assert anonymous.mine is None and len(anonymous.others) == 3
    gone = row_view(bare, None, [], "alice")
    assert gone.missing_text and gone.head == "" and gone.mine is None


@pytest.mark.parametrize(("mark", "css"), [("✓", "ok"), ("✗", "bad"), ("pending", "pending"), ("—", "na"),
                                            ("2/2", "ok"), ("1/2", "bad")])
def test_cells_are_coloured_by_their_mark(mark: str, css: str) -> None:
    from daemon.http.rows import cell
    from scorers.outcome import Outcome

    assert cell("c", Outcome(mark)).css == css
