"""daemon/http/signin.py and the session logic under it (daemon/http/sessions.py): the real app on a real aiohttp test
server, a real state scored by the pure evaluation (tests/pagebackend.py), a clock the test moves for the limiter."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from daemon.http.app import make_app
from daemon.http.sessions import COOKIE, SESSION_SECONDS, check_token, fingerprint, still_valid
from daemon.http.signin import FAILURE_WINDOW, LIMITER, MOST_FAILURES
from tests.pagebackend import REVIEWERS, PageBackend, form_token, login, with_config
from tests.system.test_browser import SCORED, write_state

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


Client = TestClient[Any, Any]


@pytest.fixture
def backend(tmp_path: Path) -> PageBackend:
    return PageBackend(write_state(tmp_path / "state", NOW), NOW, dict(REVIEWERS))


def run(backend: PageBackend, test: Callable[[Client, Clock], Awaitable[None]], key: bytes | None = None) -> None:
    clock = Clock()

    async def main() -> None:
        app = make_app(backend, session_key=key, clock=clock)  # type: ignore[arg-type]
        async with TestClient(TestServer(app)) as client:
            await test(client, clock)

    asyncio.run(main())


def test_a_right_token_signs_in_and_goes_to_next(backend: PageBackend) -> None:
    async def test(client: Client, _: Clock) -> None:
        resp = await login(client, "alice", REVIEWERS["alice"], f"/agents/{SCORED}?window=7d")
        assert resp.status == 303 and resp.headers["Location"] == f"/agents/{SCORED}?window=7d"
        cookie = resp.cookies[COOKIE]
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and not cookie["secure"]
        assert cookie["max-age"] == str(SESSION_SECONDS) and cookie["path"] == "/"
        page = await (await client.get(f"/agents/{SCORED}?window=24h")).text()
        assert "signed in as <strong class=\"reviewer\">alice</strong>" in page and 'action="/labels"' in page

    run(backend, test)


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil.example", "\\\\evil", ""])
def test_next_never_leaves_the_site(backend: PageBackend, target: str) -> None:
    async def test(client: Client, _: Clock) -> None:
        resp = await login(client, "alice", REVIEWERS["alice"], target)
        assert resp.status == 303 and resp.headers["Location"] == "/"

    run(backend, test)


def test_the_cookie_is_secure_when_the_public_url_is_https(backend: PageBackend) -> None:
    async def test(client: Client, _: Clock) -> None:
        resp = await client.get("/login")  # the form's session (its form token) is a cookie already
        assert resp.status == 200 and resp.cookies[COOKIE]["secure"]
        assert resp.cookies[COOKIE]["httponly"] and resp.cookies[COOKIE]["samesite"] == "Strict"

    run(with_config(backend, public_url="https://honesty.example.org"), test)


def test_wrong_credentials_are_401_and_a_missing_form_token_403(backend: PageBackend) -> None:
    async def test(client: Client, _: Clock) -> None:
        for reviewer, token in (("alice", "tok-maya"), ("alice", "tok-alice "), ("mallory", "tok-alice"),
                                ("", ""), ("alice", "")):
            resp = await login(client, reviewer, token)
            assert resp.status == 401, (reviewer, token)
            assert "Wrong reviewer name or token." in await resp.text()
        assert "signed in as" not in await (await client.get("/")).text()
        assert (await login(client, "alice", REVIEWERS["alice"], csrf="")).status == 403
        assert (await login(client, "alice", REVIEWERS["alice"], csrf="forged")).status == 403
        other_site = {"Origin": "http://evil.example"}
        assert (await login(client, "alice", REVIEWERS["alice"], headers=other_site)).status == 403

    run(backend, test)


def test_failed_sign_ins_are_limited_per_client_and_per_reviewer(backend: PageBackend) -> None:
    async def test(client: Client, clock: Clock) -> None:
        for _ in range(MOST_FAILURES):
            assert (await login(client, "alice", "guess")).status == 401
            clock.now += 1
        refused = await login(client, "alice", REVIEWERS["alice"])  # right, but after too many failures
        assert refused.status == 429
        wait = int(refused.headers["Retry-After"])
        assert wait == FAILURE_WINDOW - MOST_FAILURES
        assert f"try again in {wait} s" in await refused.text()
        # Another reviewer from the same client: the client's count applies too.
        assert (await login(client, "maya", REVIEWERS["maya"])).status == 429
        clock.now += wait
        ok = await login(client, "alice", REVIEWERS["alice"])
        assert ok.status == 303

    run(backend, test)


def test_failures_count_against_the_reviewer_too_and_unknown_names_take_no_room(backend: PageBackend) -> None:
    async def test(client: Client, clock: Clock) -> None:
        # Five failures on alice: alice is refused from any address now; others are not, and a name no reviewer
        # has takes no room in the limiter (a flood of made-up names cannot grow it).
        for _ in range(MOST_FAILURES):
            assert (await login(client, "alice", "guess")).status == 401
        limits = client.app[LIMITER]
        assert limits.retry_after("reviewer:alice") is not None
        assert limits.retry_after("reviewer:maya") is None
        assert limits.retry_after("reviewer:mallory") is None  # unknown names are not remembered

    run(backend, test)


def test_a_changed_or_removed_token_ends_the_session(backend: PageBackend) -> None:
    async def test(client: Client, _: Clock) -> None:
        assert (await login(client, "alice", REVIEWERS["alice"])).status == 303
        backend.tokens = {"tok-alice-new": "alice", "tok-maya": "maya"}
        page = await (await client.get("/")).text()
        assert "sign in to label" in page and "signed in as" not in page

    run(backend, test)


def test_sign_out_needs_the_form_token_and_ends_the_session(backend: PageBackend) -> None:
    async def test(client: Client, _: Clock) -> None:
        assert (await login(client, "alice", REVIEWERS["alice"])).status == 303
        token = await form_token(client, "/")
        refused = await client.post("/logout", data={"csrf_token": "nope"}, allow_redirects=False)
        assert refused.status == 403 and "signed in as" in await (await client.get("/")).text()
        out = await client.post("/logout", data={"csrf_token": token}, allow_redirects=False)
        assert out.status == 303 and out.headers["Location"] == "/"
        assert "signed in as" not in await (await client.get("/")).text()

    run(backend, test)


def test_a_cookie_from_another_key_is_no_session(backend: PageBackend) -> None:
    cookies: list[str] = []

    async def sign(client: Client, _: Clock) -> None:
        resp = await login(client, "alice", REVIEWERS["alice"])
        cookies.append(resp.cookies[COOKIE].value)

    async def replay(client: Client, _: Clock) -> None:
        client.session.cookie_jar.update_cookies({COOKIE: cookies[0]})
        assert "signed in as" not in await (await client.get("/")).text()

    run(backend, sign, key=b"k" * 32)
    run(backend, replay, key=b"j" * 32)


def test_token_checks_are_exact() -> None:
    tokens = {"tok-a": "alice", "tok-b": "bob"}
    assert check_token(tokens, "alice", "tok-a")
    assert not check_token(tokens, "alice", "tok-b") and not check_token(tokens, "bob", "tok-a")
    assert not check_token(tokens, "alice", "tok-a\ud800")  # a lone surrogate neither raises nor matches
    assert still_valid(tokens, "alice", fingerprint("tok-a"))
    assert not still_valid(tokens, "alice", fingerprint("tok-b")) and not still_valid(tokens, 7, "x")
