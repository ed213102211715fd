"""A crash costs a cache load, not a rebuild: the running daemon writes its model cache periodically (a forked writer,
daemon/cachewriter.py), so a start after SIGKILL reads the latest cache, catches up from the store and the state root,
and serves exactly the scores a start from the store alone gives."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from collectors.rfc3339 import format_ts
from daemon import modelcache
from daemon.simulate import simulate
from tests.daemon_harness import Running, daemon, stop, wait_for, write_config

START = datetime(2026, 6, 1, tzinfo=UTC)


def _scores(d: Running) -> dict[str, object]:
    """Every score series of /metrics (the counters of a process's own life left out) and each agent's API answer."""
    status, text = d.get("/metrics")
    assert status == 200
    series = sorted(line for line in text.splitlines()
                    if re.match(r"honesty_(score|component|window_decisions|coverage|false_gaps)", line))
    status, listing = d.get("/v1/agents")
    assert status == 200
    agents = sorted(json.loads(listing)["agents"])
    answers = {a: json.loads(d.get(f"/v1/agents/{a}?window=7d")[1]) for a in agents}
    return {"series": series, "agents": answers}


def _line(i: int, ts: datetime) -> str:
    return json.dumps({"id": f"late-{i}", "ts": format_ts(ts), "agent": "ada", "kind": "dm",
                       "text": f"late decision {i}"}) + "\n"


def _writing_every_second(tmp_path: Path) -> tuple[Path, datetime, Path, Path, Path]:
    """A simulated state (three agents, two days), a clock file at its end and a config that rescores and writes
    the model cache every second: (state root, its end, clock file, config, db)."""
    root = tmp_path / "state"
    simulate(5, root, agents=3, days=2, start=START, events_per_day=60)
    end = START + timedelta(days=2)
    clock = tmp_path / "now.txt"
    clock.write_text(format_ts(end))
    config = write_config(tmp_path / "config.toml", rescore="1s")
    config.write_text(config.read_text().replace("[daemon]\n", '[daemon]\ncache_every = "1s"\n', 1))
    return root, end, clock, config, tmp_path / "honestyd.db"


def _from_the_cache_as_from_the_store(tmp_path: Path, root: Path, config: Path, clock: Path, db: Path,
                                      last: str) -> None:
    """A start from the cache catches up to the decision ``last`` and scores what a start from the store alone
    (the cache deleted) scores."""
    with daemon(tmp_path, root, config=config, clock_file=clock, db=db) as warm:
        assert re.search(r"model cache \S+ loaded in", warm.logs()), warm.logs()
        assert "loading from the store" not in warm.logs()
        wait_for(lambda: last in warm.get("/v1/agents/ada/audit?window=24h")[1], 20,
                 "the lines appended after the last write, caught up")
        from_cache = _scores(warm)
        assert stop(warm)[0] == 0
    modelcache.path_for(db).unlink()
    with daemon(tmp_path, root, config=config, clock_file=clock, db=db) as cold:
        assert not re.search(r"model cache \S+ loaded in", cold.logs())
        assert _scores(cold) == from_cache
        assert stop(cold)[0] == 0


def test_a_daemon_sigkilled_after_a_periodic_write_restarts_from_the_cache(tmp_path: Path) -> None:
    root, end, clock, config, db = _writing_every_second(tmp_path)
    cache = modelcache.path_for(db)
    log = re.compile(r"model cache \S+ written: .* by a forked writer")
    with daemon(tmp_path, root, config=config, clock_file=clock, db=db) as d:
        wait_for(lambda: log.search(d.logs()), 20, "the cache written after the start's catch-up")
        # More arrives after that write: the restart must catch it up from the store and the files.
        hb = root / "heartbeats" / "ada.jsonl"
        with hb.open("a") as f:
            f.writelines(_line(i, end - timedelta(minutes=30 - i)) for i in range(5))
        written = len(log.findall(d.logs()))
        wait_for(lambda: "late-4" in d.get("/v1/agents/ada/audit?window=24h")[1], 20, "the appends scored")
        wait_for(lambda: len(log.findall(d.logs())) > written + 1, 20, "a periodic write after the appends")
        with hb.open("a") as f:
            f.write(_line(9, end - timedelta(minutes=1)))
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(10)
    assert cache.exists()
    _from_the_cache_as_from_the_store(tmp_path, root, config, clock, db, "late-9")


def test_a_model_unchanged_since_the_last_write_is_not_written_again(tmp_path: Path) -> None:
    """A write a second: a line applied makes the next one; the stop after it finds the model as that write left it
    and keeps the file (it used to pickle the whole model once more), which the next start loads. The periodic
    write's skip is tests/daemon/test_cachewriter.py's."""
    root, end, clock, config, db = _writing_every_second(tmp_path)
    cache = modelcache.path_for(db)
    forked = re.compile(r"model cache \S+ written: .* by a forked writer")
    with daemon(tmp_path, root, config=config, clock_file=clock, db=db) as d:
        wait_for(lambda: forked.search(d.logs()), 20, "the cache written after the start's catch-up")
        first = cache.stat().st_ino
        with (root / "heartbeats" / "ada.jsonl").open("a") as f:
            f.write(_line(1, end - timedelta(minutes=5)))
        wait_for(lambda: len(forked.findall(d.logs())) == 2, 20, "a write once a line was applied")
        second = cache.stat().st_ino
        assert second != first
        assert stop(d)[0] == 0
        assert "not written again: the model is as the last write left it" in d.logs()
    assert cache.stat().st_ino == second
    with daemon(tmp_path, root, config=config, clock_file=clock, db=db) as warm:
        assert re.search(r"model cache \S+ loaded in", warm.logs()), warm.logs()
        assert "late-1" in warm.get("/v1/agents/ada/audit?window=24h")[1]
        assert stop(warm)[0] == 0


def test_a_stop_keeps_a_cache_a_few_rows_behind_and_the_next_start_catches_them_up(tmp_path: Path) -> None:
    """The cache written after the start's catch-up, then a few lines applied: the stop keeps that file (a start
    catches the lines up as after SIGKILL) instead of pickling the whole model again, and the start from it scores
    what a start from the store alone scores."""
    root, end, clock, config, db = _writing_every_second(tmp_path)
    config.write_text(config.read_text().replace('cache_every = "1s"', 'cache_every = "1h"', 1))
    cache = modelcache.path_for(db)
    with daemon(tmp_path, root, config=config, clock_file=clock, db=db) as d:
        wait_for(lambda: re.search(r"model cache \S+ written: .* by a forked writer", d.logs()), 20,
                 "the cache written after the start's catch-up")
        written = cache.stat().st_ino, cache.stat().st_mtime_ns
        with (root / "heartbeats" / "ada.jsonl").open("a") as f:
            f.writelines(_line(i, end - timedelta(minutes=10 - i)) for i in range(3))
        wait_for(lambda: "late-2" in d.get("/v1/agents/ada/audit?window=24h")[1], 20, "the lines scored")
        assert stop(d)[0] == 0
        kept = re.search(r"model cache \S+ kept: the next start catches up the (\d+) rows", d.logs())
        assert kept is not None and int(kept.group(1)) >= 3, d.logs()
    assert (cache.stat().st_ino, cache.stat().st_mtime_ns) == written
    _from_the_cache_as_from_the_store(tmp_path, root, config, clock, db, "late-2")


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from /proc/*/stat: not every kernel has .../task/*/children)."""
    found = []
    for name in os.listdir("/proc"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            if name.isdigit() and int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(name))
    return found


