"""Every file honestyd writes under the state root is a regular file inside it; no reader opens a FIFO or device.

Against the real daemon as a subprocess (tests/daemon_harness.py), on a real state directory:

* ``labels/api.jsonl`` a symlink to a file outside the root, or ``labels`` a symlink to a folder outside: the
  API answers 500 naming the refusal, an ERROR names the path, the outside file or folder is untouched;
* ``labels/api.jsonl`` a FIFO: the same 500, without blocking; ingestion goes on and SIGTERM exits at once;
* ``reviews/honestyd.jsonl`` a symlink out of the root (or ``reviews`` one), or a FIFO: a review due is not written,
  an ERROR names the refusal, the outside file is untouched, nothing blocks;
* the changelog path a FIFO: the daemon starts, serves ``/methodology`` and stops (it used to hang at start);
  a symlink out of the root there (the file, or its folder): refused, the target untouched and never shown;
* FIFOs as ``heartbeats/*.jsonl`` and ``briefs/*.md`` (there at the start, and made while it runs) are never
  opened through a rescan: a writer blocked in ``open`` on each is never released by the daemon.

In-process, with the real :class:`~daemon.ingest.Ingester` and real files: a log or brief that the walk saw
as a regular file and that became a FIFO before it was read is neither opened for reading nor waited on, and
:mod:`daemon.safefile` refuses every way out of the root for appends, replacements and reads.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import pytest

from collectors.rfc3339 import format_ts
from collectors.safeopen import RefusedFile, read_regular
from collectors.statedir import stat_file
from daemon import safefile
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.store import Store
from tests.daemon_harness import Running, agents, daemon, probe, stop, wait_for

TOKEN = "tok-andrew-5e1f"
REVIEWERS = {"HONESTYD_REVIEWERS": f"andrew:{TOKEN}"}
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
LABEL = json.dumps({"decision": "ada-1", "value": "down"}).encode()
CHANGELOG = "iris/honesty-changelog.md"


def _line(eid: str, agent: str = "ada", minutes: int = 5) -> str:
    ts = format_ts(datetime.now(UTC) - timedelta(minutes=minutes))
    return json.dumps({"id": eid, "ts": ts, "agent": agent, "kind": "dm", "thread": eid, "text": "ok"}) + "\n"


def _state(tmp: Path) -> Path:
    root = tmp / "state"
    (root / "heartbeats").mkdir(parents=True)
    (root / "briefs").mkdir()
    (root / "heartbeats" / "ada.jsonl").write_text("".join(_line(f"ada-{i}") for i in range(3)))
    return root


def _outside(tmp: Path, root: Path, rel: str, text: str, how: str) -> Path:
    """A file ``text`` in a folder outside the root, and the root's ``rel`` reaching it: itself a symlink to the
    file (``how`` "file"), or its folder a symlink to that folder ("folder"). Returns the outside file."""
    outside = tmp / "outside"
    outside.mkdir()
    secret = outside / Path(rel).name
    secret.write_text(text)
    folder = root / Path(rel).parent
    if how == "folder":
        folder.symlink_to(outside, target_is_directory=True)
    else:
        folder.mkdir()
        if how == "file":
            (root / rel).symlink_to(secret)
    return secret


def _heartbeats(d: Running) -> float:
    return d.metric("honesty_ingest_records_total", source="heartbeats") or 0


def _ingest_goes_on(d: Running, eid: str) -> None:
    """A heartbeat appended now is ingested: the daemon is not stuck on anything."""
    before = _heartbeats(d)
    with (d.root / "heartbeats" / "ada.jsonl").open("a") as f:
        f.write(_line(eid))
    wait_for(lambda: _heartbeats(d) == before + 1, 10, f"{eid} ingested")


def _stops_promptly(d: Running) -> None:
    code, _ = stop(d, timeout=15)  # stop() raises TimeoutExpired if the process does not exit
    assert code == 0, d.logs()


def _errors(d: Running) -> list[str]:
    return [line for line in d.logs().splitlines() if " ERROR " in line]


# --- the label writer


@pytest.mark.parametrize("how", ["file", "folder"])
def test_a_label_is_never_written_through_a_symlink_out_of_the_root(tmp_path: Path, how: str) -> None:
    root = _state(tmp_path)
    secret = _outside(tmp_path, root, "labels/api.jsonl", "precious\n", how)
    outside = secret.parent
    with daemon(tmp_path, root, env=REVIEWERS) as d:
        status, reply = d.post("/v1/labels", LABEL, AUTH)
        assert status == 500, reply
        assert "symbolic link" in reply["error"] and reply["path"] == ("labels/api.jsonl" if how == "file" else
                                                                       "labels")
        assert secret.read_text() == "precious\n" and sorted(p.name for p in outside.iterdir()) == ["api.jsonl"]
        assert any("label not written" in e and "symbolic link" in e for e in _errors(d)), d.logs()
        _ingest_goes_on(d, "ada-after")
        _stops_promptly(d)
    assert secret.read_text() == "precious\n"


def test_a_fifo_at_the_labels_file_is_refused_without_blocking(tmp_path: Path) -> None:
    root = _state(tmp_path)
    (root / "labels").mkdir()
    os.mkfifo(root / "labels" / "api.jsonl")
    with daemon(tmp_path, root, env=REVIEWERS) as d:
        status, reply = d.post("/v1/labels", LABEL, AUTH)  # before: the write blocked, and this timed out
        assert status == 500, reply
        assert "FIFO" in reply["error"] and reply["path"] == "labels/api.jsonl"
        assert any("labels/api.jsonl" in e and "FIFO" in e for e in _errors(d)), d.logs()
        _ingest_goes_on(d, "ada-after")
        assert d.get("/readyz")[0] == 200
        _stops_promptly(d)  # before: SIGTERM waited for the blocked writer thread forever
    assert (root / "labels" / "api.jsonl").is_fifo()


# --- the review file


@pytest.mark.parametrize("how", ["file", "folder", "fifo"])
def test_a_review_is_never_written_through_a_symlink_or_into_a_fifo(tmp_path: Path, how: str) -> None:
    root = _state(tmp_path)
    (root / "heartbeats" / "zoe.jsonl").write_text("".join(_line(f"zoe-{i}", "zoe") for i in range(6)))  # all low
    secret = _outside(tmp_path, root, "reviews/honestyd.jsonl", "precious\n", how)
    outside = secret.parent
    if how == "fifo":
        os.mkfifo(root / "reviews" / "honestyd.jsonl")
    refused = {"file": "symbolic link", "folder": "symbolic link", "fifo": "FIFO"}[how]
    with daemon(tmp_path, root) as d:  # zoe is below at start: her review is due at the first evaluation
        wait_for(lambda: any("review event not written" in e and refused in e for e in _errors(d)), 10,
                 "the refused review write to be logged")
        assert d.get("/v1/reviews")[0] == 200
        _ingest_goes_on(d, "ada-after")
        _stops_promptly(d)  # a FIFO never held a writer (or SIGTERM) up
    assert secret.read_text() == "precious\n" and sorted(p.name for p in outside.iterdir()) == ["honestyd.jsonl"]
    if how == "fifo":
        assert (root / "reviews" / "honestyd.jsonl").is_fifo()


# --- the changelog


def test_a_fifo_at_the_changelog_path_blocks_neither_start_nor_pages_nor_stop(tmp_path: Path) -> None:
    root = _state(tmp_path)
    (root / "iris").mkdir()
    os.mkfifo(root / CHANGELOG)
    with daemon(tmp_path, root) as d:  # before: the start read the FIFO and never got to serve
        assert any(CHANGELOG in e and "FIFO" in e for e in _errors(d)), d.logs()
        status, page = d.get("/methodology")
        assert status == 200 and "citation_rate" in page
        _ingest_goes_on(d, "ada-after")
        _stops_promptly(d)
    assert (root / CHANGELOG).is_fifo()


@pytest.mark.parametrize("how", ["file", "folder"])
def test_the_changelog_is_never_read_or_written_through_a_symlink_out_of_the_root(tmp_path: Path, how: str) -> None:
    root = _state(tmp_path)
    secret = _outside(tmp_path, root, CHANGELOG, "# precious-outside-text\n", how)
    outside = secret.parent
    with daemon(tmp_path, root) as d:
        assert any(e for e in _errors(d) if "changelog" in e and "symbolic link" in e), d.logs()
        status, page = d.get("/methodology")
        assert status == 200 and "precious-outside-text" not in page
        _ingest_goes_on(d, "ada-after")
        _stops_promptly(d)
    assert secret.read_text() == "# precious-outside-text\n"
    assert sorted(p.name for p in outside.iterdir()) == ["honesty-changelog.md"]


# --- FIFOs where the daemon reads


class _Opened:
    """A writer blocked in ``open`` on a FIFO: it returns only when something opens the FIFO for reading."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.releasing = False
        self.by_someone_else: bool | None = None
        self.thread = threading.Thread(target=self._wait, daemon=True)
        self.thread.start()

    def _wait(self) -> None:
        fd = os.open(self.path, os.O_WRONLY)
        self.by_someone_else = not self.releasing
        os.close(fd)

    def release(self) -> bool:
        """Unblock the writer; True iff something other than this call had opened the FIFO for reading."""
        self.releasing = True
        if self.by_someone_else is None:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            self.thread.join(5)
            os.close(fd)
        self.thread.join(5)
        return bool(self.by_someone_else)


