"""daemon/coldread.py: a cold load whose heartbeat rows another process reads holds what a load reading them all
itself holds, whether that process sends everything, fails at once or fails half-way.

A real store ingested by the real Ingester from a simulated state, and a real child interpreter (``python -m
daemon.coldread``) reading it over a pipe.
"""

from __future__ import annotations

import logging
import os
import pickle
import select
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from daemon import coldread
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.modelkeeper import LiveFeed
from daemon.simulate import simulate
from daemon.store import Store
from scorers.live.columns import columns_of, since
from scorers.score import to_json

#: One 24-hour window on three days of data: the first day is behind it and its slack, so the load leaves it in the
#: store (the rows are read with a horizon).
CONFIG = replace(Config(), scoring=replace(Config().scoring, windows=(("24h", timedelta(hours=24)),)))
#: A child that dies after sending its first chunk (the load's reader sees it, then the end of the pipe).
_DIES_HALF_WAY = """
import os
from daemon import coldread, forking
sent = []
def write(data):
    if sent:
        os._exit(5)
    forking.write_all(1, data)
    sent.append(len(data))
coldread.serve(coldread.read_request(0), 0, write)
"""


#: A child that sends every heartbeat row, from the top down, whatever the load says it read itself.
_SENDS_EVERYTHING = """
import os
from daemon import coldread, forking
request = coldread.read_request(0)
unread, _ = os.pipe()  # a frontier no one writes: 0, the bottom
coldread.serve(request, unread, lambda data: forking.write_all(1, data))
"""


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, datetime]:
    tmp = tmp_path_factory.mktemp("coldread")
    now = simulate(11, tmp / "state", agents=3, days=3).end
    with Store.open(tmp / "honestyd.db") as store:
        Ingester(store, tmp / "state", CONFIG, clock=lambda: now).scan()
    return tmp / "honestyd.db", now


def _loaded(db: Path, now: datetime, **kw: Any) -> tuple[list[Any], dict[str, Any]]:
    """The records a load holds (sorted, as events) and the windows of its first evaluation."""
    with Store.open(db, readonly=True) as store:
        feed = LiveFeed(CONFIG)
        feed.load(store, now, **kw)
        records = sorted(feed.model.records())
        return records, {n: to_json(w) for n, w in feed.evaluate(now, store).items()}


class _Started:
    """coldread.start with what the test sets, remembering the readers it made."""

    def __init__(self, **kw: Any) -> None:
        self.kw = kw
        self.readers: list[coldread.Reader] = []

    def __call__(self, request: coldread.Request) -> coldread.Reader | None:
        reader = coldread.start(replace(request, chunk=7), read_from=0, cores=lambda: 2, **self.kw)
        if reader is not None:
            self.readers.append(reader)
            # This load reads a few thousand rows in milliseconds, before the child is up: let the child's first chunk
            # (or its end) come first, so that both read some (a deadline, not a wait for time to pass).
            assert reader.process.stdout is not None
            select.select([reader.process.stdout], [], [], 60)
        return reader


def test_a_load_whose_heartbeat_rows_a_child_reads_holds_what_a_load_reading_them_itself_holds(
        ingested: tuple[Path, datetime]) -> None:
    db, now = ingested
    alone = _loaded(db, now, read_elsewhere=None)
    started = _Started()
    with Store.open(db, readonly=True) as store:
        horizon = LiveFeed(CONFIG).model.horizon_at(now)  # what the load leaves in the store is not read
        assert horizon is not None
        heartbeats = len(list(store.heartbeat_rows_up_to(store.feed_marks()[0], newer_than=horizon)))
    assert _loaded(db, now, read_elsewhere=started) == alone  # every row once: none lost, none doubled
    reader = started.readers[0]
    assert len(started.readers) == 1 and reader.ended and not reader.failed
    assert 0 < reader.rows <= heartbeats
    assert started.readers[0].process.returncode == 0
    assert len(alone[0]) > 100 and alone[1]["24h"]["agents"]


