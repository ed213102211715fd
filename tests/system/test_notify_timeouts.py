"""A long start and a long stop extend systemd's timeouts (``EXTEND_TIMEOUT_USEC``), from the event loop that awaits
their phases, against a real AF_UNIX datagram socket standing in for systemd's notify socket.

* **The real daemon as a subprocess**: the start extends before ``READY=1`` and the stop after ``STOPPING=1``, by
  :data:`daemon.notify.EXTEND_BY`; nothing extends while it runs (the watchdog's time).
* **A start and a stop held in a phase** (the real ``Daemon.serve()`` in this loop, its store writer's thread kept
  busy by the test, as behind a long catch-up scan or a drain): the pings keep coming, period after period, while the
  phase runs in its thread, and the start or stop goes on once the thread is free.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.rfc3339 import format_ts
from daemon.app import Daemon, Executors
from daemon.config import Config, DaemonSettings, GitHub
from daemon.notify import EXTEND_BY, Notifier
from tests.daemon_harness import daemon, write_config

EXTEND = f"EXTEND_TIMEOUT_USEC={int(EXTEND_BY * 1_000_000)}"


@pytest.fixture
def systemd() -> Iterator[tuple[str, socket.socket]]:
    """(NOTIFY_SOCKET value, the bound socket systemd would read), in a short folder: sun_path holds 108 bytes."""
    with tempfile.TemporaryDirectory(prefix="hn-notify5-", dir="/tmp") as short:
        path = str(Path(short) / "notify.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        sock.settimeout(20)
        try:
            yield path, sock
        finally:
            sock.close()


def _state(tmp: Path) -> Path:
    root = tmp / "state"
    (root / "heartbeats").mkdir(parents=True)
    _append(root / "heartbeats" / "ada.jsonl", range(6))
    return root


def _append(log: Path, ids: range) -> None:
    ts = format_ts(datetime.now(UTC) - timedelta(minutes=30))
    with log.open("a") as f:
        f.writelines(json.dumps({"id": f"ada-{i}", "ts": ts, "agent": "ada", "kind": "dm", "text": f"update {i}"})
                     + "\n" for i in ids)


def _until(sock: socket.socket, key: str, into: list[str]) -> None:
    """Receive datagrams into ``into`` until one carries the line ``key``."""
    while True:
        into.append(sock.recv(4096).decode())
        if key in into[-1].split("\n"):
            return


def _drain(sock: socket.socket, into: list[str]) -> None:
    sock.settimeout(0)
    try:
        while True:
            into.append(sock.recv(4096).decode())
    except BlockingIOError:
        pass


def _extensions(messages: list[str]) -> list[str]:
    return [line for m in messages for line in m.split("\n") if line.startswith("EXTEND_TIMEOUT_USEC=")]


def test_the_daemon_extends_its_start_before_ready_and_its_stop_after_stopping(
    tmp_path: Path, systemd: tuple[str, socket.socket]
) -> None:
    path, sock = systemd
    root = _state(tmp_path)
    start: list[str] = []
    running: list[str] = []
    stopping: list[str] = []
    with daemon(tmp_path, root, config=write_config(tmp_path / "config.toml"), env={"NOTIFY_SOCKET": path}) as d:
        _until(sock, "READY=1", start)
        d.proc.send_signal(signal.SIGTERM)
        _until(sock, "STOPPING=1", running)
        assert d.proc.wait(20) == 0
        _drain(sock, stopping)
    # The start extended itself, by the constant's value, before READY=1 (the last message of the start).
    assert EXTEND in start[:-1] and set(_extensions(start)) == {EXTEND}
    assert _extensions(running) == []
    assert _extensions(stopping) and set(_extensions(stopping)) == {EXTEND}
    assert "READY=1" not in "\n".join(stopping).split("\n")


def test_a_start_and_a_stop_held_in_a_phase_keep_extending(
    tmp_path: Path, systemd: tuple[str, socket.socket]
) -> None:
    path, sock = systemd
    root = _state(tmp_path)
    settings = DaemonSettings(listen="127.0.0.1:0", debounce=0.05, rescan_interval=timedelta(hours=1),
                              rescore_interval=timedelta(hours=1), drain_timeout=60.0, model_cache=False)
    config = Config(state_root=root, db_path=tmp_path / "honestyd.db", github=GitHub(repo="acme/app"),
                    daemon=settings)
    # The store writer's one thread, kept busy: the start's catch-up scan, then the stop's drain, wait behind it.
    ingest = ThreadPoolExecutor(1, thread_name_prefix="test-ingest")
    held_start, held_stop = threading.Event(), threading.Event()
    ingest.submit(held_start.wait, 60)
    notifier = Notifier({"NOTIFY_SOCKET": path}, extend_every=0.01, extend_by=EXTEND_BY)
    d = Daemon(config, environ={}, notifier=notifier, executors=Executors(ingest=ingest))

    async def pings(count: int, into: list[str]) -> None:
        """Receive until ``count`` extensions have come (on a thread: the loop stays the daemon's)."""
        while len(_extensions(into)) < count:
            into.append(await asyncio.to_thread(lambda: sock.recv(4096).decode()))

    async def scenario() -> None:
        serving = asyncio.create_task(d.serve())
        start: list[str] = []
        await pings(5, start)  # five periods of the held scan
        assert not d.started.is_set() and not serving.done()
        assert all("READY=1" not in m.split("\n") for m in start)
        held_start.set()
        await asyncio.to_thread(_until, sock, "READY=1", start)
        assert d.started.is_set()
        # The stop: an ingest pass of an appended line holds the store's lock, waiting for the busy thread; the
        # stop's drain waits for the lock.
        ingest.submit(held_stop.wait, 60)
        _append(root / "heartbeats" / "ada.jsonl", range(6, 7))
        assert d.lock is not None
        lock = d.lock
        deadline = asyncio.get_running_loop().time() + 15
        while not lock.locked():
            assert asyncio.get_running_loop().time() < deadline, "no ingest pass waiting for the held thread"
            await asyncio.sleep(0.02)
        d.handle_exit()
        running: list[str] = []
        await asyncio.to_thread(_until, sock, "STOPPING=1", running)
        assert _extensions(running) == []  # READY=1 ended the start's extension, though periods went by since
        stop: list[str] = []
        await pings(5, stop)
        assert not serving.done()
        held_stop.set()
        await asyncio.wait_for(serving, 30)
        assert d.exit_status == 0

    try:
        asyncio.run(scenario())
    finally:
        held_start.set()
        held_stop.set()
        ingest.shutdown(wait=False)
