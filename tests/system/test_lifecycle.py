"""The daemon's claims before it writes (port, store lock, sound store), store faults, and `store check`/`rebuild`.

Real daemons as subprocesses on real SQLite files: a busy port, a second daemon on one store, a file with pages
overwritten, a database deleted under a running daemon, a stale model temp file, and the demo on a busy port.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.rfc3339 import format_ts
from daemon import lifecycle, modelcache
from tests.conftest import HONESTYD, ROOT, Run
from tests.daemon_harness import daemon, free_port, stop, wait_for, write_config

#: How long a start that fails may take: it fails before reading the state root.
QUICK = 30


def _line(i: int, ts: datetime, agent: str = "ada", text: str | None = None) -> str:
    return json.dumps({"id": f"{agent}-{i}", "ts": format_ts(ts), "agent": agent, "kind": "dm", "thread": f"t{i}",
                       "text": text or f"update {i} see https://docs.example.org/{i % 3}"}) + "\n"


def _state(tmp: Path, n: int = 6) -> Path:
    root = tmp / "state"
    (root / "heartbeats").mkdir(parents=True)
    now = datetime.now(UTC)
    (root / "heartbeats" / "ada.jsonl").write_text("".join(_line(i, now - timedelta(minutes=30 + i)) for i in range(n)))
    return root


def _run(*args: str | Path, timeout: float = QUICK) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HONESTYD, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"})


def _one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The failed start's stderr: exactly one line, an ERROR, no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and " ERROR " in lines[0] and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(root.rglob("*"))}


@contextmanager
def _busy_port() -> Iterator[int]:
    """A port another program holds (bound and listening) for the length of the ``with``."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def _table_pages(db: Path, *tables: str) -> list[int]:
    conn = sqlite3.connect(db)
    try:
        names = ",".join("?" * len(tables))
        return [int(r[0]) for r in conn.execute(f"SELECT pageno FROM dbstat WHERE name IN ({names})", tables)]
    finally:
        conn.close()


def _overwrite_pages(db: Path, pages: list[int]) -> None:
    """Damage a store file as a failing disk or a stray write would: whole pages of garbage."""
    size = sqlite3.connect(db).execute("PRAGMA page_size").fetchone()[0]
    with db.open("r+b") as f:
        for page in pages:
            f.seek((page - 1) * size)
            f.write(b"\xa5" * size)


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


# --- the port first: nothing written before it is held


def test_a_busy_port_exits_4_with_one_line_and_writes_nothing(tmp_path: Path) -> None:
    root = _state(tmp_path)
    (root / "iris").mkdir()
    (root / "iris" / "honesty-changelog.md").write_text("# Changelog\n\nwritten by hand, no methodology yet\n")
    bare = tmp_path / "bare"  # a state root without iris/: the changelog's folder must not appear either
    bare.mkdir()
    (bare / "heartbeats").mkdir()
    before = {root: _tree(root), bare: _tree(bare)}
    with _busy_port() as port:
        for state in (root, bare):
            db = tmp_path / f"{state.name}.db"
            proc = _run("run", "--config", write_config(tmp_path / "config.toml"), "--state", state, "--db", db,
                        "--listen", f"127.0.0.1:{port}")
            assert proc.returncode == lifecycle.EXIT_LISTEN, proc.stderr
            line = _one_error_line(proc)
            assert f"127.0.0.1:{port}" in line and "in use" in line
            assert _tree(state) == before[state]  # the changelog byte for byte, and no folder created
            assert not db.exists() and not lifecycle.lock_path_for(db).exists()  # nor the store, nor its lock


# --- one daemon per store


