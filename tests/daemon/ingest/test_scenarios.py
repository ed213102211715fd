"""Exactly-once ingestion under the things real files do: partial lines, bad lines, rotation, truncation,
replacement, atomic saves, edits, deletion and symlinks (spec sections 1 and 1.4).

Every test drives the real :class:`~daemon.ingest.Ingester` over real files and a real SQLite file, calls
``scan()`` / ``ingest_path()`` explicitly (no sleeping, no watcher) and asserts exact counts.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sqlite3
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.jsonl import MAX_LINE_BYTES
from collectors.tail import CHUNK, line_batches
from daemon import cli
from daemon.config import Config
from daemon.ingest import Ingester, IngestStats
from daemon.store import Store, to_us
from scorers.context import Context
from tests.conftest import Run

TS = "2026-05-31T03:40:00Z"
TS_DT = datetime(2026, 5, 31, 3, 40, tzinfo=UTC)
T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
HB = "heartbeats/a.jsonl"


class FixedClock:
    """The injected clock: returns ``now`` until a test moves it."""

    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class State:
    """A state root, its database and the ingester feeding one into the other (restartable)."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "state"
        self.root.mkdir()
        self.db = tmp_path / "db.sqlite"
        self.clock = FixedClock()
        self.store = Store.open(self.db)
        self.ingester = Ingester(self.store, self.root, Config(), clock=self.clock)

    def restart(self) -> None:
        """Simulate a daemon restart: close the store, open a new Store and Ingester on the same file."""
        self.store.close()
        self.store = Store.open(self.db)
        self.ingester = Ingester(self.store, self.root, Config(), clock=self.clock)

    def scan(self) -> IngestStats:
        return self.ingester.scan()

    def path(self, rel: str) -> Path:
        return self.root / rel

    # --- what the store holds

    def count(self, table: str) -> int:
        n: int = self.store.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        return n

    def ids(self) -> list[str]:
        """Every stored event id in read order."""
        return [r[0] for r in self.store.conn.execute("SELECT id FROM events ORDER BY path, generation, line")]

    def rows(self, path: str = HB) -> list[tuple[int, int, str]]:
        """(generation, line, id) of the stored events of one file, in read order."""
        return [
            (g, n, i)
            for g, n, i in self.store.conn.execute(
                "SELECT generation, line, id FROM events WHERE path = ? ORDER BY generation, line", (path,)
            )
        ]

    def rejects(self) -> list[tuple[str, int, int, str, str]]:
        """(path, generation, line, source, reason) of every reject, in read order."""
        return [(r["path"], r["generation"], r["line"], r["source"], r["reason"]) for r in self.store.rejects()]

    def changes(self, path: str) -> list[datetime]:
        return list(self.store.file_entries()[path].modified)

    def assert_unique_ids(self) -> None:
        dup = self.store.conn.execute("SELECT id, count(*) FROM events GROUP BY id HAVING count(*) > 1").fetchall()
        assert dup == []


@pytest.fixture
def st(tmp_path: Path) -> Iterator[State]:
    state = State(tmp_path)
    yield state
    state.store.close()


def ev(eid: str | None, *, kind: str = "dm", ts: str = TS, agent: str = "cooper", text: str = "",
       ending: bytes = b"\n", **extra: Any) -> bytes:
    """One heartbeat line (``eid`` None: no id, so the id is the hash of the line)."""
    obj: dict[str, Any] = {"ts": ts, "agent": agent, "kind": kind}
    if eid is not None:
        obj["id"] = eid
    if text:
        obj["text"] = text
    obj.update(extra)
    return json.dumps(obj).encode() + ending


def obj_line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def sized(eid: str, size: int, ending: bytes = b"\n") -> bytes:
    """A valid event line of exactly ``size`` bytes before its ending."""
    head = json.dumps({"id": eid, "ts": TS, "agent": "cooper", "kind": "dm", "text": ""}).encode()
    pad = size - len(head)
    line = json.dumps({"id": eid, "ts": TS, "agent": "cooper", "kind": "dm", "text": "x" * pad}).encode()
    assert len(line) == size
    return line + ending


def hash_id(line: bytes) -> str:
    """Spec 1.1: the id of a line without one is SHA-256 of its bytes without the ending, 16 hex digits."""
    return hashlib.sha256(line.rstrip(b"\n").rstrip(b"\r")).hexdigest()[:16]


def append(path: Path, *chunks: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        for chunk in chunks:
            f.write(chunk)


def write_text(path: Path, text: str, mtime: datetime | None = None) -> None:
    """Write a file in place (same inode) and optionally pin its mtime, so 'when' never depends on the wall clock."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    if mtime is not None:
        ns = to_us(mtime) * 1000
        os.utime(path, ns=(ns, ns))


def export(db: Path) -> str:
    """``honestyd export decisions --db DB`` run in-process (the real command function)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["export", "decisions", "--db", str(db)]) == 0
    return out.getvalue()


def exported_ids(db: Path) -> list[str]:
    return [json.loads(line)["id"] for line in export(db).splitlines()]


