"""Fault injection against ``honestyd run``: SIGKILL under load, a full store, a blind watcher, a busy database.

Each fault is injected where it happens in production, and each test counts what it checked. A test waits for what
it expects by polling with a generous deadline (``DEADLINE``), or for an event; a sleep is left only where it is the
stimulus (a writer's pace, the moment of a kill, a slow pass, a lock kept a while), and no outcome depends on how long
one takes. Durations are printed (figures: docs/reliability.md), never asserted.

* **SIGKILL under a steady append load** (the real daemon as a subprocess). A writer thread appends decisions to
  four logs at 2,000 events/s for the whole test, in writes that split lines at random (torn tails), and rotates
  one log by rename every 4 s (writing one more line to the old file after the rename). 20 trials on the same
  database: a daemon that has caught up is SIGKILLed after a random 0.2-1.5 s (seeded), restarted, and must catch
  up again with no duplicate and nothing unknown stored (an id the writer recorded before writing it: the store is
  read first, the writer's record after). At the end the writer stops, one last daemon catches up and stops with
  SIGTERM, and ``honestyd export decisions`` must hold exactly the multiset of ids written. With the rotated-file
  drain disabled (a mutation), an early trial fails with lines lost.
  The events are dated 400 days back, outside every window: this tests ingest, and keeps each start-up's
  rescore cheap.
* **The store fills up** (``PRAGMA max_page_count``, which is per connection, so the daemon runs in-process):
  ingest pauses with an ERROR ``store full: ingest paused`` line and ``honesty_store_full_total``; the refused
  batch rolls back with its cursor, and so does the next retry; the daemon keeps serving; raising the limit resumes
  ingest with nothing lost. Also at start-up: a store that is full before the first scan still starts serving, and
  catches up later.
* **The watcher misses events** (in-process: the observer is blinded with ``unschedule_all``, and shown to have no
  watch left): the 1 s rescan finds every new brief; appends to known logs are found by the log poller even with the
  watcher blind and the writer's file kept open; a dead observer thread is restarted by the watcher job, and the new
  one delivers events on its own (rescan set to an hour).
* **SQLite busy**: a reader holding a read transaction does not stop ingest; the WAL grows while it holds its
  snapshot, stays bounded once it ends and the checkpoint job truncates it to 0. Another writer holding the write
  lock while a pass is writing makes the batch wait (busy_timeout 5 s), ``/healthz`` answers meanwhile, and the batch
  is written once the lock is let go (after 1 s); kept until the pass gives up, the batch fails, and the paths stay
  pending and are ingested at the next event.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.rfc3339 import format_ts
from daemon import app as app_module
from daemon.app import Daemon, Overrides, storekeeping
from daemon.config import Config, DaemonSettings, GitHub
from daemon.ingest import passes as ingest_module
from daemon.store import Gate, Store
from tests.conftest import HONESTYD, ROOT
from tests.daemon_harness import free_port, in_process, wait_for, write_config

SEED = 20260602
#: How long a test waits for something that must happen: long enough for a loaded 2-core machine, so that a miss is a
#: bug (the thing never happens, or happens only by another path), not a slow run. Figures are printed, not asserted.
DEADLINE = 60.0
#: For what only a 1 s rescan can deliver: many intervals, so a miss means the rescan does not run every second.
RESCAN_DEADLINE = 15.0
TRIALS = 20
FILES = 4
RATE = 2000  # events per second, all files together
ROTATE_EVERY = 4.0  # seconds between two rename rotations (one log at a time, in turn)


# --- the writer: a steady append load with torn writes and rename rotation


class Writer(threading.Thread):
    """Appends decision lines to ``FILES`` logs at ``rate``/s.

    ``sent`` lists the ids whose newline is about to be written (recorded before the write: a daemon may store a line
    before ``os.write`` returns to this thread), ``complete`` those whose newline is written (recorded after it).
    Anything stored is in ``sent``; everything in ``complete`` must be stored.
    """

    def __init__(self, root: Path, rate: int = RATE, seed: int = SEED, rotate_every: float | None = ROTATE_EVERY):
        super().__init__(daemon=True)
        self.dir = root / "heartbeats"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.rate = rate
        self.rng = random.Random(seed)
        self.rotate_every = rotate_every
        self.sent: list[str] = []
        self.complete: list[str] = []
        self.rotations = 0
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.ts = format_ts(datetime.now(UTC) - timedelta(days=400))

    def _line(self, f: int, seq: int) -> tuple[str, bytes]:
        eid = f"k{f}-{seq}"
        body = {"id": eid, "ts": self.ts, "agent": f"agent{f}", "kind": "dm", "text": f"event {seq} of log {f}"}
        return eid, (json.dumps(body) + "\n").encode()

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # surfaced by the test
            self.error = exc
            raise

    def _run(self) -> None:
        fds = [os.open(self.dir / f"agent{f}.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
               for f in range(FILES)]
        pending = [b""] * FILES
        ids: list[list[str]] = [[] for _ in range(FILES)]
        seq = [0] * FILES
        tick, start = 0.01, time.monotonic()
        next_rotation = start + (self.rotate_every or float("inf"))
        sent = 0

        def write(f: int, data: bytes) -> None:
            done = ids[f][:data.count(b"\n")]
            self.sent.extend(done)
            os.write(fds[f], data)
            self.complete.extend(done)
            del ids[f][:len(done)]

        while not self.stop_event.is_set():
            due = int((time.monotonic() - start) * self.rate) - sent
            for k in range(max(due, 0)):
                f = (sent + k) % FILES
                eid, line = self._line(f, seq[f])
                seq[f] += 1
                pending[f] += line
                ids[f].append(eid)
            sent += max(due, 0)
            for f in range(FILES):
                if pending[f]:
                    cut = self.rng.randint(1, len(pending[f]))  # a random split: often mid-line
                    write(f, pending[f][:cut])
                    pending[f] = pending[f][cut:]
            if time.monotonic() >= next_rotation:
                f = self.rotations % FILES
                self.rotations += 1
                next_rotation += self.rotate_every or float("inf")
                write(f, pending[f])
                pending[f] = b""
                live = self.dir / f"agent{f}.jsonl"
                os.rename(live, self.dir / f"agent{f}.jsonl.{self.rotations}")
                eid, line = self._line(f, seq[f])  # the writer still holds the old file for one more line
                seq[f] += 1
                ids[f].append(eid)
                write(f, line)
                os.close(fds[f])
                fds[f] = os.open(live, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            time.sleep(tick)
        for f in range(FILES):
            write(f, pending[f])
            os.close(fds[f])


# --- SIGKILL under load


def _spawn(tmp: Path, root: Path, db: Path, config: Path, n: int) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp / f"run-{n}.log"
    args = [*HONESTYD, "run", "--config", str(config), "--state", str(root), "--db", str(db),
            "--listen", f"127.0.0.1:{free_port()}"]
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    with log.open("wb") as fh:
        return subprocess.Popen(args, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=env), log


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


DOUBLED_ROWS = "SELECT path, generation, line, count(*) FROM events GROUP BY path, generation, line HAVING count(*) > 1"
DOUBLED_IDS = "SELECT id, count(*) FROM events GROUP BY id HAVING count(*) > 1"


def _missing(db: Path, ids: set[str]) -> set[str]:
    """Which of ``ids`` the database does not hold (all of them, and a marker, while it is not there yet)."""
    try:
        return ids - {i for (i,) in _query(db, "SELECT id FROM events")}  # type: ignore[misc]
    except sqlite3.OperationalError:  # no database yet, or not migrated yet
        return ids | {"<no database yet>"}


def _catch_up(proc: subprocess.Popen[bytes], db: Path, ids: set[str], timeout: float) -> set[str]:
    """Wait until the database holds every one of ``ids`` (the cheap count first); returns those still missing."""
    deadline = time.monotonic() + timeout
    missing = ids
    while proc.poll() is None and time.monotonic() < deadline:
        if _caught_up(db, len(ids)) is not None:
            missing = _missing(db, ids)
            if not missing:
                break
        time.sleep(0.05)
    return missing


def _caught_up(db: Path, target: int) -> int | None:
    try:
        count = int(_query(db, "SELECT count(*) FROM events")[0][0])  # type: ignore[call-overload]
    except sqlite3.OperationalError:  # no database yet, or not migrated yet
        return None
    return count if count >= target else None


@pytest.mark.timeout(300)
def test_sigkill_under_steady_append_load_loses_and_doubles_nothing(tmp_path: Path) -> None:
    root, db = tmp_path / "state", tmp_path / "honestyd.db"
    config = write_config(tmp_path / "config.toml")
    rng = random.Random(SEED)
    writer = Writer(root)
    writer.start()
    kills = while_serving = 0
    started = time.monotonic()
    try:
        proc, log = _spawn(tmp_path, root, db, config, 0)
        for trial in range(TRIALS):
            # Caught up: every line complete before this (re)start is stored (the start-up scan commits it).
            before = set(writer.complete)
            missing = _catch_up(proc, db, before, DEADLINE)
            assert proc.poll() is None, log.read_text()
            assert not missing, f"trial {trial}: {len(missing)} lines lost, e.g. {sorted(missing)[:5]}"
            assert _query(db, DOUBLED_ROWS) == [] and _query(db, DOUBLED_IDS) == [], f"trial {trial}: doubled"
            stored = [i for (i,) in _query(db, "SELECT id FROM events")]
            sent = set(writer.sent)  # read after the store: every line stored by then was sent before
            unknown = [i for i in stored if i not in sent]
            assert unknown == [], f"trial {trial}: stored ids nobody wrote: {unknown[:5]}"
            time.sleep(rng.uniform(0.2, 1.5))
            assert proc.poll() is None, log.read_text()
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(10) == -signal.SIGKILL
            kills += 1
            while_serving += "serving on" in log.read_text()
            proc, log = _spawn(tmp_path, root, db, config, trial + 1)
        writer.stop_event.set()
        writer.join(10)
        assert writer.error is None
        total = len(writer.complete)
        with contextlib.suppress(AssertionError):  # a shortfall is reported below, by id
            wait_for(lambda: proc.poll() is not None or _caught_up(db, total), DEADLINE, "the final catch-up")
        wait_for(lambda: "serving on" in log.read_text() or proc.poll() is not None, DEADLINE, "serving")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(DEADLINE) == 0, log.read_text()
    finally:
        writer.stop_event.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    export = subprocess.run([*HONESTYD, "export", "decisions", "--db", str(db)], capture_output=True, cwd=ROOT,
                            timeout=120, check=True).stdout
    exported = Counter(json.loads(line)["id"] for line in export.splitlines())
    expected = Counter(writer.complete)
    lost = sum((expected - exported).values())
    doubled = sum((exported - expected).values())
    print(f"\n{TRIALS} trials, {kills} SIGKILLs ({while_serving} while serving HTTP, the rest during start-up),"
          f" {total} events written, {writer.rotations} rotations, {lost} lost, {doubled} doubled,"
          f" {time.monotonic() - started:.0f} s")
    assert (lost, doubled) == (0, 0)
    assert _query(db, DOUBLED_ROWS) == []
    assert kills == TRIALS and total > TRIALS * RATE * 0.2


# --- in-process: the real Daemon.serve() in this event loop, so a test can reach its store connection and observer


def _config(root: Path, db: Path, *, rescan: float = 1.0) -> Config:
    settings = DaemonSettings(listen="127.0.0.1:0", debounce=0.05, rescan_interval=timedelta(seconds=rescan),
                              rescore_interval=timedelta(seconds=1), drain_timeout=5.0)
    return Config(state_root=root, db_path=db, github=GitHub(repo="acme/app"), daemon=settings)


def _serving(config: Config, overrides: Overrides | None = None) -> contextlib.AbstractAsyncContextManager[Daemon]:
    return in_process(Daemon(config, environ={}, overrides=overrides or Overrides()))


async def _until(predicate: Callable[[], object], what: str, timeout: float = DEADLINE) -> float:
    """Poll until ``predicate()`` is truthy (an event we wait for, not time passing); returns the seconds it took."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - start


