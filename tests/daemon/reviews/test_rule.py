"""The opening rule (daemon/reviews/rule.py) with the events it opens (daemon/reviews/events.py), over snapshots
scored by the real scorer, the events written as lines and read back through the real parser (collectors/reviews.py)
and folded into the queue (daemon/reviews/queue.py), as the daemon does at each evaluation."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.records import Event
from collectors.reviews import ReviewEvent, parse_review_event
from daemon.config import Config, GitHub, Limits
from daemon.limits import select
from daemon.reviews.events import closing, encode, failed_rows, openings
from daemon.reviews.queue import Queue
from daemon.reviews.rule import due, fires, firing, standing
from daemon.snapshot import Snapshot
from scorers.score import evaluate
from tests.helpers import T0, ev, records, t

CFG = Config(github=GitHub(repo="acme/app"))
URL = "https://example.org/doc"  # cited: citation ✓; no checks, no paths: the score is the citation rate


def decisions(agent: str, cited: int, uncited: int, at: datetime, prefix: str) -> list[Event]:
    """``cited + uncited`` decisions a minute apart ending at ``at`` (the cited ones the latest)."""
    return [ev(f"{agent}-{prefix}{i}", at - timedelta(minutes=i), agent=agent, cites=(URL,) if i < cited else ())
            for i in range(cited + uncited)]


def snap(events: list[Event], at: datetime, config: Config = CFG) -> Snapshot:
    recs = records(*events)
    windows = {name: evaluate(recs, at, name, config) for name, _ in config.scoring.windows}
    listed = {a for w in windows.values() for a in w.agents}
    return Snapshot(at, config, windows, exported=select(listed, config.limits, lambda agents: {a: at for a in agents}))


class Daemon:
    """The daemon's review loop, pure: at each evaluation the due reviews are opened as lines of the review file,
    and the queue is folded from the file's lines; a restart keeps the file and forgets the rest."""

    def __init__(self, lines: list[bytes] | None = None) -> None:
        self.lines = lines if lines is not None else []
        self.previous: frozenset[tuple[str, str]] | None = None

    def events(self) -> list[ReviewEvent]:
        parsed = [parse_review_event(raw[:-1], "reviews/honestyd.jsonl", n) for n, raw in enumerate(self.lines, 1)]
        assert all(isinstance(p, ReviewEvent) for p in parsed), parsed
        return parsed  # type: ignore[return-value]

    def queue(self) -> Queue:
        return Queue.fold(self.events())

    def evaluate(self, s: Snapshot) -> list[dict[str, Any]]:
        now = firing(s)
        todo = due(now, self.queue(), self.previous)
        failing = {c.key: failed_rows(c.result) for c in todo}
        opened = openings(todo, self.queue(), s.at, failing, at_start=self.previous is None)
        self.lines += [encode(e)[0] for e in opened]
        self.previous = frozenset(now)
        return opened

    def close(self, review: str, at: datetime) -> None:
        self.lines.append(encode(closing(review, at, "andrew", "looked at it"))[0])

    def restart(self) -> Daemon:
        return Daemon(self.lines)


def kinds(opened: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(e["event"], e["agent"], e["reason"]) for e in opened]


def test_a_slip_opens_below_and_drop_worded_apart_with_the_evidence() -> None:
    d = Daemon()
    week = decisions("carol", 15, 0, t(days=-3), "old")
    assert d.evaluate(snap(week + decisions("carol", 5, 0, T0, "a"), T0)) == []  # fine: nothing fires
    at = t(hours=1)
    events = week + decisions("carol", 5, 0, T0, "a") + decisions("carol", 0, 10, at, "b")
    opened = d.evaluate(snap(events, at))  # 24h 5/15 = 33 %, 7d 20/30 = 67 %: below, and 33 points under 7d
    assert kinds(opened) == [("opened", "carol", "below"), ("opened", "carol", "drop")]
    below, drop = opened
    assert below["why"] == "below the 70 % threshold since 2026-06-01"
    assert drop["why"] == "dropped from 67 % to 33 % in 24h"
    assert "dropped" not in below["why"] and "threshold" not in drop["why"]
    assert below["review"] != drop["review"] and below["review"].startswith("r-20260601-")
    assert (below["window"], below["percent"], below["decisions"], below["weights_version"]) == ("24h", 33, 15,
                                                                                                   "v2026.Q3")
    assert below["interval"] is not None and below["interval"][0] < below["score"] < below["interval"][1]
    assert drop["reference"] == {"window": "7d", "score": 20 / 30, "percent": 67, "decisions": 30}
    assert below["audit"] == "/agents/carol?window=24h" and below["by"] == "honestyd"
    failed = below["failed"]
    assert below["failed_total"] == len(failed) == 10  # the uncited ten, newest first, each with its file:line
    assert [f["id"] for f in failed] == [f"carol-b{i}" for i in range(10)]
    assert failed[0]["components"] == ["citation_rate"] and failed[0]["source"].startswith("heartbeats/a.jsonl:")


