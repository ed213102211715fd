"""What cannot be read is said, counted and retried; what rotation lost is counted. Nothing is skipped silently.

* A mode-000 log and a mode-000 folder, against the real daemon as a subprocess: each logged once as a WARNING
  naming it (not again at later rescans), counted in ``honesty_unreadable_files``, and ingested at the next
  rescan once readable again (the gauge back to 0). Root reads mode-000 files, so when the suite runs as root
  the daemon runs as ``nobody`` on a tree it owns; were it able to read them, the gauge would stay at 0 and the
  test fail, not pass.
* Rotation faster than the pass, in-process with the real Ingester, the real log poller and real files (the
  renames told to the poller as the daemon's watcher tells it): a log rotated twice between two passes, the first
  generation moved out of its folder after growing past the cursor (its bytes, as the poll saw them, counted in
  ``honesty_ingest_lost_bytes_total``), the second still there as ``a.jsonl.1`` and never read (its lines counted
  in ``honesty_ingest_lost_lines_total``), one WARNING naming the log; rotations the ingester follows, or told
  late, count nothing. Against the daemon with its real watcher: two rotations while it is stopped (SIGSTOP).
"""

from __future__ import annotations

import json
import logging
import math
import os
import pwd
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import pytest

from collectors.poll import LogPoller
from collectors.rfc3339 import format_ts
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.store import Store
from tests.daemon_harness import Running, agents, daemon, probe, stop, wait_for, write_config


def _line(eid: str, agent: str) -> str:
    ts = format_ts(datetime.now(UTC) - timedelta(minutes=5))
    return json.dumps({"id": eid, "ts": ts, "agent": agent, "kind": "dm", "thread": eid, "text": "ok"}) + "\n"


# --- unreadable files and folders, against the daemon


@pytest.fixture
def unprivileged() -> Iterator[tuple[Path, str | None]]:
    """A directory the daemon's user owns, and that user: ``nobody`` when the tests run as root, else ourselves."""
    base = Path(tempfile.mkdtemp(prefix="honestyd-unreadable-"))
    os.chmod(base, 0o755)
    try:
        yield base, "nobody" if os.geteuid() == 0 else None
    finally:
        for path in [base, *base.rglob("*")]:  # mode 000 folders back to searchable, so that they can be removed
            if path.is_dir() and not path.is_symlink():
                os.chmod(path, 0o755)
        shutil.rmtree(base)


def _give(base: Path, user: str | None) -> None:
    if user is None:
        return
    account = pwd.getpwnam(user)
    for path in [base, *base.rglob("*")]:
        os.chown(path, account.pw_uid, account.pw_gid, follow_symlinks=False)


def _warnings(d: Running, what: str) -> int:
    return sum(1 for line in d.logs().splitlines() if " WARNING " in line and f"{what}: cannot be read" in line)


def test_an_unreadable_log_and_folder_are_logged_once_counted_and_read_once_readable(
        unprivileged: tuple[Path, str | None]) -> None:
    base, user = unprivileged
    root = base / "state"
    for folder in ("heartbeats", "briefs", "findings"):
        (root / folder).mkdir(parents=True)
    (root / "heartbeats" / "ada.jsonl").write_text("".join(_line(f"ada-{i}", "ada") for i in range(3)))
    locked_log = root / "heartbeats" / "bob.jsonl"
    locked_log.write_text("".join(_line(f"bob-{i}", "bob") for i in range(2)))
    (root / "briefs" / "carol-1.md").write_text(f"---\nagent: carol\nts: {format_ts(datetime.now(UTC))}\n---\nhi\n")
    (root / "findings" / "probe.md").write_text("")
    config = write_config(base / "config.toml")
    _give(base, user)
    locked_log.chmod(0o000)
    (root / "briefs").chmod(0o000)
    held: list[IO[str]] = []
    try:
        with daemon(base, root, config=config, user=user) as d:
            wait_for(lambda: d.metric("honesty_unreadable_files") == 2, 15, "both counted")
            for agent in ("zed", "yan"):  # two rescans more: still unreadable, not logged again
                held.append(probe(root, "findings/probe.md", agent))
                wait_for(lambda a=agent: a in agents(d), 15, f"a rescan finding {agent}")  # type: ignore[misc]
            assert (_warnings(d, "heartbeats/bob.jsonl"), _warnings(d, "briefs")) == (1, 1), d.logs()
            assert "Permission denied" in d.logs()
            assert d.metric("honesty_unreadable_files") == 2
            assert d.metric("honesty_ingest_records_total", source="heartbeats") == 3
            assert not {"bob", "carol"} & agents(d)
            locked_log.chmod(0o644)
            (root / "briefs").chmod(0o755)
            # No event tells of a chmod: the next rescan reads them.
            wait_for(lambda: {"bob", "carol"} <= agents(d), 15, "both read at the next rescan")
            wait_for(lambda: d.metric("honesty_unreadable_files") == 0, 15, "the gauge back to 0")
            assert d.metric("honesty_ingest_records_total", source="heartbeats") == 5
            assert "heartbeats/bob.jsonl: readable again" in d.logs()
            code, _ = stop(d)
            assert code == 0, d.logs()
    finally:
        for f in held:
            f.close()


