"""daemon/http/reviewpages.py and its templates (reviews.html, review.html, _rows.html): what an agent, a reviewer or
a hand-written review line put there is text on the queue and the review pages (agent names, reasons, notes,
decision ids, evidence fields of any type), never markup; the queue's order and words; a review's decisions beside
their live rows, or the review's record of them when they left the window."""

from __future__ import annotations

from typing import Any

import html5lib
import pytest
from markupsafe import escape

from collectors.records import Label
from collectors.reviews import ReviewEvent, parse_review_event
from daemon.config import Config, GitHub
from daemon.http.pages import AgentInputs, Viewer, audit_page, index_page
from daemon.http.reviewpages import queue_page, review_page, score_at_opening
from daemon.http.templating import anchor
from daemon.reviews.events import closing, encode, labelling, opening
from daemon.reviews.queue import Queue, Review
from daemon.snapshot import Counters, build_snapshot
from tests.helpers import T0, ev, records, score, t

EVIL = '<script>alert("x")</script> {{ 7*7 }} {% raw %} \'quoted\' "double" & ampersand'
ESCAPED = str(escape(EVIL))
CFG = Config(github=GitHub(repo="acme/app"))


def evidence(agent: str, why: str, failed: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """An opening's evidence as daemon/reviews/events.py writes it."""
    return {"agent": agent, "reason": "below", "why": why, "by": "honestyd", "window": "24h", "score": 0.4,
            "percent": 40, "interval": [0.3, 0.55], "decisions": 10, "weights_version": "v2026.Q3",
            "threshold": 0.7, "drop_alert": 0.15, "reference": {"window": "7d", "percent": 82, "decisions": 40},
            "audit": f"/agents/{agent}?window=24h", "failed_total": len(failed), "failed": failed, **extra}


def failed(decision: str, minutes: int, *components: str, source: str = "heartbeats/a.jsonl:1") -> dict[str, Any]:
    return {"id": decision, "ts": f"2026-06-01T11:{minutes:02d}:00Z", "kind": "dm",
            "components": list(components or ("citation_rate",)), "source": source}


def queue(*events: dict[str, Any]) -> Queue:
    """The queue these events make, each encoded as a line of the review file and read back."""
    lines = []
    for n, e in enumerate(events, 1):
        parsed = parse_review_event(encode(e)[0][:-1], "reviews/honestyd.jsonl", n)
        assert isinstance(parsed, ReviewEvent), parsed
        lines.append(parsed)
    return Queue.fold(lines)


def valid(page: str) -> str:
    html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(page)
    return page


def one(q: Queue, review_id: str) -> Review:
    found = q.get(review_id)
    assert found is not None
    return found


def test_the_queue_lists_open_reviews_oldest_first_then_the_closed_with_words_for_each() -> None:
    q = queue(
        opening("r-new", t(-5), evidence("bob", "below the 70 % threshold since 2026-06-01", [failed("b-1", 50)])),
        opening("r-old", t(-90), evidence("ada", "dropped from 92 % to 64 % in 24h",
                                         [failed("a-1", 1), failed("a-2", 2)], reason="drop")),
        opening("r-done", t(-200), evidence("cy", "below the 70 % threshold since 2026-05-31", [failed("c-1", 3)])),
        labelling("r-old", t(-60), "a-2", "down", "maya"),
        closing("r-done", t(-100), "maya", "cy fixed her sources"),
    )
    page = valid(queue_page(q.listing(), T0))
    order = [page.index(f">{rid}<") for rid in ("r-old", "r-new", "r-done")]
    assert order == sorted(order)  # open first, the oldest first; then the closed
    assert page.index("Open (2), oldest first") < order[0] < order[1] < page.index("Closed (1)") < order[2]
    assert "<strong>drop</strong>: dropped from 92 % to 64 % in 24h" in page
    assert "<strong>below</strong>: below the 70 % threshold since 2026-06-01" in page
    assert "1 of 2 decisions labelled" in page and "0 of 1 decision labelled" in page
    assert '<td class="age">1h 30m</td>' in page and '<td class="age">5m</td>' in page
    assert '<td class="age">1h 40m</td>' in page  # a closed one: how long it was open
    assert "40 % [0.30–0.55] · N = 10 decisions" in page
    assert '<a href="/reviews/r-old">' in page and '<a href="/agents/ada?window=24h">ada</a>' in page
    assert "by <strong>maya</strong>" in page and "cy fixed her sources" in page
    only_open = valid(queue_page(q.listing("open"), T0, state="open"))
    assert "r-done" not in only_open and "Closed (" not in only_open and "<strong>open</strong>" in only_open
    only_closed = valid(queue_page(q.listing("closed"), T0, state="closed"))
    assert "r-old" not in only_closed and "Open (" not in only_closed
    assert "No review is open." in valid(queue_page([], T0))


def test_names_reasons_and_notes_are_text_on_the_queue_and_the_review() -> None:
    decision = f"{EVIL}-1"
    q = queue(opening("r-evil", t(-30), evidence(EVIL, f"why {EVIL}", [failed(decision, 10, source=f"{EVIL}:3")],
                                                  weights_version=EVIL, by=EVIL)),
              closing("r-evil", t(-1), EVIL, f"note {EVIL}\nsecond line"))
    review = one(q, "r-evil")
    pages = ((queue_page(q.listing(), T0, viewer=Viewer(EVIL, "t", "/reviews")), "<strong>"),
             (review_page(review, T0, viewer=Viewer(EVIL, "t", "/reviews/r-evil")), '<strong class="reviewer">'))
    for page, closer in pages:
        valid(page)
        assert "<script>" not in page and "{{ 7*7 }} {% raw %}" in page  # shown as written, never evaluated
        assert f"why {ESCAPED}" in page and f"note {ESCAPED}" in page and f"by {closer}{ESCAPED}</strong>" in page
        assert f'signed in as <strong class="reviewer">{ESCAPED}</strong>' in page
    page = review_page(review, T0, viewer=Viewer("maya", 'tok"><b>', "/reviews/r-evil"))
    assert f"<h1>Review <code>r-evil</code> · {ESCAPED} · below</h1>" in page
    assert f'<code class="source">{ESCAPED}:3</code>' in page and f"<code>{ESCAPED}</code>" in page
    assert f'<input type="hidden" name="decision" value="{ESCAPED}-1">' in page  # its form, the id kept inside
    assert f'<tr id="{anchor(decision)}" class="failing">' in page
    assert 'name="csrf_token" value="tok&#34;&gt;&lt;b&gt;"' in page


def test_labels_and_notes_on_a_reviews_decisions_are_text_and_the_viewers_own_apart() -> None:
    events = [ev(f"ada-{k}", t(-10 * k - 1), text="trust me") for k in range(6)]
    snap = build_snapshot(records(*events), T0, CFG, Counters())
    live = score(records(*events), T0).agents["ada"]
    q = queue(opening("r-1", t(-2), evidence("ada", "below", [failed("ada-0", 59), failed("ada-1", 49)])))
    labels = [Label(t(-1), "ada-0", "down", EVIL, "labels/api.jsonl", 1, 0, f"note {EVIL}"),
              Label(t(-1), "ada-0", "up", "maya", "labels/api.jsonl", 2, 0, '"><img src=x onerror=alert(1)>')]
    page = valid(review_page(one(q, "r-1"), T0, snap=snap, live=live, labels=labels,
                             viewer=Viewer("maya", "tok", "/reviews/r-1")))
    assert f"note {ESCAPED}" in page and "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page and "<img" not in page
    assert '<span class="emoji">👍</span> <span class="by">maya</span> (you)' in page
    assert f'name="next" value="/reviews/r-1#{anchor("ada-0")}"' in page  # a label comes back to the review
    assert page.count('action="/labels"') == 2 and 'action="/reviews/r-1/close"' in page
    assert "trust me" in page and '<td class="bad">✗<span class="why">no citation</span></td>' in page  # live
    assert '<span class="band alert">below the 70 % alert</span>' in page


def test_a_decision_that_left_the_window_keeps_the_reviews_record_and_its_form() -> None:
    q = queue(opening("r-1", t(-2), evidence("ada", "below", [failed("ada-gone", 1, "citation_rate",
                                                                       "refusal_correctness", source="h/a.jsonl:9")])))
    page = valid(review_page(one(q, "r-1"), T0, live=None, viewer=Viewer("maya", "tok", "/reviews/r-1")))
    assert ('<td class="opening"><span title="citation_rate">Cite</span><br>'
            '<span title="refusal_correctness">Refusal</span></td>') in page
    assert "no longer in the live 24h window" in page and '<code class="source">h/a.jsonl:9</code>' in page
    assert 'name="decision" value="ada-gone"' in page
    assert "The latest evaluation has no 24h score of ada." in page
    assert "(1 no longer in the live 24h window)" in page


@pytest.mark.parametrize("bad", [
    {"failed": "not a list", "percent": "40", "interval": "wide", "decisions": None, "reference": [1]},
    {"failed": [{"id": 7}, "text", {"id": "x", "ts": "yesterday", "components": "all", "kind": 3}],
     "interval": [0.1], "window": 24, "why": ["a"], "weights_version": {"v": 1}, "threshold": "high"},
])
def test_a_hand_written_reviews_odd_fields_are_shown_as_nothing_never_a_fault(bad: dict[str, Any]) -> None:
    q = queue(opening("r-odd", t(-2), {**evidence("ada", "below", []), **bad}))
    review = one(q, "r-odd")
    for page in (queue_page([review], T0), review_page(review, T0), review_page(review, T0, viewer=Viewer("m", "t"))):
        valid(page)
        assert "r-odd" in page
    assert score_at_opening(review.evidence) in ("—", "40 % [0.30–0.55] · N = 10 decisions", "40 % · N = 10 decisions")


def test_one_row_per_decision_even_when_a_line_lists_it_twice() -> None:
    q = queue(opening("r-1", t(-2), evidence("ada", "below", [failed("ada-0", 1), failed("ada-0", 1)])))
    page = review_page(one(q, "r-1"), T0, viewer=Viewer("maya", "tok", "/reviews/r-1"))
    assert page.count(f'<tr id="{anchor("ada-0")}"') == 1


def test_the_index_and_the_agent_page_show_an_open_review_and_escape_it() -> None:
    events = [ev(f"{EVIL}-{k}", t(-10 * k - 1), agent=EVIL, text="trust me") for k in range(6)]
    snap = build_snapshot(records(*events), T0, CFG, Counters())
    q = queue(opening("r-1", t(-2), evidence(EVIL, f"why {EVIL}", [failed(f"{EVIL}-0", 59)])),
              opening("r-2", t(-9), evidence(EVIL, "closed one", [failed(f"{EVIL}-1", 49)], reason="drop")),
              closing("r-2", t(-1), "maya", "done"))
    index = valid(index_page(snap, reviews=q.listing()))
    assert '<a href="/reviews" class="queue">1 review open</a>' in index
    assert f'<a href="/reviews/r-1" title="why {ESCAPED}">below</a> <small>0 of 1 decision labelled</small>' in index
    assert "/reviews/r-2" not in index  # closed: not shown as open
    window = score(records(*events), T0)
    page = valid(audit_page(window.agents[EVIL], window, snap, inputs=AgentInputs(None, [], reviews=q.listing())))
    assert f'Open review <a href="/reviews/r-1">r-1</a> · below: why {ESCAPED} · 0 of 1 decision labelled' in page
    assert "/reviews/r-2" not in page
    assert '<a href="/reviews">reviews</a>' in page and '<a href="/reviews">reviews</a>' in index  # the nav
