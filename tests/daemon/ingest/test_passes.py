"""A watcher's batch of paths is ingested in one transaction per BATCH_LINES lines, not one per file: the same
rows and cursors as a pass over each path, far fewer commits, and a refused write keeps exactly-once."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.config import Config
from daemon.ingest import Ingester
from daemon.ingest import passes as ingest_module
from daemon.store import Store

AT = datetime(2026, 5, 3, tzinfo=UTC)


def _logs(root: Path, agents: int, lines: int, start: int = 0, pad: int = 0) -> list[str]:
    (root / "heartbeats").mkdir(parents=True, exist_ok=True)
    rels = []
    for a in range(agents):
        rel = f"heartbeats/a{a}.jsonl"
        with (root / rel).open("a") as f:
            for i in range(start, start + lines):
                f.write(json.dumps({"id": f"a{a}-{i}", "ts": "2026-05-01T00:00:00Z", "agent": f"a{a}", "kind": "dm",
                                    "text": f"line {i}" + "x" * pad}) + "\n")
        rels.append(rel)
    return rels


def _state(db: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    conn = sqlite3.connect(db)
    try:
        events = sorted(conn.execute("SELECT path, generation, line, id FROM events").fetchall())
        cursors = sorted(conn.execute("SELECT * FROM cursors").fetchall())
        return events, cursors
    finally:
        conn.close()


def test_one_transaction_per_group_same_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_module, "BATCH_LINES", 50)
    root = tmp_path / "state"
    rels = [*_logs(root, 20, 10), "heartbeats/long.jsonl"]  # 20 logs × 10 lines, then a long one
    with (root / "heartbeats" / "long.jsonl").open("w") as f:
        f.writelines(json.dumps({"id": f"l{i}", "ts": "2026-05-01T00:00:00Z", "agent": "l", "kind": "dm"}) + "\n"
                     for i in range(120))
    with Store.open(tmp_path / "each.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        commits: list[str] = []
        store.conn.set_trace_callback(lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None)
        for rel in rels:
            ingester.ingest_path(rel)
        each = len(commits)
    with Store.open(tmp_path / "group.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        commits = []
        store.conn.set_trace_callback(lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None)
        stats = ingester.ingest_paths(rels)
        grouped = len(commits)
    assert stats.records["heartbeats"] == 20 * 10 + 120
    assert _state(tmp_path / "group.db") == _state(tmp_path / "each.db")
    # Per path: an index update and a batch each (the long log: three batches). Grouped: one per 50 lines
    # (a group closes at the first path or batch boundary past 50), and the last.
    assert each >= 2 * 21
    assert grouped <= (20 * 10 + 120) // 50 + 2, grouped


def test_a_refused_group_rolls_back_and_is_retried_exactly_once(tmp_path: Path) -> None:
    root = tmp_path / "state"
    rels = _logs(root, 5, 20)
    with Store.open(tmp_path / "s.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        ingester.ingest_paths(rels)
        before = _state(tmp_path / "s.db")
        _logs(root, 5, 3000, start=20)  # more than the space left
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(sqlite3.OperationalError):
            ingester.ingest_paths(rels)
        assert not store.conn.in_transaction
        assert _state(tmp_path / "s.db") == before  # nothing of the refused group, cursors included
        store.conn.execute("PRAGMA max_page_count = 1073741823")
        ingester.ingest_paths(rels)
        ingester.ingest_paths(rels)  # and again: nothing more
    events, _ = _state(tmp_path / "s.db")
    assert sorted(e[3] for e in events) == sorted(f"a{a}-{i}" for a in range(5) for i in range(3020))


def test_a_refused_group_forgets_the_cursors_it_moved(tmp_path: Path) -> None:
    """The ingester keeps the cursors it wrote between passes; a group refused after some logs' cursors moved must
    not leave it believing them: their lines are read again at the retry (else they would be lost)."""
    root = tmp_path / "state"
    rels = _logs(root, 5, 20)
    with Store.open(tmp_path / "s.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        ingester.ingest_paths(rels)
        for rel in rels[:4]:  # a few lines in the first four: their cursors move in the open group
            with (root / rel).open("a") as f:
                f.write(json.dumps({"id": f"{rel}-new", "ts": "2026-05-01T00:00:00Z", "agent": "b", "kind": "dm"})
                        + "\n")
        with (root / rels[4]).open("a") as f:  # then more than the space left, in the last
            f.writelines(json.dumps({"id": f"big-{i}", "ts": "2026-05-01T00:00:00Z", "agent": "b", "kind": "dm",
                                     "text": "x" * 500}) + "\n" for i in range(3000))
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(sqlite3.OperationalError):
            ingester.ingest_paths(rels)
        store.conn.execute("PRAGMA max_page_count = 1073741823")
        ingester.ingest_paths(rels)
        # The file index too: each log's row is its size now (a believed, rolled-back update would skip it).
        sizes = dict(store.conn.execute("SELECT path, size FROM files").fetchall())
        assert sizes == {rel: (root / rel).stat().st_size for rel in rels}
    events, _ = _state(tmp_path / "s.db")
    ids = [e[3] for e in events]
    assert len(ids) == len(set(ids)) == 5 * 20 + 4 + 3000
    assert {f"{rel}-new" for rel in rels[:4]} <= set(ids)


def _rows(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("grouped", [True, False], ids=["ingest_paths", "scan"])
def test_a_pass_refused_part_way_reports_what_it_committed_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grouped: bool
) -> None:
    """The daemon counts ``Ingester.committed`` after a refused pass: the rows of the groups (or files) committed
    before the refusal, which a retry will not count again (their cursors moved with them)."""
    monkeypatch.setattr(ingest_module, "BATCH_LINES", 50)
    root = tmp_path / "state"
    rels = _logs(root, 12, 60, pad=1000)  # a group (or a file) of 60 lines, ~15 pages, each
    (root / "heartbeats" / "0bad.jsonl").write_text("not json\n")  # a reject, first in either order
    db = tmp_path / "s.db"
    with Store.open(db) as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages + 60}")  # room for a few groups: it stops part-way
        with pytest.raises(sqlite3.OperationalError):
            if grouped:
                ingester.ingest_paths(["heartbeats/0bad.jsonl", *rels])
            else:
                ingester.scan()
        stored = _rows(db)
        assert 0 < stored < 12 * 60  # some groups went in, the refused one did not
        assert ingester.committed.records == {"heartbeats": stored}
        assert ingester.committed.rejects == {("heartbeats", "not_json"): 1}
        store.conn.execute("PRAGMA max_page_count = 1073741823")
        retried = ingester.scan()
        assert retried.records == {"heartbeats": 12 * 60 - stored}  # the rest, once; together: every line once
        assert ingester.committed.records == retried.records
    assert _rows(db) == 12 * 60


def test_a_logs_index_row_is_kept_between_passes_a_briefs_is_not(tmp_path: Path) -> None:
    """The ingester keeps the index rows of the logs it tails (each pass changes them; reading them again was two of
    five statements per log and pass) and not those of Markdown files, read only at a scan or a change: keeping the
    rows of a state's 21,840 files held 12 MB of the daemon's peak."""
    root = tmp_path / "state"
    logs = _logs(root, 3, 2)
    (root / "briefs").mkdir()
    briefs = [f"briefs/b{i}.md" for i in range(4)]
    for rel in briefs:
        (root / rel).write_text("---\nagent: a0\nts: 2026-05-01T00:00:00Z\n---\nA brief.\n")
    with Store.open(tmp_path / "s.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        ingester.scan()
        reads: list[str] = []
        store.conn.set_trace_callback(lambda sql: reads.append(sql) if "FROM files" in sql else None)
        _logs(root, 3, 2, start=2)
        ingester.ingest_paths(logs)
        assert reads == [], "a log's row is read from the store again"
        (root / briefs[0]).write_text("---\nagent: a0\nts: 2026-05-01T00:00:00Z\n---\nA brief, edited.\n")
        ingester.ingest_paths([briefs[0]])
        assert reads, "a brief's row came from memory"
        assert set(ingester._rows) == set(logs)
