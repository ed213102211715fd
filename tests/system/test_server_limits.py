"""The server's limits: audits cannot starve ingest, and idle connections cannot take every descriptor.

* **Audits beyond the cap** (the real ``Daemon.serve()`` in this loop, so the test can hold the request threads):
  with every ``[api] max_concurrent_audits`` slot taken by audits waiting for their thread, one more audit, history
  or page is answered 429 with ``Retry-After`` at once; /healthz, /readyz and /metrics answer, and a line appended
  to a log meanwhile is ingested and evaluated (ingest and the model have threads of their own). Once the threads
  are free the waiting audits are answered 200.
* **1,100 idle connections against 1,024 descriptors** (the real daemon as a subprocess, its RLIMIT_NOFILE set to
  1,024 before it starts): the daemon accepts ``[api] max_connections`` and no more until one closes (the rest
  wait in the listen queue), so it never runs out of descriptors: a heartbeat file created meanwhile reaches the
  store, no traceback is logged, the cap is a line or two; once the connections go it answers /healthz and
  /metrics and the API show the new agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import resource
import select
import socket
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp

from collectors.rfc3339 import format_ts
from daemon.app import Daemon, Executors
from daemon.config import Api, Config, DaemonSettings, GitHub
from daemon.http.handling import SLOTS, dumps
from daemon.http.server import RESERVED_FDS, connection_budget
from tests.daemon_harness import daemon, in_process, stop, wait_for

#: The descriptor limit of the issue's host (systemd's default soft limit) and the connections held against it.
NOFILE = 1024
CONNECTIONS = 1100


def _recent(agent: str, start: int, n: int) -> str:
    ts = format_ts(datetime.now(UTC) - timedelta(minutes=1))
    return "".join(json.dumps({"id": f"{agent}-{i}", "ts": ts, "agent": agent, "kind": "dm", "text": f"line {i}"})
                   + "\n" for i in range(start, start + n))


def _stored(db: Path, agent: str) -> int:
    """Events of ``agent`` in the store, read on a connection of our own (as any outside reader)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM events WHERE agent = ?", (agent,)).fetchone()[0])
    except sqlite3.OperationalError:
        return -1


# --- audits beyond the cap


def _serving(config: Config, executors: Executors) -> contextlib.AbstractAsyncContextManager[Daemon]:
    return in_process(Daemon(config, environ={}, executors=executors))


async def _until(predicate: Callable[[], bool | Awaitable[bool]], what: str, timeout: float = 15.0) -> None:
    """Poll ``predicate`` (plain or async) until it is true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if await value if inspect.isawaitable(value) else value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


def _heartbeats_ingested(metrics: str) -> float:
    for line in metrics.splitlines():
        if line.startswith('honesty_ingest_records_total{source="heartbeats"} '):
            return float(line.split()[1])
    return 0.0


def test_audits_beyond_the_cap_get_429_while_health_metrics_and_ingest_go_on(tmp_path: Path) -> None:
    root, db = tmp_path / "state", tmp_path / "honestyd.db"
    log = root / "heartbeats" / "ada.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text(_recent("ada", 0, 5))
    settings = DaemonSettings(listen="127.0.0.1:0", debounce=0.05, rescan_interval=timedelta(hours=1),
                              rescore_interval=timedelta(hours=1), drain_timeout=5.0, model_cache=False)
    config = Config(state_root=root, db_path=db, github=GitHub(repo="acme/app"), daemon=settings,
                    api=Api(max_concurrent_audits=2))
    # The request thread, held: audits that reach it wait there, as behind long audits, holding their slots.
    requests = ThreadPoolExecutor(1, thread_name_prefix="test-requests")
    held = threading.Event()
    requests.submit(held.wait, 60)

    async def scenario() -> None:
        async with _serving(config, Executors(requests=requests)) as d, aiohttp.ClientSession() as http:
            base = f"http://127.0.0.1:{d.port}"
            assert d.runner is not None
            slots = d.runner.app[SLOTS]
            waiting = [asyncio.create_task(http.get(f"{base}/v1/agents/ada/audit?window=24h")) for _ in range(2)]
            await _until(lambda: slots.busy == 2, "two audits holding both slots")
            for path in ("/v1/agents/ada/audit?window=24h", "/v1/agents/ada/history", "/agents/ada", "/"):
                async with http.get(base + path) as resp:
                    assert resp.status == 429, path
                    assert resp.headers["Retry-After"] == "1"
                    assert "max_concurrent_audits" in (await resp.json())["error"]
            for path in ("/healthz", "/readyz", "/metrics"):  # never behind the audits
                async with http.get(base + path) as resp:
                    assert resp.status == 200, path
            async with http.get(f"{base}/metrics") as resp:
                before = _heartbeats_ingested(await resp.text())
            with log.open("a") as f:
                f.write(_recent("ada", 5, 1))

            async def shown() -> bool:
                async with http.get(f"{base}/metrics") as resp:
                    return _heartbeats_ingested(await resp.text()) == before + 1

            await _until(shown, "the appended line ingested and evaluated while the audits wait")
            assert slots.busy == 2 and not any(t.done() for t in waiting)
            held.set()
            for resp in await asyncio.gather(*waiting):
                assert resp.status == 200
                body = await resp.read()
                # Encoded off the loop, row by row: the very bytes json.dumps gives for the whole document.
                assert body == json.dumps(json.loads(body), ensure_ascii=False).encode()
                assert json.loads(body)["agent"] == "ada" and len(json.loads(body)["decision_rows"]) == 6
            assert slots.busy == 0

    try:
        asyncio.run(scenario())
    finally:
        held.set()


def test_bodies_built_off_the_loop_are_what_json_dumps_gives() -> None:
    rows = [{"id": f"d{i}", "why": "é\u2028<", "n": [i, None, 1.5], "o": {"k": True}} for i in range(200)]
    for value in ({"agent": "ada", "points": rows, "weights": {"a": 0.5}}, rows, {"few": rows[:3]}, {1: rows}):
        assert dumps(value) == json.dumps(value, ensure_ascii=False)


# --- 1,100 idle connections against 1,024 descriptors


def _limit_descriptors() -> None:
    """In the daemon's process before it starts: the soft and hard descriptor limit of a default host."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


