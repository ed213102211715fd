"""The daemon's model lets go of records behind every window, and stays exact (scorers/live/eviction.py).

A real state directory, a real store fed by the real Ingester, the daemon's LiveFeed. Records dated more than the
longest window (30 days) plus a day before the evaluation are dropped from memory; the store keeps them. What must
still hold, each checked against a from-scratch evaluation of the store:

* the windows are unchanged (nothing dropped was in one, and no rule reads back that far);
* spec 1.1 across the drop: a new record carrying a dropped id wins when it comes first in read order (and the
  labels on that id come back with it), and is dropped when it comes later; a label on a dropped decision waits in
  the store; a brief that was dropped and is then edited is scored as edited;
* the model cache keeps the dropped state; a clock stepping back further than the slack makes the model ask to be
  built again (HistoryEvicted), as the daemon then does from the store.

The random programs of tests/scorers/live/test_model.py drop, recall and step back too, against an in-memory store;
this file is the same path through SQLite (daemon/modelkeeper.py: _stored_under).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.rfc3339 import format_ts
from daemon import modelcache
from daemon.config import Config, GitHub
from daemon.ingest import Ingester
from daemon.modelkeeper import LiveFeed
from daemon.store import Store
from scorers.context import Context
from scorers.live import HistoryEvicted
from scorers.score import AgentResult, evaluate_window, to_json

T0 = datetime(2026, 7, 1, 12, tzinfo=UTC)
CONFIG = Config(github=GitHub(repo="acme/app"))
OLD = T0 - timedelta(days=40)


def _line(rid: str, ts: datetime, agent: str = "ada", **extra: object) -> str:
    obj = {"id": rid, "ts": format_ts(ts), "agent": agent, "kind": "dm", "thread": "t1",
           "text": f"{rid}: see https://docs.example.org/{rid}", **extra}
    return json.dumps(obj) + "\n"


def _append(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(text)


class World:
    """A state with 40-day-old and recent decisions, its store, the daemon's feed, and a clock."""

    def __init__(self, tmp: Path, moves: bool) -> None:
        #: After each evaluation, move the ids let go to the store's let-go table, as the daemon does.
        self.moves = moves
        self.root = tmp / "state"
        hb = self.root / "heartbeats"
        old = "".join(_line(f"old-{i}", OLD + timedelta(hours=i), prompt="status?") for i in range(20))
        old += _line("old-refusal", OLD, kind="refusal", text="No, because frozen; instead wait.")
        recent = "".join(_line(f"new-{i}", T0 - timedelta(hours=30 - i), prompt="status?") for i in range(30))
        _append(hb / "ada.jsonl", old + recent)
        _append(hb / "bo.jsonl", "".join(_line(f"bo-{i}", OLD - timedelta(days=5, hours=i), agent="bo")
                                        for i in range(10)))  # an agent whose every decision goes
        _append(self.root / "labels" / "r.jsonl", "".join(
            json.dumps({"ts": format_ts(ts), "decision": d, "value": "down", "reviewer": "rev"}) + "\n"
            for d, ts in [("old-3", OLD + timedelta(days=1)), ("new-2", T0 - timedelta(hours=20))]))
        brief = self.root / "briefs" / "ada-old.md"
        brief.parent.mkdir(parents=True)
        brief.write_text(f"---\nagent: ada\nts: {format_ts(OLD)}\nthread: b1\n---\nAll fine.\n")
        self.now = T0
        self.store = Store.open(tmp / "honestyd.db")
        self.ingester = Ingester(self.store, self.root, CONFIG, clock=lambda: self.now)
        self.ingester.scan()

    def scan(self) -> None:
        self.ingester.scan()

    def check(self, feed: LiveFeed, at: datetime) -> None:
        """The feed, synced, scores what a from-scratch evaluation of the store scores, audit rows included."""
        feed.sync(self.store)
        live = feed.evaluate(at, self.store if self.moves else None)
        if self.moves:  # daemon/app/evaluations.py: the hashes into the table, RAM lets go
            hashes, upto = feed.ids_let_go()
            with self.store.transaction():
                self.store.add_let_go(hashes, upto)
            feed.ids_stored(hashes, self.store.let_go_count())
        ctx = Context(self.store.load_records(), at, CONFIG)
        for name, _ in CONFIG.scoring.windows:
            pure = evaluate_window(ctx, name)
            assert to_json(live[name]) == to_json(pure), name
            for agent, expected in pure.agents.items():
                found = feed.agent_result(agent, name)
                assert found is not None
                assert _rows(found[1]) == _rows(expected), (name, agent)


def _rows(result: AgentResult) -> list[tuple[str, object, list[str]]]:
    return [(r.decision.id, r.decision.order, [o.why for o in r.outcomes.values()]) for r in result.rows]


