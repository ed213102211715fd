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


def test_citations_survive_the_move_to_line_keys(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    conn.execute("BEGIN")
    for name, migration in MIGRATIONS[:3]:  # a database as the version before 004 left it
        migration(conn)
        conn.execute("INSERT INTO migrations VALUES (?, 'then')", (name,))
    conn.execute("INSERT INTO events (path, generation, line, id, ts_us, agent, kind, text, alternatives, subject)"
                 " VALUES ('heartbeats/a.jsonl', 0, 7, 'e-7', 0, 'ada', 'dm', 'x', '[]', '[]')")
    rowid = conn.execute("SELECT rowid FROM events").fetchone()[0]
    conn.execute("INSERT INTO citations (event, seq, type, target) VALUES (?, 0, 'url', 'https://x.org')", (rowid,))
    conn.execute("COMMIT")
    conn.close()
    with Store.open(db) as store:
        assert store.migrations()[-1] == "004_citations_by_line"
        [event] = store.events()
        assert event.id == "e-7" and [tuple(c) for c in event.citations] == [("url", "https://x.org")]
        assert store.citation_targets() == [("url", "https://x.org")]
