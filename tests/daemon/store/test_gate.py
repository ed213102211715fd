"""The store's gate: a reader that runs often keeps its snapshots out of the writer's COMMITs, so the WAL starts over.

Real SQLite files and real threads; the scenario is run gated and ungated, so the test shows it tells them apart.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from daemon.store import Gate, Store
from daemon.store import gate as store_module

ROUNDS = 10
ROW = b"x" * 3000  # about one 4 KiB page a row
ROWS = 50  # a transaction of ~50 pages, past the 20-page auto-checkpoint set below


def _reader_holding(reader: Store, release: threading.Event, hold_s: float) -> threading.Thread:
    """A thread holding one read snapshot (opened before this returns) until ``release`` is set or ``hold_s``."""
    entered = threading.Event()

    def run() -> None:
        with reader.reading():
            reader.conn.execute("SELECT count(*) FROM t").fetchone()
            entered.set()
            release.wait(hold_s)

    thread = threading.Thread(target=run)
    thread.start()
    assert entered.wait(5)
    return thread


def _wal_after_rounds(tmp_path: Path, gate: Gate | None) -> tuple[int, int]:
    """ROUNDS transactions, each committed while the reader has a snapshot open; (WAL bytes, one round's bytes)."""
    tmp_path.mkdir()
    db = tmp_path / "gate.db"
    writer = Store.open(db, gate=gate)
    writer.conn.execute("PRAGMA wal_autocheckpoint=20")
    writer.conn.execute("CREATE TABLE t (b BLOB)")
    reader = Store.open(db, readonly=True, gate=gate)
    wal = Path(f"{db}-wal")
    writer.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    try:
        for _ in range(ROUNDS):
            thread = _reader_holding(reader, threading.Event(), 0.05)
            writer.conn.execute("BEGIN IMMEDIATE")
            writer.conn.executemany("INSERT INTO t VALUES (?)", [(ROW,)] * ROWS)
            writer.commit()  # gated: after the reader's snapshot ends; ungated: while it is open
            thread.join()
        assert writer.conn.execute("SELECT count(*) FROM t").fetchone()[0] == ROUNDS * ROWS
        return wal.stat().st_size, ROWS * len(ROW)
    finally:
        reader.close()
        writer.close()


def test_a_gated_reader_lets_every_commit_checkpoint_so_the_wal_starts_over(tmp_path: Path) -> None:
    gate = Gate()
    gated, round_bytes = _wal_after_rounds(tmp_path / "gated", gate)
    assert gate.ungated == 0  # every COMMIT waited for the reader's snapshot to end
    ungated, _ = _wal_after_rounds(tmp_path / "ungated", None)
    print(f"\nWAL after {ROUNDS} rounds of {round_bytes / 1e3:.0f} kB: {gated / 1e3:.0f} kB gated,"
          f" {ungated / 1e3:.0f} kB ungated")
    assert gated < 3 * round_bytes  # reused from the start each round
    assert ungated > 5 * round_bytes  # the same scenario without the gate grows it every round


def test_a_commit_waits_for_a_stuck_reader_only_so_long_and_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that outlasts GATE_WAIT_S delays the first COMMIT by that much; the COMMITs after it, during the same
    read, go ahead at once (a catch-up sync of seconds must not cost every group of a pass a wait). A new read is
    waited for again."""
    monkeypatch.setattr(store_module, "GATE_WAIT_S", 0.3)
    db = tmp_path / "gate.db"
    gate = Gate()
    writer = Store.open(db, gate=gate)
    writer.conn.execute("CREATE TABLE t (b BLOB)")
    reader = Store.open(db, readonly=True, gate=gate)

    def commit_timed() -> float:
        start = time.monotonic()
        with writer.atomic():  # atomic() commits through the same gate
            writer.conn.execute("INSERT INTO t VALUES (?)", (ROW,))
        return time.monotonic() - start

    done = threading.Event()
    thread = _reader_holding(reader, done, 30)  # until the commits below have gone through
    try:
        waits = [commit_timed() for _ in range(3)]
        other = sqlite3.connect(db)
        assert other.execute("SELECT count(*) FROM t").fetchone()[0] == 3  # committed while the reader still reads
        other.close()
        assert gate.locked()  # the reader still had the gate: the writer did not take it from it
    finally:
        done.set()
        thread.join()
    assert not gate.locked()  # and the writer did not release what it never held
    assert waits[0] >= 0.3 and waits[1] < 0.3 and waits[2] < 0.3, waits
    assert gate.ungated == 3  # each went ahead without the gate
    done = threading.Event()
    thread = _reader_holding(reader, done, 30)  # a new read: waited for once more
    try:
        assert commit_timed() >= 0.3
    finally:
        done.set()
        thread.join()
    assert gate.ungated == 4
    assert commit_timed() < 0.3 and gate.ungated == 4  # no read: the COMMIT holds the gate
    reader.close()
    writer.close()
