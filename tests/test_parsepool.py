"""Parsing in a worker process: the store ends up byte-for-byte what inline parsing gives, batch boundaries,
rejects and labels included, and a worker that dies costs nothing (its batch is parsed inline)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon import ingest as ingest_module
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.parsepool import Batch, InlineParser, Parser, ProcessParser, parse_batch
from daemon.store import Store
from tests.conftest import ROOT

TABLES = ("events", "citations", "labels", "rejects", "cursors")
AT = datetime(2026, 5, 3, tzinfo=UTC)  # when rejects are seen: fixed, so two stores can be compared whole


def _write_state(root: Path, lines: int) -> None:
    """A log with decisions citing things, bad lines among them, an unfinished last line; and a labels file."""
    (root / "heartbeats").mkdir(parents=True)
    (root / "labels").mkdir()
    out = []
    for i in range(lines):
        if i % 97 == 5:
            out.append("{not json")
        elif i % 131 == 7:
            out.append(json.dumps({"id": f"e{i}", "agent": "ada", "kind": "dm"}))  # no ts
        else:
            out.append(json.dumps({
                "id": f"e{i}", "ts": f"2026-05-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                "agent": ("ada", "bob")[i % 2], "kind": ("dm", "progress")[i % 3 == 0], "thread": f"t{i % 7}",
                "text": f"see [source: briefs/b{i % 5}.md] and https://Example.org/x/{i % 11}/ run #{i % 13}",
                "citations": ["issue #4"] if i % 17 == 0 else [],
            }))
    (root / "heartbeats" / "ada.jsonl").write_text("\n".join(out) + "\n" + '{"id": "unfinished"')
    (root / "labels" / "r.jsonl").write_text("".join(
        json.dumps({"ts": "2026-05-02T00:00:00Z", "decision": f"e{i}", "value": "down", "reviewer": "rev"}) + "\n"
        for i in range(0, 50, 5)))


def _ingest(root: Path, db: Path, parser: Parser) -> dict[str, list[tuple[object, ...]]]:
    with Store.open(db) as store:
        Ingester(store, root, Config(), clock=lambda: AT, parser=parser).scan()
    conn = sqlite3.connect(db)
    try:
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in TABLES}
    finally:
        conn.close()


def test_worker_parse_stores_what_inline_parse_stores(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_module, "BATCH_LINES", 700)  # several batches in flight, last one short
    root = tmp_path / "state"
    _write_state(root, 3000)
    inline = _ingest(root, tmp_path / "inline.db", InlineParser())
    parser = ProcessParser(workers=1, min_lines=1)
    try:
        pooled = _ingest(root, tmp_path / "pooled.db", parser)
    finally:
        parser.close()
    assert parser.sent == 5 + 1  # 3000 log lines in batches of 700, and the labels file
    assert parser.lost == 0
    assert pooled == inline
    assert len(inline["events"]) > 2900 and len(inline["rejects"]) > 40 and len(inline["labels"]) == 10


def test_a_dead_worker_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path / "state"
    _write_state(root, 1200)
    expected = _ingest(root, tmp_path / "inline.db", InlineParser())
    parser = ProcessParser(workers=1, min_lines=1)
    try:
        lines = [(b'{"id": "x", "ts": "2026-05-01T00:00:00Z", "agent": "a", "kind": "dm"}', b"")]
        warm = Batch(lines, "heartbeats/a.jsonl", 1, 0, "heartbeats", "o/r")
        assert parser.submit(warm)() == parse_batch(warm)
        assert parser._pool is not None
        pids = list(parser._pool._processes)  # the worker that is about to die
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        got = _ingest(root, tmp_path / "pooled.db", parser)
        assert parser.lost == 1  # found at the next submit or result; that batch was parsed inline
        assert got == expected
        assert parser.submit(warm)() == parse_batch(warm)  # and a new worker serves later batches
        assert parser._pool is not None and not set(parser._pool._processes) & set(pids)
    finally:
        parser.close()


def test_worker_exits_when_the_daemon_is_killed(tmp_path: Path) -> None:
    """SIGKILL gives the daemon no chance to stop its worker: the worker notices it was orphaned and exits."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import time\n"
        "from daemon.parsepool import Batch, ProcessParser\n"
        "if __name__ == '__main__':\n"  # spawn imports the main module again in the worker
        "    p = ProcessParser(workers=1, min_lines=1)\n"
        "    p.submit(Batch([(b'{}', b'')], 'heartbeats/a.jsonl', 1, 0, 'heartbeats', 'o/r'))()\n"
        "    print(*p._pool._processes, flush=True)\n"
        "    time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert parent.stdout is not None
        workers = [int(pid) for pid in parent.stdout.readline().split()]
        assert workers and all(Path(f"/proc/{pid}").exists() for pid in workers)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() and "(Z)" not in _state(pid) for pid in workers):
            assert time.monotonic() < deadline, "the orphaned worker is still running"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
        if parent.stdout is not None:
            parent.stdout.close()


def _state(pid: int) -> str:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "(Z)"
    return "(Z)" if state in ("Z", "X") else state