def exported(db: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in export(db).splitlines():
        d = json.loads(line)
        assert d["id"] not in out
        out[d["id"]] = d
    return out


# --- 1. partial lines


def test_partial_line_is_read_once_when_completed(st: State) -> None:
    log = st.path(HB)
    third = ev("e3", text="third line")
    append(log, ev("e1"), ev("e2"), third[:10])
    st.scan()
    assert st.ids() == ["e1", "e2"]
    cursor = st.store.cursor(HB)
    assert cursor is not None
    assert (cursor.offset, cursor.line) == (len(ev("e1")) + len(ev("e2")), 2)

    st.scan()
    append(log, third[10:-1])  # everything but the newline: still not a line
    st.scan()
    assert st.ids() == ["e1", "e2"]
    assert st.count("rejects") == 0

    append(log, b"\n")
    stats = st.scan()
    assert stats.records["heartbeats"] == 1
    assert st.rows() == [(0, 1, "e1"), (0, 2, "e2"), (0, 3, "e3")]
    assert st.store.events()[2].text == "third line"

    st.scan()
    st.ingester.ingest_path(HB)
    assert st.count("events") == 3
    assert st.count("rejects") == 0
    st.assert_unique_ids()
    assert exported_ids(st.db) == ["e1", "e2", "e3"]


def test_partial_line_without_id_gets_the_hash_of_the_whole_line(st: State) -> None:
    """A half-read line must never be parsed: its hash id would differ from the completed line's."""
    log = st.path(HB)
    full = ev(None, text="no id here", ending=b"\r\n")
    append(log, full[:-8])
    st.scan()
    st.ingester.ingest_path(HB)
    assert st.count("events") == 0
    append(log, full[-8:-1])  # up to and including "\r": still unterminated
    st.scan()
    assert st.count("events") == 0
    append(log, b"\n")
    st.scan()
    st.scan()
    assert st.ids() == [hash_id(full)]
    assert st.count("rejects") == 0


# --- 2. malformed lines


MALFORMED: list[tuple[bytes, str]] = [
    (b"{not json\n", "not_json"),
    (b"[1, 2]\n", "not_object"),
    (b"null\n", "not_object"),
    (obj_line({"id": "m-ts", "agent": "cooper", "kind": "dm"}), "missing_ts"),
    (obj_line({"id": "m-agent", "ts": TS, "kind": "dm"}), "missing_agent"),
    (obj_line({"id": "m-kind", "ts": TS, "agent": "cooper"}), "missing_kind"),
    (obj_line({"id": "e-agent", "ts": TS, "agent": "", "kind": "dm"}), "missing_agent"),
    (obj_line({"id": "n-ts", "ts": 1780000000, "agent": "cooper", "kind": "dm"}), "missing_ts"),
    (obj_line({"id": "b-ts", "ts": "yesterday", "agent": "cooper", "kind": "dm"}), "bad_ts"),
    (obj_line({"id": "o-ts", "ts": "2026-05-31T03:40:00", "agent": "cooper", "kind": "dm"}), "bad_ts"),
    (b'{"id":"u8","ts":"' + TS.encode() + b'","agent":"\xff\xfe","kind":"dm"}\n', "not_utf8"),
    (b"\n", "not_json"),
]


def test_malformed_lines_are_rejected_with_file_line_and_reason(st: State) -> None:
    log = st.path(HB)
    append(log, ev("g1"), *(raw for raw, _ in MALFORMED), ev("g2"))
    stats = st.scan()

    assert st.ids() == ["g1", "g2"]
    assert [n for _, n, _ in st.rows()] == [1, len(MALFORMED) + 2]
    expected = [(HB, 0, i + 2, "heartbeats", reason) for i, (_, reason) in enumerate(MALFORMED)]
    assert st.rejects() == expected
    assert sum(stats.rejects.values()) == len(MALFORMED)
    assert stats.rejects[("heartbeats", "not_json")] == 2
    snippets = {r["line"]: r["snippet"] for r in st.store.rejects()}
    assert snippets[2] == "{not json"
    assert snippets[3] == "[1, 2]"

    # The daemon continues: later lines are read, earlier rejects are not counted again.
    append(log, ev("g3"), b"{still bad\n", ev("g4"))
    stats = st.scan()
    assert stats.records["heartbeats"] == 2
    assert dict(stats.rejects) == {("heartbeats", "not_json"): 1}
    assert st.ids() == ["g1", "g2", "g3", "g4"]
    assert st.count("rejects") == len(MALFORMED) + 1
    assert st.rejects()[-1] == (HB, 0, len(MALFORMED) + 4, "heartbeats", "not_json")
    st.scan()
    assert st.count("rejects") == len(MALFORMED) + 1
    assert st.count("events") == 4
    st.assert_unique_ids()
    assert exported_ids(st.db) == ["g1", "g2", "g3", "g4"]

    # `honestyd rejects` lists them with file and line.
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert cli.main(["rejects", "--db", str(st.db)]) == 0
    lines = out.getvalue().splitlines()
    assert len(lines) == len(MALFORMED) + 1
    assert lines[0].startswith(f"{HB}:2\theartbeats\tnot_json\t")
    assert err.getvalue().strip() == f"{len(MALFORMED) + 1} rejects"


# --- 3. oversized lines


def test_oversized_lines_are_rejected_and_the_rest_is_read(st: State) -> None:
    log = st.path(HB)
    append(
        log,
        ev("g1"),
        sized("big-ok", MAX_LINE_BYTES),  # exactly 1 MiB: accepted
        sized("big-1", MAX_LINE_BYTES + 1),  # one byte over: oversized
        ev("g2"),
        sized("big-3m", 3 * MAX_LINE_BYTES),
        sized("big-crlf", MAX_LINE_BYTES, ending=b"\r\n"),  # the limit excludes the line ending
        ev("g3"),
        sized("big-tail", 3 * MAX_LINE_BYTES, ending=b""),  # unterminated: not read yet
    )
    st.scan()
    assert st.ids() == ["g1", "big-ok", "g2", "big-crlf", "g3"]
    assert st.rejects() == [(HB, 0, 3, "heartbeats", "oversized"), (HB, 0, 5, "heartbeats", "oversized")]
    snippets = [r["snippet"] for r in st.store.rejects()]
    assert snippets[0].startswith('{"id": "big-1"')
    assert snippets[1].startswith('{"id": "big-3m"')
    assert all(len(s) <= 200 for s in snippets)

    st.scan()
    assert st.count("rejects") == 2
    append(log, b"\n", ev("g4"))
    st.scan()
    st.scan()
    assert st.ids() == ["g1", "big-ok", "g2", "big-crlf", "g3", "g4"]
    assert st.rejects()[-1] == (HB, 0, 8, "heartbeats", "oversized")
    assert st.count("rejects") == 3
    st.assert_unique_ids()


def test_line_reader_memory_is_bounded(tmp_path: Path) -> None:
    """A 3 MiB (and a 24 MiB) line is skipped in chunks, never held whole."""
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.write(b"first\n")
        for size in (3, 24):
            f.write(b"x" * (size * MAX_LINE_BYTES) + b"\n")
        f.write(b"last\n")
    tracemalloc.start()
    try:
        with open(big, "rb") as f:
            lines = [(end, data, len(snippet)) for [(data, snippet)], end in line_batches(f, 0, 1)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    ends = [6, 6 + 3 * MAX_LINE_BYTES + 1, 6 + 27 * MAX_LINE_BYTES + 2, big.stat().st_size]
    assert [end for end, _, _ in lines] == ends
    assert [data for _, data, _ in lines] == [b"first", None, None, b"last"]
    assert peak < 2 * MAX_LINE_BYTES + 3 * CHUNK, peak  # well under the 24 MiB line


def test_ingest_of_a_huge_line_is_memory_bounded(st: State) -> None:
    log = st.path(HB)
    append(log, ev("g1"), b'{"id":"huge","text":"' + b"y" * (24 * MAX_LINE_BYTES) + b'"}\n', ev("g2"))
    tracemalloc.start()
    try:
        st.scan()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert st.ids() == ["g1", "g2"]
    assert st.rejects() == [(HB, 0, 2, "heartbeats", "oversized")]
    assert peak < 8 * MAX_LINE_BYTES, peak


# --- 4, 5. rename rotation


@pytest.mark.parametrize("restarts", [False, True], ids=["running", "stopped"])
@pytest.mark.parametrize("scan_before_new_file", [False, True], ids=["one-pass", "drained-first"])
def test_rename_rotation(st: State, restarts: bool, scan_before_new_file: bool) -> None:
    """Scenario 4 (daemon running) and 5 (store closed and reopened around every step)."""
    log, rotated = st.path(HB), st.path(HB + ".1")
    log.parent.mkdir(parents=True)
    with open(log, "ab", buffering=0) as writer:
        writer.write(ev("e1") + ev("e2") + ev("e3"))
        st.scan()
        assert st.ids() == ["e1", "e2", "e3"]
        if restarts:
            st.restart()
        writer.write(ev("e4") + ev("e5"))
        os.rename(log, rotated)
        writer.write(ev("e6"))  # the writer still holds the renamed file
        if scan_before_new_file:
            st.scan()
            assert st.ids() == ["e1", "e2", "e3", "e4", "e5", "e6"]
            if restarts:
                st.restart()
        append(log, ev("n1"), ev("n2"))
        if restarts:
            st.restart()
        st.scan()

    expected = [(0, i, f"e{i}") for i in range(1, 7)] + [(1, 1, "n1"), (1, 2, "n2")]
    assert st.rows() == expected
    cursor = st.store.cursor(HB)
    assert cursor is not None
    assert (cursor.ino, cursor.generation, cursor.offset) == (log.stat().st_ino, 1, log.stat().st_size)

    if restarts:
        st.restart()
    st.scan()
    append(log, ev("n3"))
    st.scan()
    st.scan()
    assert st.rows() == [*expected, (1, 3, "n3")]
    assert st.count("events") == 9
    assert st.count("rejects") == 0
    st.assert_unique_ids()
    assert sorted(exported_ids(st.db)) == sorted([f"e{i}" for i in range(1, 7)] + ["n1", "n2", "n3"])
    index = st.store.index_rows()
    assert index[HB].deleted is None
    assert index[HB + ".1"].deleted is None


# --- 6. copytruncate


@pytest.mark.parametrize("new_lines", [1, 12], ids=["shorter", "longer"])
@pytest.mark.parametrize("scan_while_empty", [False, True])
def test_copytruncate(st: State, new_lines: int, scan_while_empty: bool) -> None:
    log = st.path(HB)
    append(log, ev("e1"), ev("e2"), ev("e3"))
    st.scan()
    ino = log.stat().st_ino
    shutil.copyfile(log, st.path(HB + ".1"))
    os.truncate(log, 0)
    if scan_while_empty:
        st.scan()
        assert st.count("events") == 3
    news = [f"n{i}" for i in range(1, new_lines + 1)]
    append(log, *(ev(n, text=f"after copytruncate {n}") for n in news))
    assert log.stat().st_ino == ino
    st.scan()
    st.scan()
    assert st.rows() == [(0, 1, "e1"), (0, 2, "e2"), (0, 3, "e3")] + [(1, i, n) for i, n in enumerate(news, 1)]
    assert st.count("events") == 3 + new_lines
    assert st.count("rejects") == 0
    st.assert_unique_ids()
    assert sorted(exported_ids(st.db)) == sorted(["e1", "e2", "e3", *news])


# --- 7. truncated while stopped, regrown past the old offset


def test_truncate_while_stopped_and_regrown(st: State) -> None:
    log = st.path(HB)
    append(log, ev("e1"), ev("e2"), ev("e3"))
    st.scan()
    old_offset = log.stat().st_size
    ino = log.stat().st_ino
    st.store.close()

    with open(log, "r+b") as f:  # same inode, new content, longer than what was read
        f.truncate(0)
        f.write(b"".join(ev(f"n{i}", text="regrown") for i in range(1, 7)))
    assert log.stat().st_size > old_offset
    assert log.stat().st_ino == ino

    st.restart()
    st.scan()
    st.restart()
    st.scan()
    assert st.rows() == [(0, i, f"e{i}") for i in (1, 2, 3)] + [(1, i, f"n{i}") for i in range(1, 7)]
    assert st.count("events") == 9
    st.assert_unique_ids()
    cursor = st.store.cursor(HB)
    assert cursor is not None
    assert (cursor.generation, cursor.offset, cursor.line) == (1, log.stat().st_size, 6)


# --- 8. delete and recreate


@pytest.mark.parametrize("same_inode", [False, True], ids=["new-inode", "same-inode"])
@pytest.mark.parametrize("scan_between", [False, True])
@pytest.mark.parametrize("new_count", [1, 8])
def test_delete_and_recreate(st: State, same_inode: bool, scan_between: bool, new_count: int) -> None:
    log = st.path(HB)
    keep = st.path("heartbeats/.keep")
    append(log, ev("e1"), ev("e2"), ev("e3"))
    st.scan()
    old_ino = log.stat().st_ino
    if same_inode:
        os.link(log, keep)  # hold the inode so the "new" file provably reuses it
    log.unlink()
    st.clock.now = T0 + timedelta(minutes=1)
    if scan_between:
        st.scan()
        assert st.store.index_rows()[HB].deleted == T0 + timedelta(minutes=1)
        assert st.count("events") == 3
    news = [f"n{i}" for i in range(1, new_count + 1)]
    new_content = b"".join(ev(n, text=f"recreated {n}") for n in news)
    if same_inode:
        os.link(keep, log)
        keep.unlink()
        with open(log, "r+b") as f:
            f.truncate(0)
            f.write(new_content)
        assert log.stat().st_ino == old_ino
    else:
        append(log, new_content)
    st.clock.now = T0 + timedelta(minutes=2)
    st.scan()
    st.scan()
    assert st.rows() == [(0, i, f"e{i}") for i in (1, 2, 3)] + [(1, i, n) for i, n in enumerate(news, 1)]
    assert st.count("events") == 3 + new_count
    assert st.count("rejects") == 0
    st.assert_unique_ids()
    assert st.store.index_rows()[HB].deleted is None


BOOT = ev(None, kind="state_change", text="boot " + "x" * 1500)  # a first line longer than the 1 KiB head


@pytest.mark.parametrize("old_content", [b"", ev("a-partial")[:15], BOOT], ids=["empty", "partial", "same-head"])
def test_new_log_reusing_a_deleted_logs_inode_is_read_once(st: State, old_content: bytes) -> None:
    """ext4 gives a freed inode to the next new file at once (20 of 20 tries on this machine). A new log that
    inherits the inode of a deleted one whose cursor it matches (nothing read yet, or the same first line) is read
    under its own name, once, and not a second time as the deleted log's rotated continuation."""
    a, b, keep = st.path("heartbeats/a.jsonl"), st.path("heartbeats/b.jsonl"), st.path("heartbeats/.keep")
    append(a, old_content)
    st.scan()
    # Deterministic stand-in for inode reuse: the new file b.jsonl gets exactly a.jsonl's (dev, ino).
    os.link(a, keep)
    a.unlink()
    os.rename(keep, b)
    with open(b, "r+b") as f:
        f.truncate(0)
        f.write(BOOT + ev("b1") + ev("b2"))
    st.scan()
    st.scan()
    boot = hash_id(BOOT)
    assert st.rows("heartbeats/b.jsonl") == [(0, 1, boot), (0, 2, "b1"), (0, 3, "b2")]
    assert st.rows("heartbeats/a.jsonl") == ([(0, 1, boot)] if old_content == BOOT else [])
    assert exported_ids(st.db) == ["b1", "b2"]
    assert st.count("rejects") == 0


@pytest.mark.parametrize("how", ["copied", "saved-whole", "rewritten"])
@pytest.mark.parametrize("restarts", [False, True], ids=["running", "stopped"])
def test_the_same_log_under_a_new_inode_is_read_on_not_again(st: State, how: str, restarts: bool) -> None:
    """A state copied or restored (cp, rsync, a backup: every file a new inode), or a writer that saves its whole
    log through a temporary file and a rename: the bytes read are all there, so only the lines after them are
    read. A new inode whose bytes differ where the cursor looks (same head, another last line read) is a new
    generation, read whole."""
    log, tmp = st.path(HB), st.path("heartbeats/.cooper.tmp")  # not a source: no .jsonl
    append(log, BOOT, ev("e2"), ev("e3"))
    st.scan()
    old_ino = log.stat().st_ino
    if restarts:
        st.restart()
    if how == "rewritten":
        append(tmp, BOOT, ev("e2"), ev("x3"), ev("e4"))
    else:
        shutil.copyfile(log, tmp)
        if how == "saved-whole":
            append(tmp, ev("e4"))
    os.replace(tmp, log)
    assert log.stat().st_ino != old_ino
    if how == "copied":
        append(log, ev("e4"))
    if restarts:
        st.restart()
    st.scan()
    st.scan()
    boot = hash_id(BOOT)
    first = [(0, 1, boot), (0, 2, "e2"), (0, 3, "e3")]
    if how == "rewritten":
        assert st.rows() == [*first, (1, 1, boot), (1, 2, "e2"), (1, 3, "x3"), (1, 4, "e4")]
    else:
        assert st.rows() == [*first, (0, 4, "e4")]
    cursor = st.store.cursor(HB)
    assert cursor is not None
    assert (cursor.ino, cursor.offset) == (log.stat().st_ino, log.stat().st_size)
    assert st.count("rejects") == 0


# --- 9. two files with the same head


def test_identical_heads_have_independent_cursors(st: State) -> None:
    a, b = st.path("heartbeats/a.jsonl"), st.path("heartbeats/b.jsonl")
    # A long shared first line: both files have the same 1 KiB head fingerprint. No id: its id is its hash,
    # and it is a state change, so it is stored once per file (the spec de-duplicates at scoring) and never exported.
    shared = ev(None, kind="state_change", text="boot " + "x" * 1500)
    append(a, shared, ev("a1"), ev("a2"))
    append(b, shared, ev("b1"), ev("b2"), ev("b3"))
    st.scan()
    ca, cb = st.store.cursor("heartbeats/a.jsonl"), st.store.cursor("heartbeats/b.jsonl")
    assert ca is not None and cb is not None
    assert ca.head_sha == cb.head_sha and ca.ino != cb.ino
    sid = hash_id(shared)
    assert st.rows("heartbeats/a.jsonl") == [(0, 1, sid), (0, 2, "a1"), (0, 3, "a2")]
    assert st.rows("heartbeats/b.jsonl") == [(0, 1, sid), (0, 2, "b1"), (0, 3, "b2"), (0, 4, "b3")]
    assert exported_ids(st.db) == ["a1", "a2", "b1", "b2", "b3"]

    # Rotate a; b must not move.
    append(a, ev("a3"))
    os.rename(a, st.path("heartbeats/a.jsonl.1"))
    append(a, shared, ev("a4"))
    st.scan()
    st.scan()
    assert st.store.cursor("heartbeats/b.jsonl") == cb
    assert st.rows("heartbeats/b.jsonl") == [(0, 1, sid), (0, 2, "b1"), (0, 3, "b2"), (0, 4, "b3")]
    assert st.rows("heartbeats/a.jsonl") == [(0, 1, sid), (0, 2, "a1"), (0, 3, "a2"), (0, 4, "a3"),
                                             (1, 1, sid), (1, 2, "a4")]
    append(b, ev("b4"))
    st.scan()
    st.scan()
    assert st.rows("heartbeats/b.jsonl")[-1] == (0, 5, "b4")
    assert st.count("events") == 6 + 5
    assert exported_ids(st.db) == ["a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"]
    # After the spec's de-duplication by id (first in read order stays) every id is there once.
    ctx = Context(st.store.load_records(), T0, Config())
    assert sorted(e.id for e in ctx.events) == sorted([sid, "a1", "a2", "a3", "a4", "b1", "b2", "b3", "b4"])


# --- 10. atomic save of a brief


def brief(body: str, ts: str = TS) -> str:
    return f"---\nagent: ted\nts: {ts}\n---\n{body}\n"


@pytest.mark.parametrize("tmp_name", [".ted-1.md.tmp", "ted-1.md.tmp", "tmp-4821.md"])
@pytest.mark.parametrize("scan_between", [False, True])
def test_atomic_save_of_a_brief(st: State, tmp_name: str, scan_between: bool) -> None:
    target, tmp = st.path("briefs/ted-1.md"), st.path(f"briefs/{tmp_name}")
    write_text(target, brief("version one"), T0)
    st.scan()
    assert exported(st.db)["briefs/ted-1.md"]["text"] == "version one\n"

    write_text(tmp, brief("version two, see Issue #12"), T0 + timedelta(seconds=5))
    if scan_between:
        st.scan()
    os.replace(tmp, target)
    st.scan()
    st.scan()

    decisions = exported(st.db)
    assert list(decisions) == ["briefs/ted-1.md"]
    assert decisions["briefs/ted-1.md"]["text"] == "version two, see Issue #12\n"
    assert decisions["briefs/ted-1.md"]["agent"] == "ted"
    assert st.count("events") == 1
    index = st.store.index_rows()
    assert index["briefs/ted-1.md"].deleted is None
    if tmp_name.startswith(".") or not scan_between:
        assert f"briefs/{tmp_name}" not in index
    else:
        assert index[f"briefs/{tmp_name}"].deleted == T0
    # Batch semantics (spec 1.4): each mtime that differs from the front-matter ``created`` is a modification.
    assert st.changes("briefs/ted-1.md") == [T0, T0 + timedelta(seconds=5)]


def test_atomic_save_seen_by_a_watcher(st: State) -> None:
    target, tmp = st.path("briefs/ted-1.md"), st.path("briefs/.ted-1.md.tmp")
    write_text(target, brief("one"))
    st.ingester.ingest_path("briefs/ted-1.md")
    write_text(tmp, brief("two"))
    st.ingester.ingest_path("briefs/.ted-1.md.tmp")
    os.replace(tmp, target)
    st.clock.now = T0 + timedelta(seconds=3)
    st.ingester.ingest_path("briefs/.ted-1.md.tmp")
    st.ingester.ingest_path("briefs/ted-1.md")
    assert [e.text for e in st.store.events()] == ["two\n"]
    entry = st.store.file_entries()["briefs/ted-1.md"]
    assert (entry.created, entry.modified, entry.deleted) == (TS_DT, (T0 + timedelta(seconds=3),), None)
    assert "briefs/.ted-1.md.tmp" not in st.store.index_rows()


# --- 11. a brief edited ten times


def test_ten_quick_edits_then_one_scan(st: State) -> None:
    md = st.path("briefs/ted-1.md")
    write_text(md, "draft 0\n", T0)
    st.scan()
    for i in range(1, 11):
        write_text(md, f"draft {i}\n", T0 + timedelta(seconds=i))
    st.scan()
    st.scan()
    events = st.store.events()
    assert [(e.id, e.text, e.ts) for e in events] == [("briefs/ted-1.md", "draft 10\n", T0 + timedelta(seconds=10))]
    entry = st.store.file_entries()["briefs/ted-1.md"]
    assert (entry.created, entry.modified) == (T0, (T0 + timedelta(seconds=10),))
    assert exported_ids(st.db) == ["briefs/ted-1.md"]


def test_ten_edit_and_scan_cycles(st: State) -> None:
    md = st.path("briefs/ted-1.md")
    write_text(md, "draft 0\n", T0)
    st.scan()
    for i in range(1, 11):
        write_text(md, f"draft {i}\n", T0 + timedelta(seconds=i))
        st.scan()
        assert [e.text for e in st.store.events()] == [f"draft {i}\n"]
    # Same size, same mtime, different bytes: the content hash still sees the edit.
    write_text(md, "draft X\n", T0 + timedelta(seconds=10))
    st.scan()
    assert [e.text for e in st.store.events()] == ["draft X\n"]
    assert st.count("events") == 1
    assert st.changes("briefs/ted-1.md") == [T0 + timedelta(seconds=i) for i in range(1, 11)]
    assert exported_ids(st.db) == ["briefs/ted-1.md"]


def test_ten_edits_seen_by_a_watcher(st: State) -> None:
    md = st.path("briefs/ted-1.md")
    write_text(md, "draft 0\n")
    st.ingester.ingest_path("briefs/ted-1.md")
    for i in range(1, 11):
        write_text(md, f"draft {i}\n")
        st.clock.now = T0 + timedelta(seconds=i)
        st.ingester.ingest_path("briefs/ted-1.md")
    assert [e.text for e in st.store.events()] == ["draft 10\n"]
    entry = st.store.file_entries()["briefs/ted-1.md"]
    assert entry.created == T0
    assert entry.modified == tuple(T0 + timedelta(seconds=i) for i in range(1, 11))


# --- 12. deleting a brief


def test_deleting_a_brief_removes_its_decision(st: State) -> None:
    write_text(st.path("briefs/ted-1.md"), brief("one"))
    write_text(st.path("briefs/ted-2.md"), brief("two"))
    write_text(st.path("briefs/ted-3.md"), brief("bad ts", ts="not a time"))
    write_text(st.path("findings/iris-1.md"), "a finding\n", T0)
    st.scan()
    assert exported_ids(st.db) == ["briefs/ted-1.md", "briefs/ted-2.md", "findings/iris-1.md"]
    assert st.rejects() == [("briefs/ted-3.md", 0, 0, "briefs", "bad_ts")]

    st.clock.now = T0 + timedelta(hours=1)
    st.path("briefs/ted-1.md").unlink()
    st.path("briefs/ted-3.md").unlink()
    st.scan()
    assert exported_ids(st.db) == ["briefs/ted-2.md", "findings/iris-1.md"]
    assert st.count("events") == 2
    assert st.count("rejects") == 0  # a deleted file's reject goes with it
    index = st.store.index_rows()
    assert index["briefs/ted-1.md"].deleted == T0 + timedelta(hours=1)
    assert index["briefs/ted-3.md"].deleted == T0 + timedelta(hours=1)
    assert index["briefs/ted-2.md"].deleted is None

    # A watcher reporting the deletion of one path.
    st.clock.now = T0 + timedelta(hours=2)
    st.path("findings/iris-1.md").unlink()
    st.ingester.ingest_path("findings/iris-1.md")
    assert exported_ids(st.db) == ["briefs/ted-2.md"]
    assert st.store.index_rows()["findings/iris-1.md"].deleted == T0 + timedelta(hours=2)
    st.scan()
    assert st.store.index_rows()["findings/iris-1.md"].deleted == T0 + timedelta(hours=2)

    # Recreated: it is back, no longer deleted.
    write_text(st.path("briefs/ted-1.md"), brief("one again"))
    st.scan()
    assert exported(st.db)["briefs/ted-1.md"]["text"] == "one again\n"
    assert st.store.index_rows()["briefs/ted-1.md"].deleted is None
    assert st.count("events") == 2


# --- 13. symlinks


def test_symlinks_inside_the_root_are_read_outside_never(st: State, tmp_path: Path) -> None:
    append(st.path("logs/real.jsonl"), ev("r1"), ev("r2"))
    outside = tmp_path / "outside"
    append(outside / "secret.jsonl", ev("s1"))
    st.path("heartbeats").mkdir()
    os.symlink("../logs/real.jsonl", st.path("heartbeats/link.jsonl"))
    os.symlink(outside / "secret.jsonl", st.path("heartbeats/abs-out.jsonl"))
    os.symlink("../../outside/secret.jsonl", st.path("heartbeats/rel-out.jsonl"))
    os.symlink(outside, st.path("heartbeats/outdir"))
    os.symlink(outside, st.path("outdir"))
    st.scan()
    for rel in ("heartbeats/abs-out.jsonl", "heartbeats/rel-out.jsonl"):
        st.ingester.ingest_path(rel)

    assert st.rows("heartbeats/link.jsonl") == [(0, 1, "r1"), (0, 2, "r2")]
    assert st.ids() == ["r1", "r2"]
    assert [c.path for c in st.store.cursors()] == ["heartbeats/link.jsonl"]
    assert sorted(st.store.index_rows()) == ["heartbeats/link.jsonl", "logs/real.jsonl"]
    assert st.count("rejects") == 0

    append(st.path("logs/real.jsonl"), ev("r3"))
    append(outside / "secret.jsonl", ev("s2"))
    st.scan()
    assert st.ids() == ["r1", "r2", "r3"]
    assert exported_ids(st.db) == ["r1", "r2", "r3"]


def test_symlink_repointed_outside_the_root_is_not_read(st: State, tmp_path: Path) -> None:
    """The drain of a vanished log must not follow its symlink out of the root either."""
    real = st.path("logs/real.jsonl")
    append(real, ev("r1"))
    st.path("heartbeats").mkdir()
    link = st.path("heartbeats/link.jsonl")
    os.symlink("../logs/real.jsonl", link)
    st.scan()
    assert st.ids() == ["r1"]

    outside = tmp_path / "outside"
    outside.mkdir()
    os.rename(real, outside / "real.jsonl")  # same file system: same inode, same bytes
    append(outside / "real.jsonl", ev("secret"))
    link.unlink()
    os.symlink(outside / "real.jsonl", link)
    st.scan()
    st.ingester.ingest_path("heartbeats/link.jsonl")
    assert st.ids() == ["r1"]
    assert exported_ids(st.db) == ["r1"]


def test_a_pass_over_many_paths_confines_them_as_one_path_at_a_time_does(st: State, tmp_path: Path) -> None:
    """ingest_paths resolves each directory once per pass (Confinement): a directory that is a symlink out of the
    root, a log symlinked out, and one symlinked in are judged as stat_file judges them alone."""
    outside = tmp_path / "outside"
    append(outside / "x.jsonl", ev("s1"))
    append(st.path("logs/real.jsonl"), ev("r1"))
    st.path("heartbeats").mkdir()
    os.symlink("../logs/real.jsonl", st.path("heartbeats/in.jsonl"))
    os.symlink(outside / "x.jsonl", st.path("heartbeats/out.jsonl"))
    append(st.path("heartbeats/plain.jsonl"), ev("p1"))
    os.symlink(outside, st.path("labels"))  # a whole source directory pointing out
    paths = ["heartbeats/in.jsonl", "heartbeats/out.jsonl", "heartbeats/plain.jsonl", "labels/x.jsonl"]
    st.ingester.ingest_paths(paths)
    assert sorted(st.ids()) == ["p1", "r1"]
    assert sorted(c.path for c in st.store.cursors()) == ["heartbeats/in.jsonl", "heartbeats/plain.jsonl"]
    # The cache lives for one pass: the next pass sees a directory re-pointed meanwhile.
    os.unlink(st.path("labels"))
    append(st.path("labels/x.jsonl"), obj_line({"ts": TS, "decision": "p1", "value": "up", "reviewer": "andrew"}))
    st.ingester.ingest_paths(paths)
    assert st.count("labels") == 1


# --- 14. the CLI twice


def _dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out = {}
        for t in ("events", "citations", "labels", "rejects", "cursors", "files", "file_changes"):
            # Not the stat a file's hash was last checked after (migration 014): a pass that reads a file records it.
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({t})")
                       if t != "files" or r[1] not in ("ctime_ns", "dev", "ino", "seen_ns")]
            order = ", ".join(str(i) for i in range(1, len(columns) + 1))
            out[t] = conn.execute(f"SELECT {', '.join(columns)} FROM {t} ORDER BY {order}").fetchall()
        return out
    finally:
        conn.close()


def test_cli_ingest_twice_adds_nothing(honestyd: Run, tmp_path: Path) -> None:
    root = tmp_path / "state"
    append(root / "heartbeats/cooper.jsonl", ev("e-1", text="see Issue #4"), b"{bad\n", ev("e-2", kind="commit"),
           ev(None, kind="refusal", text="No, because."), ev("e-partial")[:20])
    append(root / "heartbeats/iris.jsonl", ev("i-1", agent="iris", kind="ack"))
    append(root / "labels/reviews.jsonl", obj_line({"ts": TS, "decision": "e-1", "value": "up", "reviewer": "andrew"}),
           obj_line({"ts": TS, "decision": "e-1", "value": "meh", "reviewer": "andrew"}))
    write_text(root / "briefs/ted-1.md", brief("a brief, see [x](findings/iris-1.md)"))
    write_text(root / "findings/iris-1.md", "a finding\n", T0)
    write_text(root / "briefs/ted-2.md", brief("bad", ts="nope"), T0)
    write_text(root / "notes/readme.txt", "not a source\n", T0)
    db = tmp_path / "honesty.db"

    first = honestyd("ingest", "--state", root, "--db", db).stdout
    assert first.startswith("ingested 7 new records (briefs 1, findings 1, heartbeats 4, labels 1), 3 rejects;"), first
    assert "store holds 6 events, 1 labels, 7 files, 3 rejects" in first
    export1 = honestyd("export", "decisions", "--db", db).stdout
    dump1 = _dump(db)

    second = honestyd("ingest", "--state", root, "--db", db).stdout
    assert second.startswith("ingested 0 new records (none), 0 rejects;"), second
    assert "store holds 6 events, 1 labels, 7 files, 3 rejects" in second
    export2 = honestyd("export", "decisions", "--db", db).stdout
    assert export2 == export1
    assert [json.loads(line)["id"] for line in export1.splitlines()] == sorted(
        ["e-1", hash_id(ev(None, kind="refusal", text="No, because.")), "i-1", "briefs/ted-1.md",
         "findings/iris-1.md"]
    )
    assert _dump(db) == dump1
    rejects = honestyd("rejects", "--db", db)
    assert rejects.stderr.strip() == "3 rejects"


# --- 15. labels


def test_labels_with_a_bad_line(st: State) -> None:
    def label(**fields: Any) -> bytes:
        return obj_line({"ts": TS, "decision": "e-42", "value": "down", "reviewer": "andrew", **fields})

    log = st.path("labels/reviews.jsonl")
    append(
        log,
        label(value="up"),
        label(value="meh"),
        obj_line({"ts": TS, "decision": "e-42", "value": "up"}),
        label(ts="2026-13-01T00:00:00Z"),
        b"not json\n",
        label(decision=""),
        label(reviewer="iris"),
    )
    stats = st.scan()
    assert stats.records["labels"] == 2
    rows = st.store.conn.execute("SELECT line, decision, value, reviewer FROM labels ORDER BY line").fetchall()
    assert rows == [(1, "e-42", "up", "andrew"), (7, "e-42", "down", "iris")]
    path = "labels/reviews.jsonl"
    assert st.rejects() == [
        (path, 0, 2, "labels", "bad_value"),
        (path, 0, 3, "labels", "missing_reviewer"),
        (path, 0, 4, "labels", "bad_ts"),
        (path, 0, 5, "labels", "not_json"),
        (path, 0, 6, "labels", "missing_decision"),
    ]
    append(log, label(value="up", reviewer="ted"))
    st.scan()
    st.scan()
    assert st.count("labels") == 3
    assert st.count("rejects") == 5
    assert st.count("events") == 0