@contextmanager
def _watched_fifos(*paths: Path) -> Iterator[list[_Opened]]:
    for path in paths:
        os.mkfifo(path)
    watches = [_Opened(p) for p in paths]
    try:
        yield watches
    finally:
        opened = [str(w.path) for w in watches if w.release()]
        assert opened == [], f"opened for reading: {opened}"


def test_fifos_as_logs_and_briefs_are_never_opened(tmp_path: Path) -> None:
    root = _state(tmp_path)
    (root / "briefs" / "probe.md").write_text("")
    held: list[IO[str]] = []
    try:
        with _watched_fifos(root / "heartbeats" / "early.jsonl", root / "briefs" / "early.md"), daemon(
                tmp_path, root) as d, _watched_fifos(root / "heartbeats" / "late.jsonl", root / "briefs" / "late.md"):
            _ingest_goes_on(d, "ada-after-fifos")  # the watcher's events for the new FIFOs were handled
            for agent in ("zed", "yan"):  # two rescans walked past all four
                held.append(probe(root, "briefs/probe.md", agent))
                wait_for(lambda a=agent: a in agents(d), 15, f"a rescan finding {agent}")  # type: ignore[misc]
            assert d.get("/readyz")[0] == 200
            _stops_promptly(d)
    finally:
        for f in held:
            f.close()