def _state(pid: int) -> str:
    """The process's state letter (T: stopped; Z: ended, not yet reaped), "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""


def _after_sigstop(pid: int) -> str | None:
    """The state of a process sent SIGSTOP once it took effect (T), or it ended (Z, gone); None while it runs."""
    state = _state(pid) or "gone"
    return None if state in ("R", "S", "D") else state


def _writer_stopped_mid_write(d: Running, end: datetime) -> int:
    """A line appended at a time (each makes the next periodic write), until the daemon's forked writer is caught
    before it ended and SIGSTOPped there (a writer slower than the stop, as a big model's is): its pid."""
    hb = d.root / "heartbeats" / "ada.jsonl"
    deadline = time.monotonic() + 60
    for i in range(100, 10_000):
        assert time.monotonic() < deadline, "no writer caught before it ended"
        with hb.open("a") as f:
            f.write(_line(i, end - timedelta(minutes=20)))
        next_write = time.monotonic() + 3
        while time.monotonic() < next_write:
            for child in _children(d.proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child, signal.SIGSTOP)
                if wait_for(lambda c=child: _after_sigstop(c), 5, "the writer stopped or ended") == "T":
                    return child
    raise AssertionError("unreachable")


def _stopped_while_the_writer_waits(d: Running, end: datetime) -> int:
    """The writer stopped mid-write, a line applied after its fork, then SIGTERM: returns the writer's pid once the
    stop has said it waits for it (or the daemon has exited: it did not wait)."""
    writer = _writer_stopped_mid_write(d, end)
    with (d.root / "heartbeats" / "ada.jsonl").open("a") as f:
        f.write(_line(20_000, end - timedelta(minutes=2)))
    wait_for(lambda: "late-20000" in d.get("/v1/agents/ada/audit?window=24h")[1], 20, "the line after the fork")
    d.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: d.proc.poll() is not None or "waiting at most" in d.logs(), 30, "the stop waiting")
    return writer


