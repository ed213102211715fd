"""The model's keeper (daemon/modelkeeper.py): the ids of records let go leave RAM for the store's let-go table
(migration 013), and a record arriving later with one of them still loses to the stored one (spec 1.1, forever).

A real store ingested by the real Ingester from a simulated state; the live-vs-pure properties of letting go are in
tests/scorers/test_eviction.py, the machine over ingest, syncs and restarts in tests/daemon/test_model_ingest.py.
"""

from __future__ import annotations

import asyncio
import gc
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from collectors.rfc3339 import format_ts, from_us
from daemon import modelcache
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.limits import HeldBackLog
from daemon.modelkeeper import LiveFeed, ModelKeeper
from daemon.simulate import simulate
from daemon.store import Store
from scorers.context import Context
from scorers.live import table
from scorers.score import WindowResult, evaluate_window, to_json

#: One 24-hour window: on four days of data, the first two are behind it and its day of slack, so they are let go.
CONFIG = replace(Config(), scoring=replace(Config().scoring, windows=(("24h", timedelta(hours=24)),)))


def _moved_to_store(feed: LiveFeed, store: Store) -> int:
    """What the daemon does after an evaluation (daemon/app/evaluations.py): the hashes into the table, RAM lets go."""
    hashes, upto = feed.ids_let_go()
    with store.transaction():
        store.add_let_go(hashes, upto)
    feed.ids_stored(hashes, store.let_go_count())
    return len(hashes)


def test_ids_let_go_leave_ram_and_a_late_duplicate_of_one_still_loses(tmp_path: Path) -> None:
    root = tmp_path / "state"
    now = simulate(7, root, agents=3, days=4).end
    with Store.open(tmp_path / "honestyd.db") as store:
        ingester = Ingester(store, root, CONFIG, clock=lambda: now)
        ingester.scan()
        feed = LiveFeed(CONFIG)
        feed.load(store, now)
        feed.sync(store)
        before = feed.evaluate(now, store)
        moved = _moved_to_store(feed, store)
        assert moved > 0 and feed.ids_let_go()[0] == []  # RAM holds none of them
        assert feed.evaluate(now, store) == before
        assert feed.size[1] == moved  # still counted: honesty_model_ids_let_go
        # A decision dated now with the id of one let go: the stored one is first in read order and wins (spec 1.1).
        rid, agent, ts_us = store.conn.execute(
            "SELECT id, agent, ts_us FROM events WHERE line > 0 AND kind = 'dm' ORDER BY ts_us LIMIT 1").fetchone()
        assert from_us(ts_us) < now - timedelta(days=2)
        assert feed.knows(rid, store)
        with (root / "heartbeats" / f"{agent}.jsonl").open("a") as f:
            f.write(json.dumps({"id": rid, "ts": format_ts(now - timedelta(hours=1)), "agent": agent, "kind": "dm",
                                "text": "a late duplicate: it must not count"}) + "\n")
        ingester.scan()
        feed.sync(store)
        warm = feed.evaluate(now, store)
        cold = LiveFeed(CONFIG)
        cold.load(store, now)
        assert not cold.model._table.strings  # let go once the load is in, as a start from the cache has none
        cold.sync(store)
        assert warm == cold.evaluate(now)
        assert warm["24h"].agents[agent].decisions == before["24h"].agents[agent].decisions