@pytest.fixture(params=[False, True], ids=["ids-let-go-in-ram", "ids-let-go-in-the-store"])
def world(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[World]:
    w = World(tmp_path, request.param)
    yield w
    w.store.close()


def _ids(feed: LiveFeed) -> set[str]:
    return {r.id for r in feed.model.records()}


def test_records_behind_every_window_are_let_go_and_the_scores_do_not_move(world: World) -> None:
    feed = LiveFeed(CONFIG)
    feed.load(world.store)
    held = len(feed.model.records())
    world.check(feed, T0)
    assert feed.model.evicted_to == T0 - timedelta(days=31)
    kept = _ids(feed)
    assert not any(i.startswith(("old-", "bo-")) for i in kept) and "briefs/ada-old.md" not in kept
    assert {f"new-{i}" for i in range(30)} <= kept
    assert len(feed.model.records()) == held - 20 - 1 - 10 - 1
    # Time goes on: the recent ones stay until they too are behind every window.
    world.check(feed, T0 + timedelta(days=20))
    assert {f"new-{i}" for i in range(30)} <= _ids(feed)
    world.check(feed, T0 + timedelta(days=33))
    assert not _ids(feed)


def test_a_dropped_id_coming_again_follows_read_order_and_brings_its_labels(world: World) -> None:
    feed = LiveFeed(CONFIG)
    feed.load(world.store)
    world.check(feed, T0)
    hb = world.root / "heartbeats"
    # Read first (heartbeats/aaa.jsonl < heartbeats/ada.jsonl): it wins old-3 and its 👎 of 40 days ago applies.
    _append(hb / "aaa.jsonl", _line("old-3", T0 - timedelta(hours=2), text="old-3 again, you're right"))
    # Read later: the dropped old-4 keeps its id; this one is dropped (spec 1.1), and old-4 is still out of window.
    _append(hb / "zed.jsonl", _line("old-4", T0 - timedelta(hours=1)))
    # A label on a decision still dropped waits in the store.
    _append(world.root / "labels" / "r.jsonl", json.dumps(
        {"ts": format_ts(T0 - timedelta(minutes=5)), "decision": "old-7", "value": "down", "reviewer": "rev"}) + "\n")
    world.now = T0 + timedelta(minutes=1)
    world.scan()
    world.check(feed, world.now)
    held = _ids(feed)
    assert "old-3" in held and "old-4" in held  # recalled with their records (the old ones, then dropped again)
    assert "old-7" not in held and "old-7" not in feed.model._label_columns  # its label left in the store
    result = feed.agent_result("ada", "24h")
    assert result is not None
    rows = {r.decision.id: r for r in result[1].rows}
    assert rows["old-3"].decision.path == "heartbeats/aaa.jsonl"
    assert "old-4" not in rows
    # Later, both are behind the windows again and go, with the new record of old-3.
    world.check(feed, T0 + timedelta(days=33))
    assert "old-3" not in _ids(feed)


def test_a_dropped_brief_edited_later_is_scored_as_edited(world: World) -> None:
    feed = LiveFeed(CONFIG)
    feed.load(world.store)
    world.check(feed, T0)
    brief = world.root / "briefs" / "ada-old.md"
    brief.write_text(f"---\nagent: ada\nts: {format_ts(T0 - timedelta(hours=3))}\nthread: b1\n---\nRe-dated: "
                     "see https://docs.example.org/brief\n")
    world.now = T0 + timedelta(minutes=1)
    world.scan()
    world.check(feed, world.now)
    assert "briefs/ada-old.md" in _ids(feed)


def test_the_cache_keeps_what_was_let_go_and_a_clock_far_back_asks_for_a_rebuild(world: World) -> None:
    feed = LiveFeed(CONFIG)
    feed.load(world.store)
    world.check(feed, T0)
    buffer = io.BytesIO()
    modelcache.write_feed(buffer, feed)
    buffer.seek(0)
    loaded = modelcache.read_feed(buffer)
    assert isinstance(loaded, LiveFeed) and loaded.model.evicted_to == feed.model.evicted_to
    _append(world.root / "heartbeats" / "aaa.jsonl", _line("old-5", T0 - timedelta(hours=2)))
    world.now = T0 + timedelta(minutes=1)
    world.scan()
    world.check(loaded, world.now)  # the recall works from the loaded hashes
    assert "old-5" in _ids(loaded)
    world.check(loaded, world.now - timedelta(hours=20))  # within the slack: rebuilt from what is held
    with pytest.raises(HistoryEvicted):
        loaded.evaluate(T0 - timedelta(days=2))
    rebuilt = LiveFeed(CONFIG)
    rebuilt.load(world.store)
    world.check(rebuilt, T0 - timedelta(days=2))


def test_a_start_reads_only_what_it_keeps_and_an_id_whole(world: World) -> None:
    # old-9 now also has a record inside the windows: its 40-day-old one must be read too (an id goes whole).
    _append(world.root / "heartbeats" / "zed.jsonl", _line("old-9", T0 - timedelta(hours=1)))
    world.scan()
    full = LiveFeed(CONFIG)
    full.load(world.store)
    world.check(full, T0)
    lean = LiveFeed(CONFIG)
    lean.load(world.store, T0)
    assert sorted(r.order for r in lean.model.records()) == sorted(r.order for r in full.model.records())
    assert sum(r.id == "old-9" for r in lean.model.records()) == 2
    world.check(lean, T0)
    # What was never read is recalled as what was let go.
    _append(world.root / "heartbeats" / "aaa.jsonl", _line("old-3", T0 - timedelta(hours=2)))
    world.now = T0 + timedelta(minutes=1)
    world.scan()
    world.check(lean, world.now)
    world.check(full, world.now)
    assert sorted(r.order for r in lean.model.records()) == sorted(r.order for r in full.model.records())