def test_a_second_writer_on_the_same_store_exits_5_naming_the_first_ones_pid(tmp_path: Path) -> None:
    root = _state(tmp_path)
    with daemon(tmp_path, root) as first:
        config = write_config(tmp_path / "second.toml")
        proc = _run("run", "--config", config, "--state", root, "--db", first.db, "--listen",
                    f"127.0.0.1:{free_port()}")
        assert proc.returncode == lifecycle.EXIT_STORE_LOCKED, proc.stderr
        line = _one_error_line(proc)
        assert f"pid {first.proc.pid}" in line and str(first.db) in line
        # The one-shot writers are refused the same way: two writers would break exactly-once.
        for args in (("ingest", "--state", root, "--db", first.db),
                     ("verify", "--state", root, "--db", first.db, "--all"),
                     ("store", "rebuild", "--state", root, "--db", first.db)):
            proc = _run(*args)
            assert proc.returncode == lifecycle.EXIT_STORE_LOCKED, proc.stderr
            assert f"pid {first.proc.pid}" in proc.stderr and "Traceback" not in proc.stderr
        assert first.get("/readyz")[0] == 200 and first.proc.poll() is None
        assert stop(first)[0] == 0
    with daemon(tmp_path, root) as again:  # the lock went with the process: the next start takes it
        assert stop(again)[0] == 0


def test_a_stale_model_temp_file_is_removed_at_start(tmp_path: Path) -> None:
    root = _state(tmp_path)
    db = tmp_path / "honestyd.db"
    tmp = modelcache.tmp_path_for(modelcache.path_for(db))
    stale = b"half a pickle left by a SIGKILL" * 1000
    tmp.write_bytes(stale)
    others = [tmp_path / "other.db.model.tmp", tmp.with_name(tmp.name + ".keep")]  # not honestyd's name for it
    for other in others:
        other.write_bytes(b"not ours")
    with daemon(tmp_path, root, db=db) as d:
        # The running daemon's own cache write may have that name by now (daemon/cachewriter.py).
        with contextlib.suppress(FileNotFoundError):
            assert tmp.read_bytes() != stale
        assert all(other.read_bytes() == b"not ours" for other in others)
        # The file has more than one origin (a stop's write cut short, a periodic writer killed with the daemon or
        # ended by a stop): the line names what they share.
        assert f"removed {tmp}, left by a model cache write that did not finish" in d.logs()
        assert stop(d)[0] == 0


# --- a damaged store: refused at start, found while running


@pytest.mark.parametrize("damage", ["pages", "header"])
def test_a_damaged_store_exits_3_with_one_line_naming_the_repair(tmp_path: Path, honestyd: Run, damage: str) -> None:
    root = _state(tmp_path)
    db = tmp_path / "honestyd.db"
    honestyd("ingest", "--state", root, "--db", db)
    if damage == "pages":  # a run of pages in the middle: "database disk image is malformed"
        _overwrite_pages(db, _table_pages(db, "events", "cursors"))
    else:  # the header past its magic: "file is not a database" (a file without the magic is not a store at all:
        with db.open("r+b") as f:  # a usage error, exit 2, see tests/system/test_cli_errors.py)
            f.seek(16)
            f.write(b"\0" * 84)
    (root / "iris").mkdir()
    changelog = root / "iris" / "honesty-changelog.md"
    changelog.write_text("# Changelog\n")
    config = write_config(tmp_path / "config.toml")
    cache = modelcache.path_for(db)  # read beside the store's check (ModelKeeper.prefetch): judged, never touched
    cache.write_bytes(modelcache.MAGIC + b'{"format": 0}\n')
    cache.chmod(0o600)
    proc = _run("run", "--config", config, "--state", root, "--db", db, "--listen", f"127.0.0.1:{free_port()}")
    assert proc.returncode == lifecycle.EXIT_STORE_DAMAGED, proc.stderr
    line = _one_error_line(proc)
    assert f"store {db} is damaged" in line
    assert f"honestyd store rebuild --db {db} --state {root} --config {config}" in line
    assert changelog.read_text() == "# Changelog\n"  # no methodology entry for a daemon that never ran
    assert cache.read_bytes() == modelcache.MAGIC + b'{"format": 0}\n'
    assert lifecycle.EXIT_STORE_DAMAGED in lifecycle.NO_RESTART


