"""The queue folded from review events (daemon/reviews/queue.py) and what readers see of it (daemon/reviews/views.py):
the same events make the same queue whatever order they arrive in or however often they are read."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from collectors.reviews import Listed, ReviewEvent, packed, parse_review_event
from daemon.changelog import append_entries
from daemon.reviews.events import alerting, closing, encode, labelling, opening
from daemon.reviews.queue import Queue
from daemon.reviews.views import changelog_entries, detail, markdown, summary
from tests.helpers import T0, t

EVIDENCE = {"agent": "zoe", "reason": "below", "why": "below the 70 % threshold since 2026-06-01", "by": "honestyd",
            "window": "24h", "score": 0.4, "percent": 40, "interval": [0.3, 0.5], "decisions": 10,
            "weights_version": "v2026.Q3", "threshold": 0.7, "drop_alert": 0.15, "reference": None,
            "audit": "/agents/zoe?window=24h", "failed_total": 2,
            "failed": [{"id": "zoe-1", "ts": "2026-06-01T11:59:00Z", "kind": "dm", "components": ["citation_rate"],
                        "source": "heartbeats/zoe.jsonl:4"},
                       {"id": "zoe-2", "ts": "2026-06-01T11:58:00Z", "kind": "dm", "components": ["citation_rate"],
                        "source": "heartbeats/zoe.jsonl:3"}]}


def lines(*events: dict[str, Any], path: str = "reviews/honestyd.jsonl") -> list[ReviewEvent]:
    out = []
    for n, e in enumerate(events, 1):
        parsed = parse_review_event(encode(e)[0][:-1], path, n)
        assert isinstance(parsed, ReviewEvent)
        out.append(parsed)
    return out


STORY = lines(
    opening("r-1", T0, EVIDENCE),
    labelling("r-1", t(1), "zoe-1", "down", "andrew"),
    alerting("r-1", t(2), "HonestyScoreLow", "firing", "fp", "2026-06-01T11:50:00Z"),
    closing("r-1", t(60), "andrew", "fixed | see *PR* #12\nsecond line"),
    opening("r-1", t(61), EVIDENCE, reopen=True),
)


def test_the_same_events_in_any_order_or_read_twice_make_the_same_queue() -> None:
    expected = summary(Queue.fold(STORY).reviews["r-1"], t(90))
    for order in itertools.permutations(STORY):
        assert summary(Queue.fold(order).reviews["r-1"], t(90)) == expected
    rewritten = [e._replace(generation=1) for e in STORY]  # a file rewritten and read again: the same ids
    review = Queue.fold([*STORY, *rewritten]).reviews["r-1"]
    assert summary(review, t(90)) == expected and len(review.history) == len(STORY)
    assert expected["state"] == "open" and expected["rounds"] == 2 and expected["since"] == "2026-06-01T13:01:00Z"
    assert expected["progress"] == {"labelled": 1, "decisions": 2, "text": "1 of 2 decisions labelled"}
    assert expected["age_seconds"] == 29 * 60


def test_events_that_do_not_fit_change_nothing() -> None:
    extra = lines(opening("r-1", t(3), {**EVIDENCE, "agent": "other"}), closing("r-9", t(4), "x", "no such review"),
                  opening("r-1", t(5), EVIDENCE, reopen=True), path="reviews/manual.jsonl")
    q = Queue.fold([*STORY[:2], *extra])
    review = q.reviews["r-1"]
    assert list(q.reviews) == ["r-1"] and review.agent == "zoe" and review.rounds == 1 and review.is_open
    closed_twice = lines(closing("r-1", t(6), "a", "one"), closing("r-1", t(7), "b", "two"))
    assert Queue.fold([STORY[0], *closed_twice]).reviews["r-1"].closed_by == "a"


def test_listing_puts_open_reviews_first_oldest_first_and_counts_by_agent() -> None:
    q = Queue.fold(lines(opening("r-old", T0, EVIDENCE), opening("r-new", t(5), {**EVIDENCE, "reason": "drop"}),
                         opening("r-ada", t(1), {**EVIDENCE, "agent": "ada"}), closing("r-ada", t(9), "a", "ok")))
    assert [r.id for r in q.listing()] == ["r-old", "r-new", "r-ada"]
    assert [r.id for r in q.listing("closed")] == ["r-ada"]
    assert q.open_counts() == {"zoe": 2, "ada": 0}
    oldest = q.oldest_open()
    assert oldest is not None and oldest.id == "r-old" and oldest.age(t(10)) == 600
    assert q.open_for("zoe", "drop") is q.reviews["r-new"] and q.open_for("ada", "below") is None
    latest = q.latest_for("ada", "below")
    assert latest is not None and latest.closed_at == t(9) and latest.age(t(99)) == 8 * 60


def test_detail_and_markdown_show_the_evidence_labels_and_history() -> None:
    review = Queue.fold(STORY[:4]).reviews["r-1"]
    d = detail(review, t(90))
    assert d["closed"] == {"at": "2026-06-01T13:00:00Z", "reviewer": "andrew",
                           "note": "fixed | see *PR* #12\nsecond line"}
    assert [f["label"] for f in d["failed"]] == [{"value": "down", "reviewer": "andrew", "at": "2026-06-01T12:01:00Z"},
                                                 None]
    assert [h["event"] for h in d["history"]] == ["opened", "labelled", "alert", "closed"]
    md = markdown(review, t(90), base="https://honestyd.example.org")
    assert md.startswith("### Review `r-1` · zoe · below (closed)\n")
    assert "- Progress: 1 of 2 decisions labelled" in md
    assert "[`/agents/zoe?window=24h`](https://honestyd.example.org/agents/zoe?window=24h)" in md
    assert "| `zoe-1` | 2026-06-01T11:59:00Z | dm | citation_rate | `heartbeats/zoe.jsonl:4` | 👎 andrew |" in md
    assert "by andrew: fixed \\| see \\*PR\\* \\#12\ufffdsecond line" in md  # one line, nothing rendered
    assert "; closed for 1h 0m" in md


def test_openings_and_closes_become_changelog_entries_once(tmp_path: Path) -> None:
    q = Queue.fold(STORY)
    entries = list(changelog_entries(q))
    assert [e.key.split(":")[2] for e in entries] == ["opened", "closed", "reopened"]
    closed = entries[1].markdown
    assert "**Review closed** · zoe · 2026-06-01T13:00:00Z · review [`r-1`](/reviews/r-1) (below) closed by andrew:" \
        in closed and "\n" not in closed.split("\n", 1)[1]
    assert "(reopened)" in entries[2].markdown and "**Below threshold**" in entries[2].markdown
    path = tmp_path / "changelog.md"
    assert append_entries(path, entries) == entries and append_entries(path, list(changelog_entries(q))) == []
    hostile = Queue.fold(lines(opening("r-2", T0, {**EVIDENCE, "agent": "## x\n<!-- honestyd:k -->", "window": "]("}),
                               closing("r-2", t(1), "<b>", "## heading"), path="reviews/x.jsonl"))
    assert len(append_entries(path, list(changelog_entries(hostile)))) == 2  # escaped: the file accepts them


def test_a_queue_of_packed_evidence_shows_what_the_lists_do() -> None:
    """The store gives an opening's failing decisions as text (collectors.reviews.packed): the queue, its progress,
    the API's detail and the Markdown are the same as from the lists."""
    many = {**EVIDENCE, "failed_total": 30,
            "failed": [{**EVIDENCE["failed"][0], "id": f"zoe-{k}", "source": f"heartbeats/zoe.jsonl:{k}"}
                       for k in range(30)]}
    story = lines(opening("r-1", T0, many), labelling("r-1", t(1), "zoe-3", "down", "andrew"))
    packed_story = [e._replace(data=packed(dict(e.data))) for e in story]
    assert isinstance(packed_story[0].data["failed"], Listed)
    plain, packed_review = (Queue.fold(s).reviews["r-1"] for s in (story, packed_story))
    assert packed_review.failed_ids() == plain.failed_ids() == [f"zoe-{k}" for k in range(30)]
    assert packed_review.progress() == plain.progress() == (1, 30)
    assert detail(packed_review, t(90)) == detail(plain, t(90))
    assert markdown(packed_review, t(90)) == markdown(plain, t(90))
    assert len(detail(plain, t(90))["failed"]) == 30
