"""A scan tells an unchanged file read whole from its stat (daemon/ingest/fingerprint.py): it opens none of them,
yet sees every edit, one that puts size and mtime back included, and reads again a file whose change time the
recording stat could not tell from its own moment (racy); a store from before migration 014 is read once, then not.

Real files, a real SQLite file, the real :class:`~daemon.ingest.Ingester`; what is read is counted through its
injected reader, and the wall clock the fingerprints are stamped with is injected (file times are the kernel's).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from collectors.safeopen import read_regular
from collectors.statedir import FileInfo
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.ingest.fingerprint import RACY_NS, fingerprint_of, trusted, unchanged
from daemon.store import Fingerprint, IndexRow, Store
from tests.helpers import T0, store_as_of

FILES = {
    "briefs/ted-1.md": "---\nagent: ted\nts: 2026-05-31T03:40:00Z\n---\nShip it; see findings/iris-1.md.\n",
    "findings/iris-1.md": "a finding\n",
    "evals/m1.md": "not a report\n",
}


class Reads:
    """The ingester's reader: the real one, counting what it opens."""

    def __init__(self) -> None:
        self.paths: list[str] = []

    def __call__(self, path: str) -> bytes:
        self.paths.append(os.path.basename(path))
        return read_regular(path)


class Wall:
    """The injected wall clock (ns since the epoch): the latest change time of the state plus ``after`` seconds."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.after = 3.0

    def __call__(self) -> int:
        latest = max(p.stat().st_ctime_ns for p in self.root.rglob("*") if p.is_file())
        return latest + int(self.after * 1e9)


class State:
    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "state"
        for rel, text in FILES.items():
            (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.root / rel).write_text(text)
        self.db = tmp_path / "h.db"
        self.reads = Reads()
        self.wall = Wall(self.root)
        self.store = Store.open(self.db)
        self.ingester = self.new_ingester()

    def new_ingester(self) -> Ingester:
        return Ingester(self.store, self.root, Config(), clock=lambda: T0, read=self.reads, wall_ns=self.wall)

    def scan(self) -> list[str]:
        """The names of the files the scan read, sorted."""
        self.reads.paths.clear()
        self.ingester.scan()
        return sorted(self.reads.paths)

    def texts(self) -> list[str]:
        return sorted(e.text for e in self.store.events())


@pytest.fixture
def st(tmp_path: Path) -> Iterator[State]:
    state = State(tmp_path)
    yield state
    state.store.close()


ALL = sorted(os.path.basename(p) for p in FILES)


def test_a_scan_of_an_unchanged_tree_reads_no_file(st: State) -> None:
    assert st.scan() == ALL
    before = (st.texts(), st.store.rejects(), st.store.index_rows())
    assert st.scan() == []
    st.store.close()  # a restart: what tells the files apart is in the store
    st.store = Store.open(st.db)
    st.ingester = st.new_ingester()
    assert st.scan() == []
    assert (st.texts(), st.store.rejects(), st.store.index_rows()) == before


def test_an_edit_that_puts_size_and_mtime_back_is_seen_by_its_change_time(st: State) -> None:
    """Every fingerprint counts (the wall clock is well past every change): only the change time shows the edit."""
    st.scan()
    md = st.root / "findings/iris-1.md"
    old = md.stat()
    md.write_text("b finding\n")
    os.utime(md, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert (md.stat().st_size, md.stat().st_mtime_ns) == (old.st_size, old.st_mtime_ns)
    assert st.scan() == ["iris-1.md"]
    assert "b finding\n" in st.texts() and "a finding\n" not in st.texts()
    assert st.scan() == []


def test_a_file_replaced_by_another_is_read(st: State) -> None:
    """A rename over the file: another inode (its change time is new as well), same size and mtime."""
    st.scan()
    md = st.root / "findings/iris-1.md"
    old = md.stat()
    new = md.with_name("iris-1.tmp")
    new.write_text("c finding\n")
    os.utime(new, ns=(old.st_atime_ns, old.st_mtime_ns))
    new.replace(md)
    assert st.scan() == ["iris-1.md"]
    assert "c finding\n" in st.texts()


def test_a_file_changed_in_the_tick_of_its_recording_is_read_again_until_a_later_stat_counts(st: State) -> None:
    """Racy: the wall clock says the recording stat came in the same moment as the files' last change, where an edit
    after it may keep that change time. Such a fingerprint does not count: the next scans read the files again
    (without recording anything: the stat is the same, and no more telling), until one comes clearly later."""
    st.wall.after = 0.0
    assert st.scan() == ALL
    assert st.scan() == ALL
    assert st.scan() == ALL
    st.wall.after = RACY_NS / 1e9 + 0.5
    assert st.scan() == ALL  # clearly later: its fingerprints count
    assert st.scan() == []


def test_a_racy_read_that_finds_the_same_bytes_records_nothing(st: State) -> None:
    st.wall.after = 0.0
    st.scan()
    statements: list[str] = []
    st.store.conn.set_trace_callback(statements.append)
    assert st.scan() == ALL
    assert not [sql for sql in statements if sql.lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE"))]


def test_a_store_from_before_migration_014_is_read_once_then_not(st: State, tmp_path: Path) -> None:
    """Its rows hold no fingerprint: the first scan reads and hashes every file (finding them unchanged, it parses
    nothing again) and records them; the next reads none. Opened read-only before it is migrated, it reads."""
    st.scan()
    rows = st.store.index_rows()
    st.store.close()
    old = tmp_path / "old.db"
    conn = store_as_of(old, "013_ids_let_go")
    for row in rows.values():
        conn.execute("INSERT INTO files VALUES (?, 0, NULL, ?, ?, ?, ?, NULL)",
                     (row.path, row.mtime_ns, row.size, row.sha, int(row.front_matter)))
    conn.execute("COMMIT")
    conn.close()
    with Store.open(old, readonly=True) as reader:
        assert {p: r.fingerprint for p, r in reader.index_rows().items()} == dict.fromkeys(rows)
    st.store = Store.open(old)
    st.ingester = st.new_ingester()
    assert st.scan() == ALL
    assert st.texts() == []  # found unchanged: nothing parsed again (no decision was in this store)
    assert all(r.fingerprint is not None for r in st.store.index_rows().values())
    assert st.scan() == []


# --- the rule (pure)

INFO = FileInfo("briefs/b.md", "/s/briefs/b.md", 10**18, 42, 7, 99, "briefs/b.md", 10**18 + 5)
SHA = hashlib.sha256(b"x").hexdigest()


def _row(fingerprint: Fingerprint | None, **changes: object) -> IndexRow:
    row = IndexRow("briefs/b.md", T0, None, INFO.mtime_ns, INFO.size, SHA, False, None, fingerprint)
    return replace(row, **changes)  # type: ignore[arg-type]


def test_the_rule_reads_unless_every_part_of_the_stat_matches_and_counts() -> None:
    later = INFO.ctime_ns + RACY_NS + 1
    fp = fingerprint_of(INFO, later)
    assert fp == Fingerprint(INFO.ctime_ns, 7, 99, later) and trusted(fp)
    assert unchanged(_row(fp), INFO, None)
    for differs in ({"size": 43}, {"mtime_ns": 1}, {"ctime_ns": INFO.ctime_ns + 1}, {"dev": 8}, {"ino": 100}):
        assert not unchanged(_row(fp), replace(INFO, **differs), None), differs  # type: ignore[arg-type]
    assert not unchanged(_row(None), INFO, None)  # none recorded (a row from before migration 014)
    assert not unchanged(_row(fp, sha=None), INFO, None)
    assert not unchanged(_row(fp, deleted=T0), INFO, None)
    assert not unchanged(_row(fp, canonical="drafts/b.md"), INFO, None)  # read under another name now
    assert not unchanged(None, INFO, None)


def test_a_change_time_within_racy_ns_of_the_recording_stat_does_not_count() -> None:
    for seen, counts in ((INFO.ctime_ns, False), (INFO.ctime_ns + RACY_NS, False), (INFO.ctime_ns - 10**9, False),
                         (INFO.ctime_ns + RACY_NS + 1, True)):
        assert trusted(fingerprint_of(INFO, seen)) is counts
        assert unchanged(_row(fingerprint_of(INFO, seen)), INFO, None) is counts