@pytest.mark.parametrize(("held", "sources"), [(3, 2), (table.RAW_HELD, table.SOURCES_HELD)])
def test_a_load_makes_from_the_rows_the_records_the_events_would_make(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       held: int, sources: int) -> None:
    """LiveFeed.load builds the model's records straight from the store's rows (no Event per row in between): each is
    the record the model makes of the event the store reads (``_slim``), decisions with equal shapes, citations or
    agents share one object, and the model holds the same shared values. The raw shapes remembered along the way are
    forgotten every few rows (``held`` 3), or never here, and so are the sources (``sources`` 2); a log rewritten in
    place holds its texts again under a new generation (a raw shape differing in that alone is another shape)."""
    monkeypatch.setattr(table, "RAW_HELD", held)
    monkeypatch.setattr(table, "SOURCES_HELD", sources)
    root = tmp_path / "state"
    now = simulate(5, root, agents=3, days=2).end
    with Store.open(tmp_path / "honestyd.db") as store:
        ingester = Ingester(store, root, CONFIG, clock=lambda: now)
        ingester.scan()
        log = sorted((root / "heartbeats").glob("*.jsonl"))[0]
        log.write_text("".join(log.read_text().splitlines(keepends=True)[1:]))  # truncated and rewritten: generation 1
        ingester.scan()
        assert store.conn.execute("SELECT count(*) FROM events WHERE generation = 1").fetchone()[0] > 0
        model, expected = LiveFeed(CONFIG).model, LiveFeed(CONFIG).model
        model.add_rows(store.event_rows_up_to(store.feed_marks()[0]))  # as LiveFeed.load reads them
        expected.add_events(e for _, e in store.events_up_to(store.feed_marks()[0]))
    t, u = model._table, expected._table
    made = [t.event(s) for s in model._loaded]
    assert made == [u.event(s) for s in expected._loaded]
    assert model._documents == expected._documents
    for column in ("ts", "source", "line", "thread", "cited", "shape"):
        assert getattr(t, column) == getattr(u, column), column
    assert (t.ids.at, t.ids.stem, t.ids.blob, t.ids.stems) == (u.ids.at, u.ids.stem, u.ids.blob, u.ids.stems)
    for name in ("sources", "threads", "citations", "shapes"):  # the values records share, each once
        values = getattr(t, name).values
        assert values == getattr(u, name).values and len(set(values)) == len(values), name
    assert any(e.kind not in CONFIG.decision_kinds for e in made) and any(e.line is None for e in made)
    assert any(e.citations for e in made) and any(e.subject for e in made) and any(e.alternatives for e in made)
    for field in ("agent", "kind", "path"):  # and the strings inside the sources
        values = [getattr(source, field) for source in t.sources.values]
        assert len({id(v) for v in values}) == len(set(values)), field


def test_a_cold_load_freezes_the_records_as_it_reads_and_the_first_evaluation_collects_nothing(tmp_path: Path) -> None:
    """A cold start keeps every record it reads: a collection meanwhile would walk them again (the oldest generation's
    walks all of them). So the load freezes them out of the collector as it reads (in batches: it goes on collecting
    the other threads' garbage), and the first evaluation, which indexes every record and runs every rule, runs with
    the collector paused; it is on again after, and the windows are the pure evaluation's."""
    root = tmp_path / "state"
    now = simulate(3, root, agents=3, days=2).end
    with Store.open(tmp_path / "honestyd.db") as store:
        Ingester(store, root, CONFIG, clock=lambda: now).scan()
        collections: list[int] = []

        def note(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                collections.append(info["generation"])

        feed = LiveFeed(CONFIG)
        gc.collect()
        frozen = gc.get_freeze_count()
        gc.callbacks.append(note)
        try:
            feed.load(store, now, freeze_every=50)
            frozen_by_load = gc.get_freeze_count() - frozen
            collections.clear()
            windows = feed.evaluate(now, store)
        finally:
            gc.callbacks.remove(note)
            gc.unfreeze()
        assert frozen_by_load > 0
        assert collections == []
        assert gc.isenabled()
        ctx = Context(store.load_records(), now, CONFIG)
        assert {n: to_json(w) for n, w in windows.items()} == {n: to_json(evaluate_window(ctx, n)) for n in windows}
def test_the_model_cache_is_read_before_the_store_is_there_then_taken_once_the_store_agrees(tmp_path: Path) -> None:
    """A start reads the cache while the store is checked (ModelKeeper.prefetch): the read needs nothing of the store
    (here the database is not even at its path meanwhile); the load that follows asks the store, takes the feed read
    and deletes the file."""
    root = tmp_path / "state"
    now = simulate(7, root, agents=3, days=2).end
    db = tmp_path / "honestyd.db"
    config = replace(CONFIG, db_path=db)
    with Store.open(db) as store:
        Ingester(store, root, config, clock=lambda: now).scan()
        feed = LiveFeed(config)
        feed.load(store, now)
        expected = feed.evaluate(now, store)
        modelcache.save(feed, modelcache.path_for(db), store.store_id())
    away = tmp_path / "elsewhere.db"
    db.rename(away)
    keeper = ModelKeeper(ThreadPoolExecutor(1))
    keeper.prefetch(config)
    assert keeper._read is not None
    found = keeper._read[1].result(timeout=60)
    assert found is not None and found.refused is None and found.feed is not None
    read = found.feed
    assert modelcache.path_for(db).exists()  # nothing decided yet: the store has not been asked
    away.rename(db)

    async def first_evaluation() -> dict[str, WindowResult]:
        keeper.preload(config, lambda: now)
        with Store.open(db, readonly=True) as reader:
            done = await keeper.evaluate(config, reader, lambda: now, HeldBackLog())
        assert done is not None
        return done.windows

    assert asyncio.run(first_evaluation()) == expected
    assert keeper.feed is read  # the very feed read before the store was there
    assert found.feed is None  # taken: the read no longer holds it
    assert not modelcache.path_for(db).exists()
    keeper.executor.shutdown()