def test_a_folder_that_becomes_unreadable_keeps_its_decisions(unprivileged: tuple[Path, str | None]) -> None:
    """A folder that cannot be listed any more is not a folder whose files were deleted: its briefs keep their
    decisions (before, the next rescan removed them, as for deleted files, and read them again as new ones)."""
    base, user = unprivileged
    root = base / "state"
    for folder in ("heartbeats", "briefs", "findings"):
        (root / folder).mkdir(parents=True)
    (root / "briefs" / "carol-1.md").write_text(f"---\nagent: carol\nts: {format_ts(datetime.now(UTC))}\n---\nhi\n")
    (root / "findings" / "probe.md").write_text("")
    config = write_config(base / "config.toml")
    _give(base, user)
    held: list[IO[str]] = []
    try:
        with daemon(base, root, config=config, user=user) as d:
            wait_for(lambda: "carol" in agents(d), 15, "the brief read")
            assert d.metric("honesty_unreadable_files") == 0
            (root / "briefs").chmod(0o000)
            for agent in ("zed", "yan"):
                held.append(probe(root, "findings/probe.md", agent))
                wait_for(lambda a=agent: a in agents(d), 15, f"a rescan finding {agent}")  # type: ignore[misc]
            assert d.metric("honesty_unreadable_files") == 1 and _warnings(d, "briefs") == 1
            assert "carol" in agents(d) and not re.search(r"[1-9][0-9]* deletions", d.logs()), d.logs()
            code, _ = stop(d)
            assert code == 0, d.logs()
    finally:
        for f in held:
            f.close()


# --- rotation faster than the pass


HB = "heartbeats/a.jsonl"


@pytest.fixture
def tailed(tmp_path: Path) -> Iterator[tuple[Ingester, LogPoller]]:
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    poller = LogPoller(root)
    with Store.open(tmp_path / "db.sqlite") as store:
        yield Ingester(store, root, Config(), sightings=poller.take), poller


def _write(path: Path, lines: list[str], mode: str = "a") -> int:
    data = "".join(lines).encode()
    with path.open(mode + "b") as f:
        f.write(data)
    return len(data)


def _events(ingester: Ingester) -> int:
    return int(ingester.store.conn.execute("SELECT COUNT(*) FROM events").fetchone()[0])


def _rotate(poller: LogPoller, log_path: Path, to: Path) -> None:
    """A rename rotation, told to the poller as the daemon's watcher tells it (daemon/app/watching.py)."""
    log_path.rename(to)
    poller.moved(HB, str(to))