async def _until_off_loop(predicate: Callable[[], object], what: str, timeout: float = DEADLINE) -> float:
    """``_until`` for a predicate that blocks (an HTTP request to the daemon on this loop): run in a thread."""
    start = time.monotonic()
    while not await asyncio.to_thread(predicate):
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)
    return time.monotonic() - start


def _events(d: Daemon) -> int:
    # Through a connection of our own, as any outside reader: the daemon's connection is used only under d.lock
    # (a SELECT on it from this thread, unlocked, can leave its next BEGIN IMMEDIATE a stale snapshot: SQLITE_BUSY).
    try:
        return int(_query(d.config.db_path, "SELECT count(*) FROM events")[0][0])  # type: ignore[call-overload]
    except sqlite3.OperationalError:
        return -1


def _lines(agent: str, start: int, n: int, pad: int = 100) -> str:
    ts = format_ts(datetime.now(UTC) - timedelta(days=400))
    return "".join(json.dumps({"id": f"{agent}-{i}", "ts": ts, "agent": agent, "kind": "dm",
                               "text": f"line {i} " + "x" * pad}) + "\n" for i in range(start, start + n))


def _one_log(tmp_path: Path, lines: int) -> tuple[Path, Path, Path]:
    """A state root holding one heartbeat log of ``lines`` lines by ada, and where its store goes."""
    root, db = tmp_path / "state", tmp_path / "honestyd.db"
    log = root / "heartbeats" / "ada.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(_lines("ada", 0, lines))
    return root, db, log


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def _get(port: int | None, path: str) -> tuple[int, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return resp.status, resp.read().decode()


def _store_full_metric(port: int | None) -> float:
    _, text = _get(port, "/metrics")
    lines = [line for line in text.splitlines() if line.startswith("honesty_store_full_total ")]
    return float(lines[0].split()[1]) if lines else 0.0


def test_store_full_pauses_ingest_keeps_the_cursor_and_resumes_with_nothing_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    root, db, log = _one_log(tmp_path, 100)
    rel = "heartbeats/ada.jsonl"

    async def scenario() -> None:
        async with _serving(_config(root, db)) as d:
            assert d.store is not None and d.lock is not None
            store = d.store
            await _until(lambda: _events(d) == 100, "the first 100")
            async with d.lock:
                before = store.cursor(rel)
                pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
                store.conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full from now on
            _append(log, _lines("ada", 100, 3000))
            await _until(lambda: d.store_full > 0, "a refused write")
            full = [r for r in caplog.records if "store full: ingest paused" in r.getMessage()]
            assert len(full) == 1 and full[0].levelno == logging.ERROR, caplog.text
            _append(log, _lines("ada", 3100, 1000))  # more arrives while full: it queues behind
            await _until(lambda: d.store_full >= 2, "a retry (the 1 s rescan) refused too")
            async with d.lock:
                assert store.cursor(rel) == before, "the refused batch must not move the cursor"
                assert _events(d) == 100
            assert d.store_full >= 2 and len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
            # Still serving: liveness, and the counter reaches /metrics with the next evaluation.
            assert (await asyncio.to_thread(_get, d.port, "/healthz"))[0] == 200
            await _until_off_loop(lambda: _store_full_metric(d.port) >= 1, "honesty_store_full_total on /metrics")
            async with d.lock:
                store.conn.execute("PRAGMA max_page_count = 1073741823")  # space returns
            took = await _until(lambda: _events(d) == 4100, "every line after space returned")
            # Logged when the flush that committed them returns, just after the rows are visible.
            await _until(lambda: any("ingest resumed" in r.getMessage() for r in caplog.records), "the log line")
            async with d.lock:
                after = store.cursor(rel)
                ids = [r[0] for r in store.conn.execute("SELECT id FROM events")]
            assert after is not None and before is not None and after.line == before.line + 4000
            assert sorted(ids) == sorted(f"ada-{i}" for i in range(4100))
            print(f"\nstore full: {d.store_full} refused writes, resumed {took:.2f} s after space returned")

    asyncio.run(scenario())


def test_a_pass_the_full_store_stops_part_way_still_counts_what_it_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """honesty_ingest_records_total after a refusal mid-pass: the groups committed before it are counted (a retry
    skips their rows, so they would be missed for good), and once space returns the counter equals the store."""
    monkeypatch.setattr(ingest_module, "BATCH_LINES", 50)  # a group per log below: the pass commits several
    root, db = tmp_path / "state", tmp_path / "honestyd.db"
    (root / "heartbeats").mkdir(parents=True)
    logs = [root / "heartbeats" / f"a{k:02}.jsonl" for k in range(12)]
    for k, log in enumerate(logs):
        log.write_text(_lines(f"a{k:02}", 0, 1))

    async def scenario() -> None:
        async with _serving(_config(root, db, rescan=3600)) as d:
            assert d.store is not None and d.lock is not None
            await _until(lambda: _events(d) == 12, "the first line of each log")
            async with d.lock:
                pages = d.store.conn.execute("PRAGMA page_count").fetchone()[0]
                d.store.conn.execute(f"PRAGMA max_page_count = {pages + 60}")  # room for a few groups
            for k, log in enumerate(logs):
                _append(log, _lines(f"a{k:02}", 1, 60, pad=1000))
            await _until(lambda: d.store_full > 0, "a refused write")
            async with d.lock:
                stored = _events(d)
            assert 12 < stored < 12 * 61, "the pass was to stop part-way"
            assert d.ingest_records["heartbeats"] == stored
            async with d.lock:
                d.store.conn.execute("PRAGMA max_page_count = 1073741823")
            _append(logs[0], _lines("a00", 61, 1))  # the next event retries the pending paths
            await _until(lambda: _events(d) == 12 * 61 + 1, "every line after space returned")
            await _until(lambda: d.ingest_records["heartbeats"] == 12 * 61 + 1, "the counter")

    asyncio.run(scenario())


def test_records_counted_in_a_transaction_the_full_store_rolled_back_are_never_counted(tmp_path: Path) -> None:
    """A batch's records are counted once inserted; a later statement of the same transaction (its rejects, here)
    can still find the store full and roll it all back. Those counts must die with the rollback, not ride on the
    next commit anyone makes on the store (the history and checks writers commit on the same connection)."""
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    good = _lines("a", 0, 1)
    bad = "".join(f'{{"id": "bad-{i}", "ts": "yesterday", "text": "{"x" * 300}"}}\n' for i in range(300))
    (root / "heartbeats" / "a.jsonl").write_text(good + bad)
    with Store.open(tmp_path / "honestyd.db") as store:
        ingester = ingest_module.Ingester(store, root, _config(root, tmp_path / "honestyd.db"))
        pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
        store.conn.execute(f"PRAGMA max_page_count = {pages}")  # the one event fits its table's page; 300 rejects not
        with pytest.raises(sqlite3.OperationalError, match="full"):
            ingester.scan()
        assert store.conn.execute("SELECT count(*) FROM events").fetchone()[0] == 0
        assert ingester.committed.records["heartbeats"] == 0
        store.conn.execute("PRAGMA max_page_count = 1073741823")
        with store.atomic():  # someone else's commit on the same store
            store.add_file_change("heartbeats/a.jsonl", datetime.now(UTC))
        assert ingester.committed.records["heartbeats"] == 0, "counted, though rolled back"
        assert ingester.committed.rejects.total() == 0


def test_a_store_full_at_start_up_still_serves_then_catches_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO)
    root, db, log = _one_log(tmp_path, 2000)
    mtime = datetime.fromtimestamp(log.stat().st_mtime, UTC)

    class FullStore(Store):
        @classmethod
        def open(cls, path: Path, *, readonly: bool = False, gate: Gate | None = None) -> Store:
            store = Store.open(path, readonly=readonly, gate=gate)
            pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
            store.conn.execute(f"PRAGMA max_page_count = {pages}")
            return store

    monkeypatch.setattr(storekeeping, "Store", FullStore)

    async def scenario() -> None:
        async with _serving(_config(root, db)) as d:
            assert d.store is not None and d.lock is not None
            assert _events(d) == 0 and d.store_full >= 1 and "store full: ingest paused" in caplog.text
            assert (await asyncio.to_thread(_get, d.port, "/readyz"))[0] == 200
            async with d.lock:
                d.store.conn.execute("PRAGMA max_page_count = 1073741823")
            await _until(lambda: _events(d) == 2000, "the start-up catch-up, retried by the rescan")
            # The retried start-up scan dates the file by its mtime, as the start-up scan would have.
            async with d.lock:
                index = d.store.index_rows_get("heartbeats/ada.jsonl")
            assert index is not None and abs((index.created - mtime).total_seconds()) < 1

    asyncio.run(scenario())