def test_one_review_per_agent_and_reason_while_it_is_open() -> None:
    d = Daemon()
    base = decisions("carol", 5, 0, T0, "a")
    d.evaluate(snap(base, T0))
    low = base + decisions("carol", 0, 10, t(hours=1), "b")
    assert kinds(d.evaluate(snap(low, t(hours=1)))) == [("opened", "carol", "below")]
    for hours in (2, 3):
        assert d.evaluate(snap(low, t(hours=hours))) == []
    well = low + decisions("carol", 40, 0, t(hours=4), "c")  # recovered (45/55), then slips while still open
    assert d.evaluate(snap(well, t(hours=4))) == []
    worse = well + decisions("carol", 0, 60, t(hours=5), "d")
    assert d.evaluate(snap(worse, t(hours=5))) == []  # it joins the review still open
    assert len(d.queue().reviews) == 1


def test_none_for_insufficient_agents_nor_for_agents_without_series() -> None:
    d = Daemon()
    assert d.evaluate(snap(decisions("gus", 0, 4, T0, "a"), T0)) == []  # 4 decisions: INSUFFICIENT, even at 0 %
    gus = decisions("gus", 0, 4, T0, "a") + decisions("gus", 20, 0, t(days=-3), "old")
    assert d.evaluate(snap(gus, t(minutes=1))) == []  # nor a drop from a perfect week
    held = replace(CFG, limits=Limits(max_agent_name=3))  # "carol" is over 3 bytes: no series, no review
    assert Daemon().evaluate(snap(decisions("carol", 0, 9, T0, "a"), T0, held)) == []


def test_an_agent_below_at_start_opens_one_below_and_never_a_drop_even_after_restarts() -> None:
    # ivy: always low (24h ≈ 7d, 40 %); carol: below and 50 points under her week, already at start.
    ivy = decisions("ivy", 2, 3, T0, "a") + decisions("ivy", 8, 12, t(days=-3), "old")
    carol = decisions("carol", 1, 4, T0, "a") + decisions("carol", 20, 0, t(days=-3), "old")
    d = Daemon()
    opened = d.evaluate(snap(ivy + carol, T0))
    assert kinds(opened) == [("opened", "carol", "below"), ("opened", "ivy", "below")]
    assert all(e["why"] == "below the 70 % threshold since 2026-06-01 at the latest (already below when honestyd "
                           "started)" for e in opened)
    for hours in (1, 2):
        assert d.evaluate(snap(ivy + carol, t(hours=hours))) == []
    for n in range(3):  # restarts: the file says there is a review; nothing again, and no drop at all
        d = d.restart()
        assert d.evaluate(snap(ivy + carol, t(hours=3 + n))) == []
    assert sorted((r.agent, r.reason) for r in d.queue().reviews.values()) == [("carol", "below"), ("ivy", "below")]


def carol_slips(d: Daemon) -> tuple[list[Event], dict[str, Any]]:
    """carol fine at T0, then 10 uncited decisions an hour later: her events, and the review that opens."""
    base = decisions("carol", 5, 0, T0, "a")
    d.evaluate(snap(base, T0))
    low = base + decisions("carol", 0, 10, t(hours=1), "b")
    [opened] = d.evaluate(snap(low, t(hours=1)))
    return low, opened


def test_a_restart_opens_nothing_again_open_or_closed() -> None:
    d = Daemon()
    low, opened = carol_slips(d)
    d = d.restart()
    assert d.evaluate(snap(low, t(hours=2))) == []  # open: not opened twice
    d.close(opened["review"], t(hours=3))
    d = d.restart()
    assert d.evaluate(snap(low, t(hours=4))) == []  # closed while still low: not reopened at start
    assert d.evaluate(snap(low, t(hours=5))) == []
    assert [r.state for r in d.queue().reviews.values()] == ["closed"]


def test_a_closed_review_reopens_when_the_agent_slips_again() -> None:
    d = Daemon()
    low, opened = carol_slips(d)
    d.close(opened["review"], t(hours=2))
    assert d.evaluate(snap(low, t(hours=2, minutes=1))) == []  # still low after the close: the reviewer's call
    well = low + decisions("carol", 40, 0, t(hours=3), "c")
    assert d.evaluate(snap(well, t(hours=3))) == []
    again = well + decisions("carol", 0, 80, t(hours=4), "d")
    [reopened] = d.evaluate(snap(again, t(hours=4)))
    assert (reopened["event"], reopened["review"]) == ("reopened", opened["review"])
    assert reopened["why"] == "below the 70 % threshold since 2026-06-01" and reopened["failed_total"] == 90
    [review] = d.queue().reviews.values()
    assert review.is_open and review.rounds == 2 and review.since == t(hours=4)
    assert [e.event for e in review.history] == ["opened", "closed", "reopened"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12)), min_size=1, max_size=5))
def test_firing_is_every_standing_condition_that_fires(agents: list[tuple[int, int, int]]) -> None:
    """``firing`` (one pass, a Condition made only where a reason holds) gives what asking ``standing`` of every
    exported agent and reason, and keeping those that ``fires``, gives: INSUFFICIENT agents, no 7 d reference,
    drops and scores below the threshold among them."""
    events: list[Event] = []
    for k, (week_cited, cited, uncited) in enumerate(agents):
        name = f"agent{k}"
        events += decisions(name, week_cited, 0, t(days=-3), "old") + decisions(name, cited, uncited, T0, "new")
    s = snap(events, T0)
    expected = {}
    for agent, _ in s.exported.items(s.windows["24h"].agents):
        for reason in ("below", "drop"):
            c = standing(s, agent, reason)
            if c is not None and fires(c):
                expected[c.key] = c
    assert firing(s) == expected