def test_a_log_rotated_twice_between_passes_counts_what_was_lost(tailed: tuple[Ingester, LogPoller],
                                                                 tmp_path: Path, caplog: pytest.LogCaptureFixture
                                                                 ) -> None:
    ingester, poller = tailed
    log_path = ingester.root / HB
    rotated = ingester.root / "heartbeats" / "a.jsonl.1"
    archive = tmp_path / "archive"  # out of the log's folder: the ingester cannot find the file there
    archive.mkdir()
    _write(log_path, [_line("a-0", "ada"), _line("a-1", "ada")])
    poller.track(HB)
    ingester.scan()
    assert _events(ingester) == 2
    # Generation A grows past the cursor; the poll sees it, and before a pass runs it is rotated away and archived
    # out of the folder (gone: its bytes are what the poll saw) ...
    lost_a = _write(log_path, [_line(f"a-{i}", "ada") for i in range(2, 5)])
    assert poller.changed() == [HB]
    _rotate(poller, log_path, rotated)
    # ... and so is generation B, made and written meanwhile: still there as a.jsonl.1, never read (its lines).
    _write(log_path, [_line(f"b-{i}", "ada") for i in range(4)], "w")
    assert poller.changed() == [HB]
    rotated.rename(archive / "a.jsonl.1")
    _rotate(poller, log_path, rotated)
    _write(log_path, [_line("c-0", "ada")], "w")
    with caplog.at_level(logging.WARNING, logger="honestyd.ingest"):
        ingester.scan()
    assert _events(ingester) == 3  # A's first two lines and C's one: the 3 + 4 lines between are gone
    assert (ingester.losses.lines, ingester.losses.bytes) == (4, lost_a)
    warnings = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert warnings == [f"{HB}: rotated away before a pass could read them (lost): 4 lines in 1 rotated file(s) not"
                        f" followed, {lost_a} bytes in 1 generation(s) gone; rotate less often than the pass runs"
                        " (see docs/reliability.md)"]
    ingester.scan()
    assert (ingester.losses.lines, ingester.losses.bytes) == (4, lost_a)  # counted once
    # Again at once: counted, and no second line within the minute (a fast rotation loses at every pass).
    _rotate(poller, log_path, rotated)
    _write(log_path, [_line("d-0", "ada"), _line("d-1", "ada")], "w")
    _rotate(poller, log_path, rotated)
    _write(log_path, [_line("e-0", "ada")], "w")
    with caplog.at_level(logging.WARNING, logger="honestyd.ingest"):
        ingester.scan()
    assert _events(ingester) == 4 and (ingester.losses.lines, ingester.losses.bytes) == (6, lost_a)
    assert len([r for r in caplog.records if "lost" in r.getMessage()]) == 1


@pytest.mark.parametrize("rotated", ["a.jsonl.1", "a-1.jsonl"])
def test_a_rotation_the_ingester_follows_loses_nothing(tailed: tuple[Ingester, LogPoller], rotated: str) -> None:
    """Renamed to ``.1``, the old file is drained from there; renamed to a name that is a source itself, it is read
    under that name (from its start: docs/reliability.md). Neither is a loss, though the poll saw it grow."""
    ingester, poller = tailed
    log_path = ingester.root / HB
    _write(log_path, [_line("a-0", "ada")])
    poller.track(HB)
    ingester.scan()
    _write(log_path, [_line("a-1", "ada"), _line("a-2", "ada")])
    assert poller.changed() == [HB]
    _rotate(poller, log_path, ingester.root / "heartbeats" / rotated)
    _write(log_path, [_line("b-0", "ada")], "w")
    assert poller.changed() == [HB]
    ingester.scan()
    assert _events(ingester) == (4 if rotated == "a.jsonl.1" else 5)
    assert (ingester.losses.lines, ingester.losses.bytes) == (0, 0)


def test_the_file_being_read_moved_to_another_folder_counts_the_lines_past_its_cursor(
        tailed: tuple[Ingester, LogPoller]) -> None:
    """Rotated into another folder of the root (the log's own is the only one searched for it): its lines past the
    cursor are counted, not the ones read before."""
    ingester, poller = tailed
    log_path = ingester.root / HB
    (ingester.root / "archive").mkdir()
    _write(log_path, [_line(f"a-{i}", "ada") for i in range(2)])
    poller.track(HB)
    ingester.scan()
    _write(log_path, [_line(f"a-{i}", "ada") for i in range(2, 5)])
    _rotate(poller, log_path, ingester.root / "archive" / "a.jsonl.1")
    _write(log_path, [_line("b-0", "ada")], "w")
    ingester.scan()
    assert _events(ingester) == 3 and (ingester.losses.lines, ingester.losses.bytes) == (3, 0)