def _open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _dropped_by_peer(sockets: list[socket.socket]) -> bool:
    """Whether the other end closed any of ``sockets`` (poll, not select: they are numbered beyond 1,024)."""
    poller = select.poll()
    by_fd = {s.fileno(): s for s in sockets}
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    for fd, _ in poller.poll(0):
        try:
            if by_fd[fd].recv(1) == b"":
                return True
        except BlockingIOError:
            continue
        except OSError:  # reset, or a connection that never completed
            return True
    return False


def _flood(port: int, pid: int, held: list[socket.socket]) -> None:
    """Open CONNECTIONS idle connections to ``port`` (into ``held``), in batches the daemon ``pid`` takes in turn.

    Connects are non-blocking: beyond what the daemon accepts and its listen queue holds, a connect waits. Batches
    are smaller than the listen queue, and the next waits until the daemon has taken the last (up to the cap): with
    SYN cookies, a connect the kernel completes while the queue is full never reaches the daemon at all.
    """
    base = _open_descriptors(pid)
    cap = Api().max_connections
    for start in range(0, CONNECTIONS, 64):
        for _ in range(min(64, CONNECTIONS - start)):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            held.append(s)
        # Up to the cap, the daemon takes each batch (a few descriptors may come and go meanwhile: not exact).
        wanted = min(len(held), cap) - 16
        wait_for(lambda wanted=wanted: _open_descriptors(pid) - base >= wanted, 20, f"the daemon taking {wanted}")


def _raise_own_limit(most: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < most:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(most, hard), hard))


def test_the_connection_budget_leaves_room_for_the_rest_of_the_daemon() -> None:
    assert connection_budget(NOFILE) == NOFILE - NOFILE // 4 == 768
    assert connection_budget(256) == 256 - RESERVED_FDS
    assert connection_budget(65536) == 65536 - 16384
    assert connection_budget(100) == 1  # still serves, one connection at a time


def test_1100_idle_connections_against_1024_descriptors_leave_the_daemon_working(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    (root / "heartbeats" / "ada.jsonl").write_text(_recent("ada", 0, 5))
    _raise_own_limit(CONNECTIONS + 256)
    with daemon(tmp_path, root, preexec_fn=_limit_descriptors) as d:
        before = d.metric("honesty_ingest_records_total", source="heartbeats")
        held: list[socket.socket] = []
        try:
            _flood(d.port, d.proc.pid, held)
            # A new agent's log appears while the connections are held: the daemon still has descriptors for it.
            (root / "heartbeats" / "newbie.jsonl").write_text(_recent("newbie", 0, 3))
            wait_for(lambda: _stored(d.db, "newbie") == 3, 20, "the new log in the store while connections are held")
            assert d.proc.poll() is None, d.logs()
            # At most max_connections held: the rest of the descriptors stay free for the store, logs and watcher.
            assert _open_descriptors(d.proc.pid) <= Api().max_connections + RESERVED_FDS
            # Held until the daemon drops idle ones itself (keepalive_timeout): the whole time it would hold them.
            wait_for(lambda: _dropped_by_peer(held), 30, "the daemon closing an idle connection")
            assert d.proc.poll() is None, d.logs()
        finally:
            for s in held:
                s.close()
        wait_for(lambda: d.get("/healthz")[0] == 200, 20, "/healthz once the connections are gone")
        wait_for(lambda: d.metric("honesty_ingest_records_total", source="heartbeats") == (before or 0) + 3, 10,
                 "the new agent's records in /metrics")
        status, body = d.get("/v1/agents")
        assert status == 200 and "newbie" in json.loads(body)["agents"]
        assert stop(d)[0] == 0
    logs = d.logs()
    assert "Traceback" not in logs and "Too many open files" not in logs, logs[-3000:]
    # Not counting the test's own folder name, which says "connections" in every line naming a path.
    lines = logs.replace(str(tmp_path), "TMP").splitlines()
    about_connections = [line for line in lines if "accept" in line or "connections" in line]
    assert 1 <= len(about_connections) <= 6, "\n".join(about_connections[:20])
