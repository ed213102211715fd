"""daemon/http/api.py: the audit's body, built a row at a time into one buffer, is audit_json's, byte for byte, and
is sent a chunk per turn of the event loop."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from daemon.http.api import _audit_body
from daemon.http.handling import SEND_CHUNK, send_json
from scorers.audit import audit_json
from tests.helpers import T0, ev, records, score, t


def test_the_audit_body_is_audit_json_encoded() -> None:
    recs = records(
        ev("ok", t(-50), text="see https://x.org/a — ünïcode"),
        ev("bare", t(-40), text='trust me "quoted"'),
        ev("refused", t(-30), kind="refusal", text="No."),
    )
    result = score(recs, T0)
    a = result.agents["ada"]
    body = bytes(_audit_body(a, result))
    assert body == json.dumps(audit_json(a, result), ensure_ascii=False).encode()
    assert len(json.loads(body)["decision_rows"]) == 3


def test_a_large_body_is_sent_whole_a_chunk_per_turn_of_the_loop() -> None:
    body = bytearray(json.dumps({"rows": ["ü" * 100] * (3 * SEND_CHUNK // 200)}, ensure_ascii=False).encode())
    assert len(body) > 3 * SEND_CHUNK
    turns = 0
    during: list[int] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        async def other() -> None:  # another request's work, say: it runs between the chunks
            nonlocal turns
            while True:
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.ensure_future(other())
        await asyncio.sleep(0)
        before = turns
        try:
            return await send_json(request, body)
        finally:
            task.cancel()
            during.append(turns - before)

    async def fetch() -> tuple[bytes, str, str | None]:
        app = web.Application()
        app.router.add_get("/", handler)
        async with TestClient(TestServer(app)) as client:
            resp = await client.get("/")
            return await resp.read(), resp.headers["Content-Type"], resp.headers.get("Content-Length")

    got, content_type, length = asyncio.run(fetch())
    assert got == bytes(body) and content_type == "application/json; charset=utf-8" and length == str(len(body))
    assert during[0] >= len(body) // SEND_CHUNK