def test_a_rename_told_after_the_pass_that_drained_the_file_is_no_loss(tailed: tuple[Ingester, LogPoller]) -> None:
    """The watcher's news can come after the pass's stat: the file it names was drained by then, up to its end."""
    ingester, poller = tailed
    log_path, rotated = ingester.root / HB, ingester.root / "heartbeats" / "a.jsonl.1"
    _write(log_path, [_line("a-0", "ada")])
    poller.track(HB)
    ingester.scan()
    _write(log_path, [_line("a-1", "ada")])
    log_path.rename(rotated)
    _write(log_path, [_line("b-0", "ada")], "w")
    ingester.scan()  # drains a.jsonl.1, then reads the new log
    poller.moved(HB, str(rotated))  # told only now
    _write(log_path, [_line("b-1", "ada")])
    assert poller.changed() == [HB]
    ingester.scan()
    assert _events(ingester) == 4 and (ingester.losses.lines, ingester.losses.bytes) == (0, 0)


def test_the_poll_keeps_what_it_saw_after_the_ingesters_stat_for_the_next_pass(tmp_path: Path) -> None:
    (tmp_path / "heartbeats").mkdir()
    poller = LogPoller(tmp_path)
    log_path = tmp_path / HB
    first = _write(log_path, [_line("a-0", "ada")])
    poller.track(HB)
    first_ino = log_path.stat().st_ino
    stat_at = time.monotonic()  # a pass stats the log here: what the poll sees after belongs to the next pass
    log_path.rename(tmp_path / "heartbeats" / "a.jsonl.1")
    poller.moved(HB, str(tmp_path / "heartbeats" / "a.jsonl.1"))
    second = _write(log_path, [_line("b-0", "ada"), _line("b-1", "ada")], "w")
    assert poller.changed() == [HB]
    seen = poller.take(HB, stat_at)
    assert [(g.ino, g.size) for g in seen.generations] == [(first_ino, first)] and seen.moved_to == []
    assert poller.take(HB, stat_at) == ([], [])
    seen = poller.take(HB, math.inf)
    assert [(g.ino, g.size) for g in seen.generations] == [(log_path.stat().st_ino, second)]
    assert seen.moved_to == [str(tmp_path / "heartbeats" / "a.jsonl.1")]


def test_the_daemon_counts_a_generation_rotated_away_while_it_could_not_look(tmp_path: Path) -> None:
    """The real watcher and poll: the daemon is stopped (SIGSTOP) while the log is rotated twice, so no pass can
    run between; the generation in the middle, still there as ``a.jsonl.1``, is counted line by line."""
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    log_path, rotated = root / HB, root / "heartbeats" / "a.jsonl.1"
    _write(log_path, [_line("a-0", "ada"), _line("a-1", "ada")])
    with daemon(tmp_path, root) as d:
        def heartbeats() -> float:
            return d.metric("honesty_ingest_records_total", source="heartbeats") or 0

        wait_for(lambda: heartbeats() == 2, 10, "the log read")
        log_path.rename(rotated)  # one rotation, with passes around it: followed
        _write(log_path, [_line("b-0", "ada")], "w")
        wait_for(lambda: heartbeats() == 3, 10, "the new log read")
        d.proc.send_signal(signal.SIGSTOP)
        try:
            log_path.rename(rotated)
            _write(log_path, [_line(f"c-{i}", "ada") for i in range(4)], "w")
            log_path.rename(rotated)
            _write(log_path, [_line("d-0", "ada")], "w")
        finally:
            d.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: d.metric("honesty_ingest_lost_lines_total") == 4, 10, "the 4 lines counted as lost")
        wait_for(lambda: heartbeats() == 4, 10, "the newest log read")
        assert "heartbeats/a.jsonl: rotated away before a pass could read them (lost): 4 lines" in d.logs()
        code, _ = stop(d)
        assert code == 0, d.logs()