def test_damage_found_while_running_stops_the_daemon_with_status_3(tmp_path: Path) -> None:
    root = _state(tmp_path)
    with daemon(tmp_path, root, config=write_config(tmp_path / "config.toml", rescan="1h")) as d:
        conn = sqlite3.connect(d.db, isolation_level=None)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the main file, where the damage goes
            _overwrite_pages(d.db, _table_pages(d.db, "files", "cursors"))
            # A commit of our own, so that the daemon's connections drop the pages they hold and read the file again.
            conn.execute("PRAGMA user_version = 7")
        finally:
            conn.close()
        (root / "heartbeats" / "bo.jsonl").write_text(_line(1, datetime.now(UTC), agent="bo"))
        code = d.proc.wait(QUICK)
        assert code == lifecycle.EXIT_STORE_DAMAGED, d.logs()
        errors = [line for line in d.logs().splitlines() if " ERROR " in line]
        assert len(errors) == 1 and f"store {d.db} is damaged" in errors[0], d.logs()
        assert "honestyd store rebuild" in errors[0] and "Traceback" not in d.logs()
        assert not modelcache.path_for(d.db).exists()  # no model cache of a damaged store


def test_a_database_deleted_while_running_turns_readyz_503_then_is_rebuilt(tmp_path: Path) -> None:
    root = _state(tmp_path)
    log = root / "heartbeats" / "ada.jsonl"
    # Rescans an hour apart: each pass below is the one a file event starts, so each step is known to have run.
    with daemon(tmp_path, root, config=write_config(tmp_path / "config.toml", rescan="1h")) as d:
        assert d.metric("honesty_window_decisions", agent="ada", window="24h") == 6
        for suffix in ("", "-wal", "-shm"):
            Path(f"{d.db}{suffix}").unlink(missing_ok=True)
        d.db.mkdir()  # and for a while nothing can be opened there: the daemon must wait, not ready
        with log.open("a") as f:
            f.write(_line(100, datetime.now(UTC)))
        wait_for(lambda: d.get("/readyz")[0] == 503, 10, "/readyz 503 once the next pass finds the store gone")
        assert "was deleted while honestyd ran" in d.logs() and "are lost" in d.logs()
        assert d.get("/readyz")[1].startswith("store lost")
        d.db.rmdir()
        with log.open("a") as f:
            f.write(_line(101, datetime.now(UTC)))
        wait_for(lambda: d.get("/readyz")[0] == 200, 20, "ready again on a store rebuilt from the state root")
        assert d.metric("honesty_window_decisions", agent="ada", window="24h") == 8
        assert _query(d.db, "SELECT count(*) FROM events") == [(8,)]
        with log.open("a") as f:  # and it goes on ingesting into the new store
            f.write(_line(102, datetime.now(UTC)))
        wait_for(lambda: d.metric("honesty_window_decisions", agent="ada", window="24h") == 9, 10, "one more")
        errors = [line for line in d.logs().splitlines() if " ERROR " in line]
        assert len(errors) == 2, d.logs()  # the loss, and the one failed reopen (logged once)
        assert stop(d)[0] == 0


# --- store check and store rebuild


def test_store_check_says_ok_or_what_is_wrong(tmp_path: Path, honestyd: Run) -> None:
    root = _state(tmp_path)
    db = tmp_path / "honestyd.db"
    honestyd("ingest", "--state", root, "--db", db)
    proc = honestyd("store", "check", "--db", db)
    assert proc.stdout.startswith(f"{db}: ok (6 events,")
    _overwrite_pages(db, _table_pages(db, "events"))
    proc = honestyd("store", "check", "--db", db, check=False)
    assert proc.returncode == lifecycle.EXIT_STORE_DAMAGED
    assert proc.stdout.startswith(f"{db}: damaged: ") and "honestyd store rebuild" in proc.stdout
    missing = tmp_path / "missing.db"
    proc = honestyd("store", "check", "--db", missing, check=False)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [f"--db {missing}: no database there"]