def _brief(root: Path, n: int) -> None:
    """A new brief: only the watcher or a rescan finds a new Markdown file (the log poller knows only logs)."""
    path = root / "briefs" / f"b{n}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nagent: ada\nts: {format_ts(datetime.now(UTC) - timedelta(days=400))}\n---\nbrief {n}\n")


def test_rescan_catches_what_a_blind_watcher_missed(tmp_path: Path) -> None:
    root, db, _ = _one_log(tmp_path, 10)

    async def scenario() -> list[float]:
        async with _serving(_config(root, db, rescan=1.0)) as d:
            await _until(lambda: _events(d) == 10, "the first 10")
            d.observer.unschedule_all()  # alive but blind, as when inotify's queue overflows
            assert not d.observer.emitters, "the watcher still watches: the test would prove nothing"
            latencies = []
            for k in range(6):  # each written just after a pass found the last one: up to a whole interval to wait
                _brief(root, k)
                # Only the rescan can find it; at 1 s, missing the deadline means it does not run at its interval.
                latencies.append(await _until(lambda k=k: _events(d) == 11 + k, f"brief {k}", RESCAN_DEADLINE))
            assert d.observer.is_alive()
            return latencies

    latencies = asyncio.run(scenario())
    print(f"\nblind watcher: 6 new briefs found by the 1 s rescan after {', '.join(f'{s:.2f}' for s in latencies)} s")