_OWN_WRITE = re.compile(r"model cache \S+ written: [\d.]+ MB in [\d.]+ s$", re.MULTILINE)


def test_a_stop_waits_for_the_writer_in_flight_and_keeps_its_cache(tmp_path: Path) -> None:
    """A SIGTERM while the forked writer is still writing: the stop used to kill it and pickle the whole model
    again; now it waits for it (bounded: STOP_WAITS_FOR_WRITER) and keeps the cache it wrote, a row behind, which
    the next start loads and catches up."""
    root, end, clock, config, db = _writing_every_second(tmp_path)
    with daemon(tmp_path, root, config=config, clock_file=clock, db=db) as d:
        wait_for(lambda: "by a forked writer" in d.logs(), 20, "the cache written after the start's catch-up")
        writer = _stopped_while_the_writer_waits(d, end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(writer, signal.SIGCONT)  # the slow write goes on and ends
        assert d.proc.wait(30) == 0
        logs = d.logs()
    kept = re.search(r"kept the cache written by the writer in flight at the stop, (\d+) rows behind", logs)
    assert kept is not None and int(kept.group(1)) >= 1, logs
    assert "the stop writes the cache itself" not in logs
    assert not _OWN_WRITE.search(logs), logs
    _from_the_cache_as_from_the_store(tmp_path, root, config, clock, db, "late-20000")


def test_a_writer_that_fails_while_the_stop_waits_leaves_the_stop_as_it_was(tmp_path: Path) -> None:
    """The writer the stop waits for dies (here: SIGKILLed): the stop does not hang; it logs the writer's end as a
    failure and does what a stop without a writer does (keeps this run's earlier cache, a few rows behind)."""
    root, end, clock, config, db = _writing_every_second(tmp_path)
    with daemon(tmp_path, root, config=config, clock_file=clock, db=db) as d:
        wait_for(lambda: "by a forked writer" in d.logs(), 20, "the cache written after the start's catch-up")
        writer = _stopped_while_the_writer_waits(d, end)
        with contextlib.suppress(ProcessLookupError):
            os.kill(writer, signal.SIGKILL)
        assert d.proc.wait(30) == 0
        logs = d.logs()
    assert re.search(r"model cache \S+ not written: the writer was killed by signal 9", logs), logs
    assert re.search(r"model cache \S+ kept: the next start catches up the \d+ rows", logs), logs
    _from_the_cache_as_from_the_store(tmp_path, root, config, clock, db, "late-20000")