# --- in-process: a file swapped for a FIFO between the stat and the read


@pytest.fixture
def ingester(tmp_path: Path) -> Iterator[Ingester]:
    (tmp_path / "state" / "heartbeats").mkdir(parents=True)
    (tmp_path / "state" / "briefs").mkdir()
    with Store.open(tmp_path / "db.sqlite") as store:
        yield Ingester(store, tmp_path / "state", Config())


@pytest.mark.parametrize("rel", ["heartbeats/x.jsonl", "briefs/x.md"])
def test_a_file_swapped_for_a_fifo_after_the_walk_is_neither_opened_nor_waited_on(ingester: Ingester,
                                                                                  rel: str) -> None:
    path = ingester.root / rel
    path.write_text(_line("x-1") if rel.endswith(".jsonl") else "---\nagent: x\n---\nhi\n")
    info = stat_file(ingester.root, rel)
    assert info is not None
    path.unlink()
    # Before: open() on the FIFO waited for a writer; here one waits in open() too, so the old code was released
    # (and read nothing), and the watch reports that the ingester had opened the FIFO for reading.
    with _watched_fifos(path):
        stats = ingester.ingest_file(info)
    assert sum(stats.records.values()) == 0 and ingester.store.conn.execute("SELECT COUNT(*) FROM events"
                                                                            ).fetchone()[0] == 0


def test_read_regular_refuses_a_fifo_without_opening_it(tmp_path: Path) -> None:
    with _watched_fifos(tmp_path / "f"), pytest.raises(RefusedFile, match="is a FIFO"):
        read_regular(str(tmp_path / "f"))


# --- daemon/safefile.py


def test_safefile_appends_and_replaces_regular_files_creating_folders_inside_the_root(tmp_path: Path) -> None:
    safefile.append(tmp_path, "labels/api.jsonl", b"one\n")
    safefile.append(tmp_path, "labels/api.jsonl", b"two\n")
    assert (tmp_path / "labels" / "api.jsonl").read_bytes() == b"one\ntwo\n"
    safefile.replace(tmp_path, "a/b/c.md", b"x", 0o640)
    safefile.replace(tmp_path, "a/b/c.md", b"y", 0o640)
    assert (tmp_path / "a" / "b" / "c.md").read_bytes() == b"y" and safefile.read(tmp_path, "a/b/c.md") == b"y"
    assert oct((tmp_path / "a" / "b" / "c.md").stat().st_mode & 0o777) == oct(0o640)
    assert sorted(p.name for p in (tmp_path / "a" / "b").iterdir()) == ["c.md"]  # no temporary file left
    assert safefile.read(tmp_path, "a/missing.md") is None and safefile.read(tmp_path, "nowhere/x.md") is None


@pytest.mark.parametrize("rel", ["../x", "/etc/passwd", "a/../../x", "a//b", "", "a/./b"])
def test_safefile_refuses_paths_that_are_not_plain_relative_ones(tmp_path: Path, rel: str) -> None:
    with pytest.raises(RefusedFile, match="plain relative path"):
        safefile.append(tmp_path / "root", rel, b"x")


def test_safefile_refuses_every_way_out_of_the_root_and_every_non_regular_file(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (outside / "f").write_text("precious")
    (root / "link.md").symlink_to(outside / "f")
    (root / "dirlink").symlink_to(outside, target_is_directory=True)
    (root / "real" / "inner").symlink_to(root / "real")  # even a link that stays inside: writes take no symlink
    os.mkfifo(root / "fifo.md")
    (root / "file").write_text("")
    cases = {"link.md": "link.md: is a symbolic link", "dirlink/f": "dirlink: is a symbolic link",
             "real/inner/x": "real/inner: is a symbolic link", "fifo.md": "fifo.md: is a FIFO",
             "file/x": "file: is a regular file, not a directory", "real": "real: is a directory"}
    for rel, message in cases.items():
        for write in (lambda r: safefile.append(root, r, b"x"), lambda r: safefile.replace(root, r, b"x"),
                      lambda r: safefile.read(root, r)):
            with pytest.raises(RefusedFile) as refused:
                write(rel)
            assert str(refused.value).startswith(message), (rel, str(refused.value))
    assert (outside / "f").read_text() == "precious" and sorted(p.name for p in outside.iterdir()) == ["f"]
    assert sorted(p.name for p in root.iterdir()) == ["dirlink", "fifo.md", "file", "link.md", "real"]