def test_a_blind_watcher_still_sees_appends_by_polling(tmp_path: Path) -> None:
    """Appends to known logs are found by polling their size (no inotify modify events are asked for), so a
    writer that keeps its file open, or a watcher gone blind, does not hold them up until the rescan.
    """
    root, db, log = _one_log(tmp_path, 10)

    async def scenario() -> list[float]:
        # No rescan: only the poller can deliver. The root comes from the command line, as `--state` gives it.
        config = _config(tmp_path / "elsewhere", db, rescan=3600)
        async with _serving(config, Overrides(state=root)) as d:
            await _until(lambda: _events(d) == 10, "the first 10")
            d.observer.unschedule_all()
            assert not d.observer.emitters, "the watcher still watches: the test would prove nothing"
            fd = os.open(log, os.O_WRONLY | os.O_APPEND)  # kept open: no close-after-write event either
            try:
                took = []
                for k in range(5):
                    os.write(fd, _lines("ada", 10 + 10 * k, 10).encode())
                    took.append(await _until(lambda k=k: _events(d) == 20 + 10 * k, f"append {k}"))
            finally:
                os.close(fd)
            return took

    took = asyncio.run(scenario())
    print(f"\nblind watcher, open writer: appends found by the poller after {', '.join(f'{s:.2f}' for s in took)} s")


