"""daemon/http/labelling.py: POST /labels from the agent page's form, on the real app and a real aiohttp test server
(tests/pagebackend.py: a real state scored by the pure evaluation, the labels posted kept and scored with it)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from daemon.http.app import make_app
from daemon.http.labelling import LABEL_WAIT, label_fields
from daemon.http.templating import anchor
from tests.pagebackend import REVIEWERS, PageBackend, login
from tests.system.test_browser import SCORED, write_state

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
PAGE = f"/agents/{SCORED}?window=24h"
Client = TestClient[Any, Any]


@pytest.fixture
def backend(tmp_path: Path) -> PageBackend:
    return PageBackend(write_state(tmp_path / "state", NOW), NOW, dict(REVIEWERS))


def run(backend: PageBackend, test: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        async with TestClient(TestServer(make_app(backend))) as client:  # type: ignore[arg-type]
            await test(client)

    asyncio.run(main())


async def signed_in(client: Client, reviewer: str = "alice") -> str:
    """Sign in; the form token of the agent page."""
    assert (await login(client, reviewer, REVIEWERS[reviewer])).status == 303
    page = await (await client.get(PAGE)).text()
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def form(token: str, decision: str = f"{SCORED}-3", value: str = "down", **extra: str) -> dict[str, str]:
    return {"csrf_token": token, "decision": decision, "value": value, "next": f"{PAGE}#{anchor(decision)}", **extra}


def test_a_label_is_appended_as_the_sessions_reviewer_and_shown_on_its_row(backend: PageBackend) -> None:
    async def test(client: Client) -> None:
        token = await signed_in(client)
        note = '<img src=x onerror=alert(1)> {{ 7*7 }} "it" & \'so\''
        resp = await client.post("/labels", data=form(token, note=f"  {note}  ", reviewer="maya"),
                                 allow_redirects=False)
        assert resp.status == 303 and resp.headers["Location"] == f"{PAGE}#{anchor(f'{SCORED}-3')}"
        (line,) = backend.appended
        assert line["reviewer"] == "alice"  # the session's, never the form's
        assert {k: line[k] for k in ("decision", "value", "note")} == {
            "decision": f"{SCORED}-3", "value": "down", "note": note}
        assert line["ts"] == "2026-06-01T12:00:00Z"
        page = await (await client.get(PAGE)).text()
        assert "👎 on ada-3 recorded." in page
        assert "&lt;img src=x onerror=alert(1)&gt; {{ 7*7 }} &#34;it&#34; &amp; &#39;so&#39;" in page
        assert "<img" not in page  # the note is text: {{ 7*7 }} stays as typed, markup stays escaped
        again = await (await client.get(PAGE)).text()
        assert "recorded." not in again  # the notice is shown once

    run(backend, test)


def test_no_session_goes_to_sign_in_and_back(backend: PageBackend) -> None:
    async def test(client: Client) -> None:
        resp = await client.post("/labels", data=form("whatever"), allow_redirects=False)
        assert resp.status == 303 and resp.headers["Location"].startswith("/login?next=%2Fagents%2Fada")
        assert backend.appended == []

    run(backend, test)


def test_a_missing_or_wrong_form_token_or_another_origin_is_403_and_writes_nothing(backend: PageBackend) -> None:
    async def test(client: Client) -> None:
        token = await signed_in(client)
        for data, headers in ((form(""), {}), (form(token[:-2] + "xx"), {}),
                              ({k: v for k, v in form(token).items() if k != "csrf_token"}, {}),
                              (form(token), {"Origin": "http://127.0.0.1:1"}),
                              (form(token), {"Sec-Fetch-Site": "cross-site"})):
            resp = await client.post("/labels", data=data, headers=headers, allow_redirects=False)
            assert resp.status == 403, (data, headers)
            assert "nothing was labelled" in await resp.text()
        assert backend.appended == []
        same = {"Origin": str(client.make_url("")).rstrip("/")}
        assert (await client.post("/labels", data=form(token), headers=same, allow_redirects=False)).status == 303

    run(backend, test)


def test_an_unknown_decision_is_404_with_a_message(backend: PageBackend) -> None:
    async def test(client: Client) -> None:
        token = await signed_in(client)
        resp = await client.post("/labels", data=form(token, decision="ada-404"), allow_redirects=False)
        assert resp.status == 404
        text = await resp.text()
        assert "honestyd has stored no decision with the id &#39;ada-404&#39;: nothing was labelled." in text
        assert f'href="{PAGE}#{anchor("ada-404")}"' in text.replace("&amp;", "&")  # a way back to the page
        assert backend.appended == []

    run(backend, test)


def test_a_label_that_cannot_be_written_is_a_500_page(backend: PageBackend) -> None:
    async def test(client: Client) -> None:
        token = await signed_in(client)
        backend.written_fails = OSError(40, "is a symbolic link, not a regular file", "labels/api.jsonl")
        resp = await client.post("/labels", data=form(token), allow_redirects=False)
        assert resp.status == 500 and "labels/api.jsonl: is a symbolic link" in await resp.text()

    run(backend, test)


def test_the_answer_waits_for_the_label_to_show_and_says_so_when_it_did_not(backend: PageBackend) -> None:
    async def test(client: Client) -> None:
        token = await signed_in(client)
        backend.shown_after = 3  # the daemon reads its line back on the fourth look
        await client.post("/labels", data=form(token), allow_redirects=False)
        assert backend.looks == 4
        assert "recorded." in await (await client.get(PAGE)).text()
        backend.looks, backend.shown_after = 0, 10**9  # never within LABEL_WAIT
        await client.post("/labels", data=form(token, value="up"), allow_redirects=False)
        assert backend.looks >= 2
        assert "it shows here once the daemon has read it" in await (await client.get(PAGE)).text()

    run(backend, test)
    assert LABEL_WAIT <= 2.0  # the bound on how long a label takes to show


@pytest.mark.parametrize(("fields", "problem"), [
    ({"value": "down"}, "names no decision"), ({"decision": "d" * 1001, "value": "up"}, "names no decision"),
    ({"decision": "d", "value": "sideways"}, "value must be up"), ({"decision": "d"}, "value must be up"),
    ({"decision": "d", "value": "up", "note": "n" * 1001}, "longer than 1000"),
    ({"decision": "d\ud800", "value": "up"}, "not text"),
])
def test_label_fields_refuse_what_cannot_be_a_label(fields: dict[str, str], problem: str) -> None:
    refused = label_fields(fields)
    assert isinstance(refused, str) and problem in refused


def test_label_fields_take_a_label() -> None:
    assert label_fields({"decision": "d", "value": "up", "note": "  "}) == ("d", "up", None)
    assert label_fields({"decision": "d", "value": "down", "note": " why "}) == ("d", "down", "why")


def test_a_body_that_is_not_a_form_is_415_never_a_500(backend: PageBackend) -> None:
    async def test(client: Client) -> None:
        for path in ("/login", "/logout", "/labels"):
            for content_type in ("multipart/form-data", "application/json", "text/plain"):  # no boundary, no form
                resp = await client.post(path, data=b"csrf_token=&decision=x", allow_redirects=False,
                                         headers={"Content-Type": content_type})
                assert resp.status == 415, (path, content_type, resp.status)

    run(backend, test)


def test_a_form_that_cannot_be_a_label_is_400_signed_in_or_not(backend: PageBackend) -> None:
    async def test(client: Client) -> None:
        for data in ({}, {"decision": "ada-1"}, {"decision": "ada-1", "value": "x"}, {"value": "up"}):
            resp = await client.post("/labels", data=data, allow_redirects=False)
            assert resp.status == 400, data
        assert backend.appended == []

    run(backend, test)
