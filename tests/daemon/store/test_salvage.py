"""daemon/store/salvage.py: a store is read ahead, in order, before SQLite checks every page of it; what is not a
regular file is left to the check without blocking."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from daemon.store import salvage


def _bytes_read() -> int:
    """This process's bytes read through read(2) so far (page cache or disk alike)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def _store(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,) for _ in range(4000)])
    conn.commit()
    conn.close()
    return path


def test_a_store_is_read_whole_in_order_and_still_checked(tmp_path: Path) -> None:
    db = _store(tmp_path / "s.db")
    size = db.stat().st_size
    before = _bytes_read()
    salvage.read_ahead(db)
    assert _bytes_read() - before >= size > 2_000_000
    assert salvage.quick_check(db) == []
    with db.open("r+b") as f:  # a page of the table overwritten: the check still finds it
        f.seek(size // 2)
        f.write(b"\xff" * 4096)
    assert salvage.quick_check(db) != []


def test_what_is_not_a_regular_file_is_left_to_the_check(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: a blocking open would wait for ever
    done = threading.Event()

    def read() -> None:
        salvage.read_ahead(fifo)
        salvage.read_ahead(tmp_path)  # a folder
        salvage.read_ahead(tmp_path / "missing")
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10)
