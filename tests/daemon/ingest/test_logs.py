"""Tailing a JSON Lines source (daemon/ingest/logs.py): a long log is read, parsed and stored a batch at a time, each
batch in its transaction with the cursor after it, and no garbage collection walks a batch's objects meanwhile."""

from __future__ import annotations

import gc
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


def _log(root: Path, lines: int, start: int = 0) -> None:
    (root / "heartbeats").mkdir(parents=True, exist_ok=True)
    with (root / "heartbeats" / "ada.jsonl").open("a") as f:
        f.writelines(json.dumps({"id": f"e{i}", "ts": "2026-05-01T00:00:00Z", "agent": "ada", "kind": "dm",
                                 "text": f"line {i}: see run #{100000 + i}", "citations": [f"docs/{i % 7}.md"]}) + "\n"
                     for i in range(start, start + lines))


def test_a_long_log_is_stored_a_batch_at_a_time_with_its_cursor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    monkeypatch.setattr(ingest_module, "BATCH_LINES", 50)
    root = tmp_path / "state"
    _log(root, 120)
    with (root / "heartbeats" / "ada.jsonl").open("a") as f:
        f.write('{"id": "half", "ts": "2026-05-01T00:00:00Z"')  # no newline yet: not read
    with Store.open(tmp_path / "h.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        commits: list[int] = []
        store.conn.set_trace_callback(
            lambda sql: commits.append(store.conn.execute("SELECT count(*) FROM events").fetchone()[0])
            if sql.strip().upper() == "COMMIT" else None)
        stats = ingester.scan()
        store.conn.set_trace_callback(None)
        assert stats.records == {"heartbeats": 120}
        assert [n for n in commits if n] == [50, 100, 120]  # one transaction per batch, the last one short
        [cursor] = store.cursors()
        assert (cursor.line, cursor.offset) == (120, len(b"".join(
            (root / "heartbeats" / "ada.jsonl").read_bytes().splitlines(keepends=True)[:120])))
        assert ingester.scan().records == {}  # read again: nothing twice
        _log(root, 3, start=120)  # completes the half line (a reject) and adds three
    conn = sqlite3.connect(tmp_path / "h.db")
    try:
        assert conn.execute("SELECT count(*), count(DISTINCT id) FROM events").fetchone() == (120, 120)
        assert conn.execute("SELECT count(*) FROM citations").fetchone() == (240,)
    finally:
        conn.close()


def test_reading_a_long_log_starts_no_garbage_collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each batch's lines and rows are thousands of objects kept until its commit: with the collector on, they would
    start collections walking them again and again (a young one per few hundred lines, and older ones walking every
    batch). A batch is read, parsed and stored with it paused, so its objects are gone before it runs again."""
    monkeypatch.setattr(ingest_module, "BATCH_LINES", 2000)
    root = tmp_path / "state"
    _log(root, 20000)
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    with Store.open(tmp_path / "h.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        gc.collect()
        gc.callbacks.append(count)
        try:
            stats = ingester.scan()
        finally:
            gc.callbacks.remove(count)
        assert stats.records == {"heartbeats": 20000}
    assert gc.isenabled()
    # What the pass does besides its ten batches (the walk, the index, the cursors) may start one or two; with
    # only the parse paused, this pass started thirteen.
    assert len(collections) <= 2, f"{len(collections)} collections: {collections}"
