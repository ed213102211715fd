"""Schema changes are named migrations recorded in a table; an old database is carried forward intact."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from daemon.store import MIGRATIONS, Store


def test_fresh_database_records_every_migration(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.db") as store:
        assert store.migrations() == [name for name, _ in MIGRATIONS]
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with Store.open(tmp_path / "h.db") as again:  # reopening applies nothing twice
        assert again.migrate() == []


def _as_left_before(db: Path, count: int) -> sqlite3.Connection:
    """A connection to ``db`` made as the version with the first ``count`` migrations left it, in a transaction."""
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    conn.execute("BEGIN")
    for name, migration in MIGRATIONS[:count]:
        migration(conn)
        conn.execute("INSERT INTO migrations VALUES (?, 'then')", (name,))
    return conn


def test_citations_survive_the_move_to_line_keys(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = _as_left_before(db, 3)  # a database as the version before 004 left it
    conn.execute("INSERT INTO events (path, generation, line, id, ts_us, agent, kind, text, alternatives, subject)"
                 " VALUES ('heartbeats/a.jsonl', 0, 7, 'e-7', 0, 'ada', 'dm', 'x', '[]', '[]')")
    rowid = conn.execute("SELECT rowid FROM events").fetchone()[0]
    conn.execute("INSERT INTO citations (event, seq, type, target) VALUES (?, 0, 'url', 'https://x.org')", (rowid,))
    conn.execute("COMMIT")
    conn.close()
    with Store.open(db) as store:
        assert "004_citations_by_line" in store.migrations()
        assert store.migrations()[-1] == MIGRATIONS[-1][0]
        [event] = store.events()
        assert event.id == "e-7" and [tuple(c) for c in event.citations] == [("url", "https://x.org")]
        assert store.citation_targets() == [("url", "https://x.org")]


def test_change_feed_records_removed_decisions_and_file_index_changes(tmp_path: Path) -> None:
    """What the daemon's model cannot see from growing rowids is written by triggers with the change itself."""
    from collectors.records import Event
    from collectors.rfc3339 import to_us
    from daemon.store import IndexRow
    from tests.helpers import T0

    with Store.open(tmp_path / "h.db") as store:
        _, _, _, start = store.feed_marks()
        with store.atomic():
            store.add_events([Event("b1", T0, "ada", "brief", "briefs/b.md", None)])
            store.put_file(IndexRow("briefs/b.md", T0, None, 1, 10, "sha", False))
            store.add_file_change("briefs/b.md", T0)
        with store.atomic():
            store.remove_document("briefs/b.md")
        changes = store.changes_since(start)
        assert [(what, path) for _, what, path, _ in changes] == [
            ("files", "briefs/b.md"), ("modified", "briefs/b.md"), ("events", "briefs/b.md")]
        assert changes[1][3] == to_us(T0)
        assert changes[-1][3] == 1  # the removed event's rowid, which SQLite may hand out again
        store.prune_changes(changes[-1][0])
        assert store.changes_since(start) == []


def test_the_feed_mark_survives_pruning_and_says_what_a_mark_can_catch_up_from(tmp_path: Path) -> None:
    """The feed's mark is the last seq handed out, not max(seq): pruned empty, the feed must not read as 'nothing
    applied yet' (a model cache holding the mark would read a pruned feed as intact)."""
    from daemon.store import IndexRow
    from tests.helpers import T0

    with Store.open(tmp_path / "h.db") as store:
        for i in range(3):
            with store.atomic():
                store.put_file(IndexRow(f"briefs/{i}.md", T0, None, 1, 10, "sha", False))
        top = store.feed_marks()[3]
        assert top == 3 and all(store.feed_kept_after(m) for m in (0, 1, 2, 3))
        assert not store.feed_kept_after(4)  # a mark the store never handed out: ahead of it
        store.prune_changes(1)
        assert [store.feed_kept_after(m) for m in (0, 1, 2, 3)] == [False, True, True, True]
        store.prune_changes(3)
        assert store.feed_marks()[3] == 3  # empty, yet still at 3
        assert [store.feed_kept_after(m) for m in (0, 2, 3)] == [False, False, True]
        with Store.open(tmp_path / "other.db") as other:
            assert len(store.store_id()) == 32 and store.store_id() != other.store_id()


