"""The server's limits: audits cannot starve ingest.

* **Audits beyond the cap** (the real ``Daemon.serve()`` in this loop, so the test can hold the request threads):
  with every ``[api] max_concurrent_audits`` slot taken by audits waiting for their thread, one more audit, history
  or page is answered 429 with ``Retry-After`` at once; /healthz, /readyz and /metrics answer, and a line appended
  to a log meanwhile is ingested and evaluated (ingest and the model have threads of their own). Once the threads
  are free the waiting audits are answered 200.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp

from collectors.rfc3339 import format_ts
from daemon.api import SLOTS, _dumps
from daemon.app import Daemon, Executors
from daemon.config import Api, Config, GitHub
from daemon.config import Daemon as DaemonSettings


def _recent(agent: str, start: int, n: int) -> str:
    ts = format_ts(datetime.now(UTC) - timedelta(minutes=1))
    return "".join(json.dumps({"id": f"{agent}-{i}", "ts": ts, "agent": agent, "kind": "dm", "text": f"line {i}"})
                   + "\n" for i in range(start, start + n))


# --- audits beyond the cap


@contextlib.asynccontextmanager
async def _serving(config: Config, executors: Executors) -> AsyncIterator[Daemon]:
    d = Daemon(config, environ={}, executors=executors)
    task = asyncio.create_task(d.serve())
    ready = asyncio.create_task(d.started.wait())
    await asyncio.wait({task, ready}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
    assert d.started.is_set(), "the daemon did not start within 30 s"
    try:
        yield d
    finally:
        ready.cancel()
        d.handle_exit()
        await asyncio.wait_for(task, 30)


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
        assert _dumps(value) == json.dumps(value, ensure_ascii=False)