def test_a_dead_watcher_is_restarted_and_delivers_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    root, db, _ = _one_log(tmp_path, 10)

    async def scenario() -> float:
        async with _serving(_config(root, db, rescan=3600)) as d:  # no rescan: only the watcher can deliver
            await _until(lambda: _events(d) == 10, "the first 10")
            first = d.observer
            first.unschedule_all()
            assert not first.emitters, "the watcher still watches: the test would prove nothing"
            _brief(root, 1)
            # Nothing else may find it (no rescan, and the poller knows only logs). Waiting for an absence: under load
            # this can only miss a bug, never fail a correct daemon.
            await asyncio.sleep(1.0)
            assert _events(d) == 10, "a blind watcher with no rescan must miss this (else the test proves nothing)"
            first.stop()
            await asyncio.to_thread(first.join, 5)
            # The watcher job (every 2 s) notices, starts a new observer and rescans: the missed brief arrives.
            await _until(lambda: d.observer is not first and d.observer.is_alive(), "a new observer")
            await _until(lambda: _events(d) == 11, "the rescan after the restart")
            assert "file watcher thread died" in caplog.text
            _brief(root, 2)
            return await _until(lambda: _events(d) == 12, "the new observer's own event")

    took = asyncio.run(scenario())
    print(f"\nrestarted watcher delivered a new brief in {took:.2f} s")


