"""daemon/http/guards.py: the open-redirect guard, the failed-attempt limiter (an injected clock), form tokens and
the origin check."""

from __future__ import annotations

import pytest

from daemon.http.guards import AttemptLimiter, local_path, new_token, same_origin, tokens_match


@pytest.mark.parametrize("target", [
    "/", "/agents/ada?window=24h", "/agents/ada?window=24h&page=2#d-1f2e", "/agents/%2F%2Fevil", "/methodology",
    "/agents/caf%C3%A9", "/agents/café",
])
def test_local_paths_are_kept(target: str) -> None:
    assert local_path(target) == target


@pytest.mark.parametrize("target", [
    None, "", "agents/ada", "//evil.example", "//evil.example/agents", "/\\evil.example", "\\\\evil.example",
    "/agents\\..\\x", "https://evil.example/", "http:/evil.example", "javascript:alert(1)", "data:text/html,x",
    "/\t/evil.example", "/\n/evil.example", "/\r\n/evil", "/ /evil", "/\x00", "/\x7f", "/\x85", "/a\u2028b",
    " /agents", "/" + "a" * 2000, "///evil.example",
])
def test_anything_else_goes_to_the_default(target: str | None) -> None:
    assert local_path(target) == "/"
    assert local_path(target, "/agents/ada") == "/agents/ada"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_limiter_blocks_after_most_failures_until_the_oldest_leaves_the_window() -> None:
    clock = Clock()
    limiter = AttemptLimiter(3, 60.0, clock=clock)
    for _ in range(2):
        limiter.failed("client:1")
        assert limiter.retry_after("client:1") is None
        clock.now += 10
    limiter.failed("client:1")  # failures at 1000, 1010, 1020
    assert limiter.retry_after("client:1") == 40  # the one at 1000 leaves at 1060
    assert limiter.retry_after("client:2") is None  # other keys are not affected
    clock.now = 1059.5
    assert limiter.retry_after("client:1") == 1
    clock.now = 1060.0
    assert limiter.retry_after("client:1") is None
    limiter.failed("client:1")  # 1010, 1020, 1060: blocked until 1010 leaves
    assert limiter.retry_after("client:1") == 10


def test_the_limiter_forgets_idle_keys_first_when_full() -> None:
    clock = Clock()
    limiter = AttemptLimiter(1, 60.0, clock=clock, keys=2)
    limiter.failed("a")
    limiter.failed("b")
    limiter.failed("c")  # "a" is forgotten
    assert limiter.retry_after("a") is None
    assert limiter.retry_after("b") is not None and limiter.retry_after("c") is not None


def test_form_tokens() -> None:
    token = new_token()
    assert len(token) >= 43 and token != new_token()
    assert tokens_match(token, token)
    assert not tokens_match(token, token[:-1] + ("A" if token[-1] != "A" else "B"))
    for expected, given in ((token, None), (None, token), ("", ""), (None, None), (token, ""), (token, 1)):
        assert not tokens_match(expected, given)
    assert not tokens_match("x\ud800", "x")  # a lone surrogate (a JSON escape in a cookie) neither raises nor matches


def test_same_origin() -> None:
    assert same_origin(None, "http", "127.0.0.1:9478")
    assert same_origin("http://127.0.0.1:9478", "http", "127.0.0.1:9478")
    assert same_origin("HTTP://Host.example", "http", "host.example")
    assert not same_origin("http://127.0.0.1:9999", "http", "127.0.0.1:9478")
    assert not same_origin("null", "http", "127.0.0.1:9478")
    assert not same_origin("https://127.0.0.1:9478", "http", "127.0.0.1:9478")
    assert not same_origin("http://127.0.0.1:9478", "http", None)