def _store_with_history(tmp_path: Path, honestyd: Run) -> tuple[Path, Path]:
    """A store holding link checks, daily history, and the lines of a log rotated away and deleted since."""
    root = _state(tmp_path, n=8)
    db = tmp_path / "honestyd.db"
    now = datetime.now(UTC)
    gone = root / "heartbeats" / "bo.jsonl"
    gone.write_text("".join(_line(i, now - timedelta(minutes=i), agent="bo") for i in range(2)))
    honestyd("ingest", "--state", root, "--db", db)
    gone.unlink()  # a log deleted: its 2 lines are only in the store
    log = root / "heartbeats" / "ada.jsonl"
    log.rename(log.with_name("ada.jsonl.1"))  # rotated: drained, then the new file read as the next generation
    log.write_text("".join(_line(50 + i, now - timedelta(minutes=i)) for i in range(3)))
    honestyd("ingest", "--state", root, "--db", db)
    log.with_name("ada.jsonl.1").unlink()  # its 8 lines are now only in the store
    honestyd("ingest", "--state", root, "--db", db)
    assert _query(db, "SELECT deleted_us IS NOT NULL FROM files WHERE path = 'heartbeats/bo.jsonl'") == [(1,)]
    checks = tmp_path / "checks.jsonl"
    checks.write_text("".join(json.dumps({"target": f"https://docs.example.org/{i}", "type": "url",
                                          "checked_at": format_ts(now), "ok": i != 2, "status": 200 if i != 2 else 404})
                              + "\n" for i in range(3)))
    honestyd("checks", "import", "--db", db, checks)
    honestyd("history", "ada", "--db", db, "--backfill", "--days", "2")
    assert _query(db, "SELECT count(*) FROM history") != [(0,)]
    return root, db


_KEPT = {
    "events": "SELECT id, text, ts_us FROM events",
    "checks": "SELECT target, type, checked_us, ok, status, detail FROM checks ORDER BY seq",
    "history": "SELECT * FROM history ORDER BY day, agent, window, component",
    "files": "SELECT path, created_us, deleted_us FROM files ORDER BY path",
    "file_changes": "SELECT * FROM file_changes ORDER BY path, at_us",
}


def test_store_rebuild_keeps_what_cannot_be_rederived_and_reingests_the_rest(tmp_path: Path, honestyd: Run) -> None:
    root, db = _store_with_history(tmp_path, honestyd)
    before = {name: Counter(_query(db, sql)) for name, sql in _KEPT.items()}
    _overwrite_pages(db, _table_pages(db, "cursors", "evals", "changes"))  # what a rebuild re-derives
    assert honestyd("store", "check", "--db", db, check=False).returncode == lifecycle.EXIT_STORE_DAMAGED
    proc = honestyd("store", "rebuild", "--db", db, "--state", root)
    aside = next(tmp_path.glob("honestyd.db.damaged-*Z"))
    assert proc.stdout.splitlines()[0] == f"moved the damaged store aside to {aside}"
    assert "3 link checks" in proc.stdout and "10 events of log files no longer on disk" in proc.stdout
    assert "could not read" not in proc.stdout  # all it gave up was re-derivable
    assert honestyd("store", "check", "--db", db).returncode == 0
    after = {name: Counter(_query(db, sql)) for name, sql in _KEPT.items()}
    assert after == before  # every event (the deleted log's too), check, history row and file observation
    # Generations no longer on disk come before the current file in read order, which is read again as generation 0.
    assert _query(db, "SELECT path, generation, count(*) FROM events GROUP BY 1, 2 ORDER BY 1, 2") == [
        ("heartbeats/ada.jsonl", -2, 8), ("heartbeats/ada.jsonl", 0, 3), ("heartbeats/bo.jsonl", -1, 2)]
    with daemon(tmp_path, root, db=db) as d:  # and the daemon scores from it
        assert d.metric("honesty_window_decisions", agent="ada", window="24h") == 11
        assert d.metric("honesty_window_decisions", agent="bo", window="24h") == 2
        assert stop(d)[0] == 0