def _hold_write_lock(db: Path, held: threading.Event, release: threading.Event) -> None:
    """Another writer: take the write lock, say so, and keep it until told to let go."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=DEADLINE)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        held.set()
        release.wait(DEADLINE)
        conn.execute("COMMIT")
    finally:
        conn.close()


async def _lock_out(d: Daemon, then: Callable[[], None]) -> tuple[asyncio.Task[None], threading.Event]:
    """Another writer takes the store's write lock, then ``then()`` runs; returns the holder and its release.

    Both happen while the daemon's own store lock is held: no pass is inside a write when the other writer takes its
    lock (a trailing pass caught there would wait out busy_timeout and fail, and a file event during it would wait
    for the next one), and a pass that starts afterwards starts after ``then()``.
    """
    assert d.lock is not None
    held, release = threading.Event(), threading.Event()
    async with d.lock:
        holder = asyncio.create_task(asyncio.to_thread(_hold_write_lock, d.config.db_path, held, release))
        try:
            assert await asyncio.to_thread(held.wait, DEADLINE)
            then()
        except BaseException:
            release.set()
            raise
    return holder, release


def _passes_told(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """An event set by each pass over named paths as it starts (in the ingest thread)."""
    passes = threading.Event()
    real = app_module.Ingester.ingest_paths

    def told(self: app_module.Ingester, paths: list[str], *, observed: bool = True) -> object:
        passes.set()
        return real(self, paths, observed=observed)

    monkeypatch.setattr(app_module.Ingester, "ingest_paths", told)
    return passes


def test_a_long_reader_and_a_locked_writer_do_not_lose_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO)
    root, db, log = _one_log(tmp_path, 10)
    wal = Path(f"{db}-wal")
    passes = _passes_told(monkeypatch)

    async def scenario() -> dict[str, float]:
        async with _serving(_config(root, db, rescan=3600)) as d:
            assert d.port is not None
            await _until(lambda: _events(d) == 10, "the first 10")
            # 1. A reader holds one snapshot open (BEGIN; SELECT) while 20,000 lines are ingested: writes go on, and
            # the WAL grows with all of them (it cannot restart while a reader may need its frames).
            reader = sqlite3.connect(db, isolation_level=None)
            reader.execute("BEGIN")
            assert reader.execute("SELECT count(*) FROM events").fetchone()[0] == 10
            for k in range(4):
                _append(log, _lines("ada", 10 + 5000 * k, 5000, pad=600))
            await _until(lambda: _events(d) == 20_010, "20,000 lines under a long reader")
            assert reader.execute("SELECT count(*) FROM events").fetchone()[0] == 10  # its snapshot holds
            await d._checkpoint()  # the checkpoint job: it cannot truncate frames a reader still needs
            wal_held = wal.stat().st_size
            reader.execute("COMMIT")
            reader.close()
            await d._checkpoint()  # reader gone: the job folds the WAL in and truncates it
            truncated = wal.stat().st_size
            # 2. The same load with no reader: SQLite's auto-checkpoint restarts the WAL, which stays bounded. The
            # daemon's own evaluations read meanwhile (the store's gate keeps them out of its COMMITs); this test waits
            # on the daemon's counter, not by reading the store, so that no reader of ours overlaps a COMMIT.
            ingested = sum(d.ingest_records.values())
            assert d.store is not None and d.store.gate is not None
            ungated = d.store.gate.ungated
            for k in range(4):
                _append(log, _lines("ada", 20_010 + 5000 * k, 5000, pad=600))
            await _until(lambda: sum(d.ingest_records.values()) == ingested + 20_000, "20,000 more")
            reused = wal.stat().st_size
            # A COMMIT that outlasted an evaluation's read (GATE_WAIT_S; a loaded machine's evaluations are slow) went
            # ahead without the gate: its checkpoint may have been cut short, and the WAL grew by one more group.
            ungated = d.store.gate.ungated - ungated
            assert _events(d) == 40_010
            # 3. Another writer holds the write lock while a batch is due: the pass waits for it (busy_timeout, 5 s),
            # the loop answers meanwhile, and the batch is written once the lock is let go.
            def append_after_the_last_pass() -> None:
                passes.clear()
                _append(log, _lines("ada", 40_010, 100))

            holder, release = await _lock_out(d, append_after_the_last_pass)
            try:
                await _until(passes.is_set, "the pass that must wait")
                status, _ = await asyncio.to_thread(_get, d.port, "/healthz")  # not blocked by the waiting pass
                await asyncio.sleep(1.0)  # the stimulus: the lock kept a while, well inside busy_timeout
                assert _events(d) == 40_010 and "store write failed" not in caplog.text
            finally:
                release.set()
            await holder
            waited = await _until(lambda: _events(d) == 40_110, "the batch behind the lock")
            assert status == 200 and "store write failed" not in caplog.text
            # 4. Held past busy_timeout: the batch fails, the path stays pending, the next event retries it. The lock
            # is let go only once the refusal is logged, however long the pass took to get there.
            holder, release = await _lock_out(d, lambda: _append(log, _lines("ada", 40_110, 100)))
            try:
                await _until(lambda: "store write failed" in caplog.text, "the refused batch")
                assert _events(d) == 40_110  # the refused batch left nothing (read while the lock is still held)
            finally:
                release.set()
            await holder
            _append(log, _lines("ada", 40_210, 1))  # agents keep writing: the next flush retries the path
            await _until(lambda: _events(d) == 40_211, "the retried batch")
            assert d.store_full == 0  # locked is not full
            ids = [r[0] for r in _query(db, "SELECT id FROM events")]
            assert sorted(ids) == sorted(f"ada-{i}" for i in range(40_211))
            return {"held": wal_held, "reused": reused, "truncated": truncated, "waited": waited, "ungated": ungated}

    got = asyncio.run(scenario())
    print(f"\nWAL: {got['held'] / 1e6:.1f} MB under a long reader, {got['truncated']:.0f} B after the checkpoint"
          f" job, {got['reused'] / 1e6:.1f} MB for the same load with no reader; the batch behind another writer's"
          f" lock was in {got['waited']:.2f} s after the lock was let go; {got['ungated']:.0f} COMMITs without the"
          f" gate")
    # One 5,000-line group is a quarter of held: the WAL holds one, and one more for each COMMIT without the gate.
    assert got["truncated"] == 0 and got["reused"] < (0.4 + 0.25 * got["ungated"]) * got["held"]


def test_a_file_event_during_a_refused_pass_is_retried_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass the store refuses (another writer holds its lock past busy_timeout) is retried at the next file event.
    An event that came while the pass waited is such an event: its lines are in once the lock goes, with no other
    event and no rescan (an hour here), not left waiting for whatever comes next."""
    caplog.set_level(logging.INFO)
    root, db, log = _one_log(tmp_path, 10)
    passes = _passes_told(monkeypatch)
    rel = "heartbeats/ada.jsonl"

    def appended() -> None:
        passes.clear()
        _append(log, _lines("ada", 10, 5))

    async def scenario() -> float:
        async with _serving(_config(root, db, rescan=3600)) as d:
            await _until(lambda: _events(d) == 10, "the first 10")
            holder, release = await _lock_out(d, appended)
            try:
                await _until(passes.is_set, "the pass that will be refused")
                _append(log, _lines("ada", 15, 5))
                await _until(lambda: rel in d.pending or "store write failed" in caplog.text, "the second event")
                assert "store write failed" not in caplog.text, "the event came after the pass: this proves nothing"
                await _until(lambda: "store write failed" in caplog.text, "the refused pass")
                assert _events(d) == 10
            finally:
                release.set()
            await holder
            return await _until(lambda: _events(d) == 20, "both appends, with no event after the refusal")

    took = asyncio.run(scenario())
    print(f"\nthe lines behind a refused pass were in {took:.2f} s after the lock was let go")


