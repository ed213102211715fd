"""The store's seams: transactions and ingest groups, the typed queries the live model asks, the probe of a --db
file, and the one routing of files to sources. Real SQLite files throughout."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.records import Event
from collectors.sources import LOGS, SOURCES, source_of
from daemon.config import Config, Globs
from daemon.store import IndexRow, Store, table_names
from tests.helpers import T0


class Refused(Exception):
    """What a write the store refuses stands for here."""


def _modifications(db: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(db)
    try:
        return sorted(conn.execute("SELECT path, at_us FROM file_changes").fetchall())
    finally:
        conn.close()


def _watched(store: Store) -> tuple[list[str], list[str]]:
    calls: tuple[list[str], list[str]] = ([], [])
    store.on_commit = lambda: calls[0].append("commit")
    store.on_rollback = lambda: calls[1].append("rollback")
    return calls


def test_a_group_keeps_what_next_committed_and_rolls_back_only_the_open_transaction(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    with Store.open(db) as store:
        commits, rollbacks = _watched(store)
        with pytest.raises(Refused), store.group() as next_transaction:
            assert store.grouped and store.conn.in_transaction
            store.add_file_change("a.md", T0)
            next_transaction()
            store.add_file_change("b.md", T0)
            raise Refused
        assert not store.grouped and not store.conn.in_transaction
        assert (commits, rollbacks) == (["commit"], ["rollback"])
        assert [p for p, _ in _modifications(db)] == ["a.md"]
        with store.group():  # and a group that ends well commits its last transaction
            store.add_file_change("c.md", T0)
        assert commits == ["commit", "commit"] and [p for p, _ in _modifications(db)] == ["a.md", "c.md"]


def test_transactions_inside_a_group_take_no_savepoints_and_outside_one_nest_as_savepoints(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.db") as store:
        sql: list[str] = []
        store.conn.set_trace_callback(sql.append)
        with store.group(), store.transaction():
            store.add_file_change("a.md", T0)
        assert not any("SAVEPOINT" in s.upper() for s in sql), sql
        sql.clear()
        with store.transaction(), store.transaction():
            store.add_file_change("b.md", T0)
        assert any("SAVEPOINT" in s.upper() for s in sql), sql


def test_a_transaction_rolled_back_says_so_and_atomic_is_the_same(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    with Store.open(db) as store:
        commits, rollbacks = _watched(store)
        assert Store.atomic is Store.transaction
        with pytest.raises(Refused), store.transaction():
            store.add_file_change("a.md", T0)
            raise Refused
        assert (commits, rollbacks) == ([], ["rollback"]) and _modifications(db) == []


def test_end_refused_ends_a_transaction_left_open_and_is_a_no_op_otherwise(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    with Store.open(db) as store:
        _, rollbacks = _watched(store)
        store.end_refused()  # none open
        store.conn.execute("BEGIN IMMEDIATE")  # as a COMMIT refused by SQLITE_BUSY leaves it
        store.add_file_change("a.md", T0)
        store.end_refused()
        assert not store.conn.in_transaction and _modifications(db) == [] and rollbacks == []
        with store.transaction():  # later writes commit again rather than nest in the old one
            store.add_file_change("b.md", T0)
    assert [p for p, _ in _modifications(db)] == ["b.md"]


def _event(record_id: str, minutes: int, path: str = "heartbeats/a.jsonl", line: int | None = 1) -> Event:
    return Event(record_id, T0 + timedelta(minutes=minutes), "ada", "dm", path, line)


def test_the_live_models_queries_select_what_they_say(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.db") as store:
        with store.transaction():
            store.add_events([_event("old", 0, line=1), _event("kept", 0, line=2), _event("kept", 120, line=3),
                              _event("new", 120, line=4)])
            store.add_events([_event("b1", 60, "briefs/b.md", None)])
            store.put_file(IndexRow("briefs/b.md", T0, None, 1, 10, "sha", False))
        top = store.feed_marks()[0]
        assert [e.id for _, e in store.events_up_to(top)] == ["old", "kept", "kept", "new", "b1"]
        assert [e.id for _, e in store.events_up_to(4)] == ["old", "kept", "kept", "new"]
        # Newer than T0 + 30 min: the newer events, the brief, and the old record whose id a newer one shares.
        newer = store.events_up_to(top, newer_than=T0 + timedelta(minutes=30))
        assert [(rowid, e.id) for rowid, e in newer] == [(2, "kept"), (3, "kept"), (4, "new"), (5, "b1")]
        assert [(rowid, e.id) for rowid, e in store.events_between(2, 4)] == [(3, "kept"), (4, "new")]
        assert [e.id for e in store.decisions_of("briefs/b.md")] == ["b1"]
        assert store.decisions_of("heartbeats/a.jsonl") == []


def test_the_heartbeat_rows_and_the_other_rows_are_the_rows_up_to_a_mark_split_in_two(tmp_path: Path) -> None:
    """A cold load may read the heartbeat rows in another process (daemon/coldread.py) and the rest itself: the two
    queries give every row of event_rows_up_to once, from any rowid on, with or without a horizon; a brief older than
    the horizon is kept when a newer record shares its id, as an old heartbeat row is."""
    with Store.open(tmp_path / "h.db") as store:
        with store.transaction():
            store.add_events([_event("old", 0, line=1), _event("kept", 0, line=2), _event("kept", 120, line=3),
                              _event("new", 120, line=4), _event("b2", 150, line=5)])
            store.add_events([_event("b1", 60, "briefs/b.md", None), _event("b2", 0, "briefs/c.md", None),
                              _event("b3", 0, "briefs/d.md", None)])
        top = store.feed_marks()[0]
        assert store.file == tmp_path / "h.db"

        def rowids(rows: Iterable[tuple[Sequence[Any], Any]]) -> list[int]:
            return [r[0] for r, _ in rows]

        for horizon in (None, T0 + timedelta(minutes=30)):
            expected = rowids(store.event_rows_up_to(top, newer_than=horizon))
            for after in range(top + 1):
                heartbeats = rowids(store.heartbeat_rows_up_to(top, after=after, newer_than=horizon))
                assert all(rowid > after for rowid in heartbeats)
                mine = rowids(store.heartbeat_rows_up_to(after, newer_than=horizon))
                others = rowids(store.other_rows_up_to(top, newer_than=horizon))
                assert sorted(mine + heartbeats + others) == expected
        # With the horizon: "old" goes, the old "kept" stays beside its newer twin, so does the old brief "b2".
        assert rowids(store.other_rows_up_to(top, newer_than=T0 + timedelta(minutes=30))) == [2, 6, 7]
    with Store.open(":memory:") as memory:
        assert memory.file is None


def test_table_names_tells_an_honestyd_store_another_database_and_no_database(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.db"):
        pass
    assert table_names(str(tmp_path / "h.db")) is not None
    assert "migrations" in (table_names(str(tmp_path / "h.db")) or set())
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert table_names(str(other)) == {"t"}
    (tmp_path / "junk.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    assert table_names(str(tmp_path / "junk.db")) is None
    with Store.open(tmp_path / "h.db") as store:
        assert "migrations" in store.tables() and "events" in store.tables()


def test_a_path_belongs_to_the_first_source_whose_glob_matches_it() -> None:
    globs = Globs(heartbeats="logs/*.jsonl", labels="logs/*.jsonl", briefs="notes/*.md", findings="notes/*.md",
                  evals="evals/*.json")
    assert source_of(globs, "logs/a.jsonl") == "heartbeats"
    assert source_of(globs, "notes/x.md") == "briefs"
    assert source_of(globs, "evals/r.json") == "evals"
    assert source_of(globs, "logs/sub/a.jsonl") is None  # * does not cross /
    assert source_of(Config().globs, "labels/l.jsonl") == "labels"
    assert source_of(Config().globs, "findings/f.md") == "findings"
    assert source_of(Config().globs, "README.md") is None
    assert SOURCES[1:3] == LOGS[:2] and SOURCES[0] == LOGS[2] == "reviews"


@pytest.mark.parametrize("last", ["008_store_id", "015_citations_keep_only_their_key"])
def test_the_file_index_is_read_row_by_row_from_a_store_of_any_version(tmp_path: Path, last: str) -> None:
    """``file_entries_read`` (what a load puts in the model, an entry at a time) gives an entry per canonical file with
    its creation, deletion and modifications, in the order ``file_entries`` holds them; a store an older honestyd
    left (before migration 009: no names through symlinks), opened read-only, is read as that version read it."""
    from collectors.records import FileEntry
    from collectors.rfc3339 import to_us
    from tests.helpers import store_as_of

    db = tmp_path / "old.db"
    conn = store_as_of(db, last)
    rows = [("a.md", T0, None), ("b.md", T0 + timedelta(hours=1), T0 + timedelta(hours=3)), ("c.jsonl", T0, None)]
    names = "path, created_us, deleted_us, mtime_ns, size, sha, front_matter"
    for path, created, deleted in rows:
        conn.execute(f"INSERT INTO files ({names}) VALUES (?, ?, ?, 0, 0, 'x', 0)",
                     (path, to_us(created), None if deleted is None else to_us(deleted)))
    if last != "008_store_id":  # a name through a symlink: no entry of its own
        conn.execute(f"INSERT INTO files ({names}, canonical) VALUES ('link.md', 0, NULL, 0, 0, 'x', 0, 'a.md')")
    conn.execute("INSERT INTO file_changes (path, at_us) VALUES ('c.jsonl', ?), ('c.jsonl', ?)",
                 (to_us(T0 + timedelta(hours=2)), to_us(T0 + timedelta(hours=1))))
    conn.execute("COMMIT")
    conn.close()
    with Store.open(db, readonly=True) as reader:
        read = list(reader.file_entries_read())
        assert read == [FileEntry("a.md", T0),
                        FileEntry("b.md", T0 + timedelta(hours=1), (), T0 + timedelta(hours=3)),
                        FileEntry("c.jsonl", T0, (T0 + timedelta(hours=1), T0 + timedelta(hours=2)))]
        assert reader.file_entries() == {e.path: e for e in read}