def test_store_rebuild_says_what_it_could_not_read(tmp_path: Path, honestyd: Run) -> None:
    root, db = _store_with_history(tmp_path, honestyd)
    checks = _query(db, _KEPT["checks"])
    _overwrite_pages(db, _table_pages(db, "events"))  # every event row: the current file's come back from disk
    proc = honestyd("store", "rebuild", "--db", db, "--state", root)
    assert "could not read from it (lost, unless still in the state root): events rowids 1 to the end" in proc.stdout
    assert _query(db, _KEPT["checks"]) == checks
    assert _query(db, "SELECT generation, count(*) FROM events GROUP BY 1") == [(0, 3)]
    assert "re-ingested from" in proc.stdout and "Traceback" not in proc.stderr


def test_store_rebuild_refuses_a_missing_store_or_state_root(tmp_path: Path, honestyd: Run) -> None:
    root = _state(tmp_path)
    proc = honestyd("store", "rebuild", "--db", tmp_path / "none.db", "--state", root, check=False)
    assert proc.returncode == 2 and "no database there" in proc.stderr
    db = tmp_path / "honestyd.db"
    honestyd("ingest", "--state", root, "--db", db)
    proc = honestyd("store", "rebuild", "--db", db, "--state", tmp_path / "nowhere", check=False)
    assert proc.returncode == 2 and "not a folder" in proc.stderr
    assert db.exists() and not list(tmp_path.glob("*.damaged-*"))  # nothing moved


# --- the demo


def test_the_demo_on_a_busy_port_prints_the_error_and_exits(tmp_path: Path) -> None:
    with _busy_port() as port:
        proc = _run("demo", "--dir", tmp_path / "demo", "--listen", f"127.0.0.1:{port}")
    assert proc.returncode == lifecycle.EXIT_LISTEN
    assert f"cannot listen on 127.0.0.1:{port}" in _one_error_line(proc)
    assert not (tmp_path / "demo").exists()  # nothing generated for a demo that cannot serve


def test_sigterm_during_the_demos_start_stops_it_before_it_serves(tmp_path: Path) -> None:
    proc = subprocess.Popen([*HONESTYD, "demo", "--dir", str(tmp_path / "demo"), "--listen",
                             f"127.0.0.1:{free_port()}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"})
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # the daemon, started on the generated state, records the methodology in force
            seen.append(line)
            if "changelog: methodology:" in line:
                proc.send_signal(signal.SIGTERM)
                break
        out, err = proc.communicate(timeout=QUICK)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logs = "".join(seen) + err
    assert proc.returncode == 0, logs
    assert "honestyd serving on" not in logs and "Ctrl-C stops" not in out  # stopped during the start
    assert "stopped" in logs and "Traceback" not in logs


def test_a_demo_directory_in_use_by_another_demo_is_not_wiped(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    first = subprocess.Popen([*HONESTYD, "demo", "--dir", str(directory), "--listen", f"127.0.0.1:{free_port()}"],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env={k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"})
    try:
        assert first.stdout is not None
        for line in first.stdout:  # the banner: the first demo's daemon serves
            if line.startswith("Ctrl-C stops"):
                break
        before = _tree(directory / "state")
        proc = _run("demo", "--dir", directory, "--listen", f"127.0.0.1:{free_port()}")
        assert proc.returncode == lifecycle.EXIT_STORE_LOCKED, proc.stderr
        assert f"pid {first.pid}" in _one_error_line(proc)
        # Its files are all still there (the live agents may have appended meanwhile).
        assert first.poll() is None and set(_tree(directory / "state")) >= set(before)
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(QUICK)
        first.stdout.close()
    assert first.returncode == 0


def test_make_demo_takes_its_port_from_port() -> None:
    demo_dir = ROOT / "demo-state"
    existed = demo_dir.exists()
    with _busy_port() as port:  # the port reaches the demo: it is the one it reports busy
        # A session of its own, so that a demo that hangs (make's child) is killed with make, not left running.
        proc = subprocess.Popen(["make", "--no-print-directory", "demo", f"PORT={port}"], cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode != 0
    assert f"ERROR honestyd.demo: cannot listen on 127.0.0.1:{port}" in err and "Traceback" not in err
    assert demo_dir.exists() == existed