def test_slow_passes_do_not_queue_and_evaluations_keep_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass slower than the debounce: file events during it wait for one next pass (no queue of passes on the
    store lock, which kept every evaluation waiting behind all of them), and /metrics catches up once writes stop.
    """
    root, db, log = _one_log(tmp_path, 10)
    real = app_module.Ingester.ingest_paths

    def slow(self: app_module.Ingester, paths: list[str], *, observed: bool = True) -> object:
        time.sleep(0.3)  # a pass that takes six debounces: the real daemon's pass under a busy fleet
        return real(self, paths, observed=observed)

    monkeypatch.setattr(app_module.Ingester, "ingest_paths", slow)

    async def scenario() -> None:
        async with _serving(_config(root, db, rescan=3600)) as d:
            in_flight, most = 0, 0
            flush = d._flush

            async def counted() -> None:
                nonlocal in_flight, most
                in_flight += 1
                most = max(most, in_flight)
                try:
                    await flush()
                finally:
                    in_flight -= 1

            d._flush = counted  # type: ignore[method-assign]
            for i in range(40):  # 2 s of appends, one every 50 ms
                _append(log, _lines("ada", 10 + i, 1))
                await asyncio.sleep(0.05)
            def counted_all() -> bool:
                return d.snapshot is not None and d.snapshot.counters.ingest_records.get("heartbeats", 0) >= 50

            await _until(counted_all, "the evaluation to count every line")
            assert most == 1, f"{most} passes were in flight at once"

    asyncio.run(scenario())


def _recent(agent: str, start: int, n: int) -> str:
    """``n`` decisions of ``agent`` dated a minute ago (inside every window, unlike _lines)."""
    ts = format_ts(datetime.now(UTC) - timedelta(minutes=1))
    return "".join(json.dumps({"id": f"{agent}-r{i}", "ts": ts, "agent": agent, "kind": "dm", "text": f"line {i}"})
                   + "\n" for i in range(start, start + n))


def _decisions(d: Daemon, agent: str) -> int:
    snap = d.snapshot
    found = None if snap is None else snap.windows["24h"].agents.get(agent)
    return 0 if found is None else found.decisions


def test_an_evaluation_reads_committed_rows_while_a_pass_holds_the_lock(tmp_path: Path) -> None:
    """A pass holds the store lock for its whole run, committing a group every BATCH_LINES lines: the evaluation
    reads what is committed on a connection of its own, so /metrics never waits for the rest of the pass.
    """
    root, db = tmp_path / "state", tmp_path / "honestyd.db"
    log = root / "heartbeats" / "ada.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(_recent("ada", 0, 5))

    async def scenario() -> None:
        async with _serving(_config(root, db, rescan=3600)) as d:
            await _until(lambda: _decisions(d, "ada") == 5, "the first evaluation")
            assert d.lock is not None and d.ingester is not None
            ingester = d.ingester
            async with d.lock:  # as a pass does, between two of its groups
                _append(log, _recent("ada", 5, 5))
                await asyncio.to_thread(ingester.ingest_paths, ["heartbeats/ada.jsonl"])
                d._request_rescore()
                await _until(lambda: _decisions(d, "ada") == 10, "an evaluation while the lock is held")

    asyncio.run(scenario())


def test_an_append_the_poller_finds_is_ingested_without_a_second_debounce(tmp_path: Path) -> None:
    """The poller looks once a debounce, so what it finds has waited one already: the pass starts at once, and a
    pass a watcher event put a debounce ahead is brought forward (the soak's latency paid both waits).
    """
    root, db, log = _one_log(tmp_path, 3)
    config = _config(root, db, rescan=3600)
    config = replace(config, daemon=replace(config.daemon, debounce=30.0))  # neither wait can pass in this test

    async def scenario() -> None:
        async with _serving(config) as d:
            assert _events(d) == 3
            _append(log, _lines("ada", 3, 2))  # its close-after-write event schedules a pass 30 s ahead
            await _until(lambda: "heartbeats/ada.jsonl" in d.pending, "the watcher's event")
            d._on_changed_logs()  # the poller's look (its own loop sleeps the 30 s debounce too)
            # The deadline must be under the debounce: arriving later would be the pass the watcher scheduled.
            await _until(lambda: _events(d) == 5, "the appended lines, well before the debounce", 20)

    asyncio.run(scenario())