def test_events_keep_only_the_index_their_queries_use(tmp_path: Path) -> None:
    """Migration 006 dropped the ts and id indexes no query used (each cost every insert); removing a document's
    decisions still goes through the (path, generation, line) key.
    """
    with Store.open(tmp_path / "h.db") as store:
        assert [row[1] for row in store.conn.execute("PRAGMA index_list(events)")] == ["sqlite_autoindex_events_1"]
        plan = " ".join(row[3] for row in store.conn.execute(
            "EXPLAIN QUERY PLAN DELETE FROM events WHERE path = ? AND line = 0", ("briefs/b.md",)))
        assert "sqlite_autoindex_events_1" in plan, plan


def test_citations_keep_only_their_key_and_still_give_the_distinct_targets(tmp_path: Path) -> None:
    """Migration 015 drops the (type, target) index every ingested citation paid for: a store as 014 left it keeps
    its citations, read by their event's key, and the distinct targets `honestyd verify` checks are the same."""
    db = tmp_path / "old.db"
    conn = _as_left_before(db, 14)  # a database as the version before 015 left it
    conn.execute("INSERT INTO events (path, generation, line, id, ts_us, agent, kind, text, alternatives, subject)"
                 " VALUES ('heartbeats/a.jsonl', 0, 7, 'e-7', 0, 'ada', 'dm', 'x', '[]', '[]')")
    conn.executemany("INSERT INTO citations (path, generation, line, seq, type, target) VALUES"
                     " ('heartbeats/a.jsonl', 0, 7, ?, ?, ?)", [(0, "url", "https://x.org"), (1, "run", "run:123456")])
    conn.execute("COMMIT")
    assert "citations_target" in {r[1] for r in conn.execute("PRAGMA index_list(citations)")}
    conn.close()
    with Store.open(db) as store:
        assert store.migrations()[14] == "015_citations_keep_only_their_key"
        assert [r[1] for r in store.conn.execute("PRAGMA index_list(citations)")] == ["sqlite_autoindex_citations_1"]
        [event] = store.events()
        assert [tuple(c) for c in event.citations] == [("url", "https://x.org"), ("run", "run:123456")]
        assert store.citation_targets() == [("run", "run:123456"), ("url", "https://x.org")]
    with Store.open(tmp_path / "fresh.db") as fresh:
        assert [r[1] for r in fresh.conn.execute("PRAGMA index_list(citations)")] == ["sqlite_autoindex_citations_1"]


def test_an_index_update_feeds_a_files_row_only_when_created_or_deleted_changes(tmp_path: Path) -> None:
    """Migration 007: an appended log's index update (size, mtime) feeds only its 'modified' row; a deletion and a
    re-creation (what the model keeps of the entry) each feed a 'files' row. The update is in place, not a REPLACE.
    """
    from datetime import timedelta

    from daemon.store import IndexRow
    from tests.helpers import T0

    log = "heartbeats/ada.jsonl"
    with Store.open(tmp_path / "h.db") as store:
        _, _, _, start = store.feed_marks()
        with store.atomic():
            store.put_file(IndexRow(log, T0, None, 1, 10, None, False))
        rowid = store.conn.execute("SELECT rowid FROM files WHERE path = ?", (log,)).fetchone()[0]
        for k in range(1, 4):  # three passes append to the log
            with store.atomic():
                store.put_file(IndexRow(log, T0, None, 1 + k, 10 + k, None, False))
                store.add_file_change(log, T0 + timedelta(seconds=k))
        with store.atomic():  # deleted, then re-created
            store.put_file(IndexRow(log, T0, T0 + timedelta(seconds=5), 4, 13, None, False))
        with store.atomic():
            store.put_file(IndexRow(log, T0 + timedelta(seconds=6), None, 5, 0, None, False))
        assert [what for _, what, _, _ in store.changes_since(start)] == [
            "files", "modified", "modified", "modified", "files", "files"]
        assert store.conn.execute("SELECT rowid FROM files WHERE path = ?", (log,)).fetchone()[0] == rowid
        row = store.index_rows_get(log)
        assert row is not None and (row.created, row.deleted, row.size) == (T0 + timedelta(seconds=6), None, 0)