@pytest.mark.parametrize(("script", "status"), [("import sys; sys.exit(3)", 3), (_DIES_HALF_WAY, 5)])
def test_a_child_that_fails_leaves_its_rows_to_the_load_and_nothing_is_lost_or_held_twice(
        ingested: tuple[Path, datetime], caplog: pytest.LogCaptureFixture, script: str, status: int) -> None:
    db, now = ingested
    alone = _loaded(db, now, read_elsewhere=None)
    started = _Started(command=(sys.executable, "-c", script))
    with caplog.at_level(logging.WARNING, logger="honestyd"):
        assert _loaded(db, now, read_elsewhere=started) == alone
    reader = started.readers[0]
    assert reader.failed
    assert f"exit status {status}" in caplog.text and "were read here" in caplog.text
    assert (reader.rows > 0) == (status == 5)  # a chunk came before it died: kept, and not read here again


def test_a_child_that_cannot_be_started_leaves_the_load_to_read_everything(ingested: tuple[Path, datetime],
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    db, now = ingested
    alone = _loaded(db, now, read_elsewhere=None)
    started = _Started(command=(str(db.parent / "no-such-program"),))
    with caplog.at_level(logging.WARNING, logger="honestyd"):
        assert _loaded(db, now, read_elsewhere=started) == alone
    assert started.readers == [] and "reads on one core" in caplog.text


def test_no_child_for_a_small_store_or_one_core(ingested: tuple[Path, datetime]) -> None:
    db, _ = ingested
    request = coldread.Request(db, 1_000, None, None, frozenset(), 0)
    assert coldread.start(request, read_from=1_001, cores=lambda: 2) is None
    assert coldread.start(request, read_from=0, cores=lambda: 1) is None


def test_a_load_that_fails_stops_its_child(ingested: tuple[Path, datetime]) -> None:
    db, now = ingested
    started = _Started()
    with Store.open(db, readonly=True) as store:
        feed = LiveFeed(CONFIG)

        def broken(*_: Any, **__: Any) -> Iterator[Any]:
            raise RuntimeError("a rule's bug")

        feed.model.add_labels = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            feed.load(store, now, read_elsewhere=started)
    process = started.readers[0].process
    assert process.returncode is not None  # stopped and waited for, not left writing to a pipe no one reads


@pytest.mark.parametrize("chunk", [1, 5, 10_000])
def test_records_made_from_columns_are_the_records_made_from_the_rows(ingested: tuple[Path, datetime],
                                                                       chunk: int) -> None:
    """The model's records from the columns (texts reduced where they were read) are those it makes from the rows:
    equal, and equal values (agents, kinds, paths, shapes, citations) one object, across the chunks too."""
    db, _ = ingested
    with Store.open(db, readonly=True) as store:
        rows = list(store.event_rows_up_to(store.feed_marks()[0]))
    expected, model = LiveFeed(CONFIG).model, LiveFeed(CONFIG).model
    expected.add_rows(rows)
    vocabulary, kinds = model.read_plan()
    model.add_columns(columns_of(rows[k:k + chunk], vocabulary, kinds) for k in range(0, len(rows), chunk))
    t = model._table
    made = [t.event(s) for s in model._loaded]
    assert made == [expected._table.event(s) for s in expected._loaded]
    # Into a table holding slots let go (given first, row by row): the same records.
    freed = LiveFeed(CONFIG).model
    freed.add_columns([columns_of(rows[:3], vocabulary, kinds)])
    for s in freed._loaded:
        freed._table.release(s)
    del freed._loaded[:]
    freed.add_columns(columns_of(rows[k:k + chunk], vocabulary, kinds) for k in range(0, len(rows), chunk))
    assert [freed._table.event(s) for s in freed._loaded] == made
    # A chunk's rows after a rowid (the rest were read elsewhere too) are the records of those rows.
    cut = rows[len(rows) // 3][0][0]
    tail, whole = LiveFeed(CONFIG).model, LiveFeed(CONFIG).model
    tail.add_columns([since(columns_of(rows, vocabulary, kinds), cut)])
    whole.add_rows(r for r in rows if r[0][0] > cut)
    assert tail.records() == whole.records() and 0 < len(tail._loaded) < len(rows)
    assert since(columns_of(rows, vocabulary, kinds), rows[-1][0][0]).ids == []
    assert model._documents == expected._documents
    assert any(e.citations for e in made) and any(e.line is None for e in made)
    for name in ("sources", "threads", "citations", "shapes"):  # the values records share, each once, across chunks
        values = getattr(t, name).values
        assert values == getattr(expected._table, name).values and len(set(values)) == len(values), name
    for field in ("agent", "kind", "path"):
        values = [getattr(source, field) for source in t.sources.values]
        assert len({id(v) for v in values}) == len(set(values)), field


def test_rows_the_load_and_the_child_both_read_are_kept_once(ingested: tuple[Path, datetime]) -> None:
    """A child that never stops at the load's frontier sends rows the load read too (from the first chunk on): the
    load keeps each once, and stops reading where the child's chunks begin."""
    db, now = ingested
    alone = _loaded(db, now, read_elsewhere=None)
    started = _Started(command=(sys.executable, "-c", _SENDS_EVERYTHING))
    assert _loaded(db, now, read_elsewhere=started) == alone
    assert started.readers[0].ended and not started.readers[0].failed


def test_the_child_sends_every_heartbeat_row_once_from_the_top_down_until_the_frontier(
        ingested: tuple[Path, datetime]) -> None:
    db, _ = ingested
    with Store.open(db, readonly=True) as store:
        top = store.feed_marks()[0]
        expected = [r[0] for r, _ in store.heartbeat_rows_up_to(top)]
    for frontier in (0, top // 2):
        unread, write_end = os.pipe()
        os.write(write_end, coldread._NUMBER.pack(frontier))
        sent: list[bytes] = []
        request = coldread.Request(db, top, None, None, frozenset({"dm"}), os.getpid(), chunk=7)
        try:
            coldread.serve(request, unread, sent.append)
        finally:
            os.close(unread)
            os.close(write_end)
        messages = [pickle.loads(data[coldread._NUMBER.size:]) for data in sent]
        assert messages[-1] is None
        chunks = messages[:-1]
        his = [top] + [lo for lo, _ in chunks[:-1]]
        assert all(hi - lo <= 7 for hi, (lo, _) in zip(his, chunks, strict=True))  # contiguous, from the top down
        assert chunks[-1][0] == frontier
        rowids = [rowid for _, c in reversed(chunks) for rowid in c.rowid]
        assert rowids == [r for r in expected if r > frontier]


def test_a_child_far_ahead_hands_over_its_chunks_one_read_at_a_time(ingested: tuple[Path, datetime],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks of a child far ahead of the load wait in the pipe, not in the load: each call hands over the chunks
    one read of the pipe completes, so the load keeps a chunk before it takes more (all at once, a child that read
    half the store meanwhile would have half the store held twice here)."""
    db, _ = ingested
    monkeypatch.setattr(coldread, "_READ", 64)  # smaller than any chunk: one read completes at most one
    with Store.open(db, readonly=True) as store:
        top = store.feed_marks()[0]
        expected = len(list(store.heartbeat_rows_up_to(top)))
    request = coldread.Request(db, top, None, None, frozenset({"dm"}), os.getpid(), chunk=7)
    reader = coldread.start(request, read_from=0, cores=lambda: 2,
                            command=(sys.executable, "-c", _SENDS_EVERYTHING))
    assert reader is not None
    try:
        handed: list[int] = []
        while not reader.ended:
            handed.append(len(reader.arrived(wait=True)))
    finally:
        reader.close()
    assert not reader.failed and reader.rows == expected
    assert max(handed) == 1 and sum(handed) > 10
