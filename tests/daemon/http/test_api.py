"""daemon/http/api.py: the audit's body, built a row at a time into one buffer, is audit_json's, byte for byte, and
is sent a chunk per turn of the event loop."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.http.api import _audit_body
from daemon.http.handling import SEND_CHUNK, dumps, send_json
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


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()


def _containers(inner: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Lists long enough to be encoded piecewise, and dicts holding them."""
    return st.lists(inner, max_size=80) | st.dictionaries(st.text(), inner, max_size=4)


_JSON = st.recursive(_SCALARS, _containers, max_leaves=200)


@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(_JSON | st.dictionaries(st.text(), st.lists(_SCALARS, min_size=60, max_size=90), max_size=3))
def test_the_piecewise_dumps_writes_what_json_dumps_does(value: object) -> None:
    """Any JSON value, with long lists at the top and inside dicts (the piecewise paths): the same text."""
    assert dumps(value) == json.dumps(value, ensure_ascii=False)


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
