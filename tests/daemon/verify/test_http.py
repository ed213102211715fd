"""URL checks against real aiohttp servers on 127.0.0.0/8: statuses, redirects, retries, limits, timeouts.

The helpers here (``serve``, ``counting_server``, ``FakeTime``, ``MapResolver``) are shared with
the SSRF and GitHub suites.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

from daemon.config import Verify
from daemon.verify.http import UrlChecker, parse_retry_after
from daemon.verify.outcome import CheckOutcome

LOOPBACK = ("127.0.0.0/8",)


def settings(**overrides: Any) -> Verify:
    """Test settings: loopback allowed, short timeouts, tiny backoff."""
    values: dict[str, Any] = {
        "allow_networks": LOOPBACK,
        "connect_timeout": 1.0,
        "total_timeout": 3.0,
        "backoff": 0.01,
        "retries": 2,
    }
    values.update(overrides)
    return Verify(**values)


class FakeTime:
    """An injected clock and sleep: sleeping records the delay and advances time without waiting."""

    def __init__(self) -> None:
        self.mono = 1000.0
        self.now = 1_700_000_000.0
        self.delays: list[float] = []

    def clock(self) -> float:
        return self.mono

    def wallclock(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        self.mono += delay
        self.now += delay
        await asyncio.sleep(0)


class MapResolver(AbstractResolver):
    """A resolver from a fixed table; unknown names do not exist (or fail with ``error``)."""

    def __init__(self, names: dict[str, str], error: int = socket.EAI_NONAME) -> None:
        self.names = names
        self.error = error
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.asked.append(host)
        addr = self.names.get(host)
        if addr is None:
            raise socket.gaierror(self.error, "lookup failed")
        fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
        return [ResolveResult(hostname=host, host=addr, port=port, family=fam, proto=0, flags=0)]

    async def close(self) -> None:
        pass


@asynccontextmanager
async def serve(app: web.Application, host: str = "127.0.0.1") -> AsyncIterator[URL]:
    """Run ``app`` on ``host``:<free port>; yields its base URL. Handlers are cancelled when clients leave."""
    runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield URL.build(scheme="http", host=host, port=port)
    finally:
        await runner.cleanup()


@dataclass
class Accepts:
    """Connections accepted by a raw listening socket (see :func:`counting_server`)."""

    port: int
    count: int = 0


@asynccontextmanager
async def counting_server(host: str = "127.0.0.1", also_v6: bool = True) -> AsyncIterator[Accepts]:
    """A raw TCP server that counts accepted connections and closes them at once (also on ::1, same port)."""
    accepts = Accepts(0)

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepts.count += 1
        writer.close()
        await writer.wait_closed()

    servers = [await asyncio.start_server(on_connect, host, 0)]
    accepts.port = servers[0].sockets[0].getsockname()[1]
    if also_v6:
        # No IPv6 loopback here, or the port is taken on it: then there is nothing to count there.
        with contextlib.suppress(OSError):
            servers.append(await asyncio.start_server(on_connect, "::1", accepts.port))
    try:
        yield accepts
    finally:
        for server in servers:
            server.close()
            await server.wait_closed()


def run(coro: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(coro())  # type: ignore[arg-type]


@dataclass
class Hits:
    paths: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)
    active: int = 0
    peak: int = 0
    sent: int = 0


def site(hits: Hits) -> web.Application:
    """The test website: fixed statuses, redirect chains and loops, flaky, slow and endless pages."""
    flaky: dict[str, int] = {}

    async def record(request: web.Request) -> None:
        hits.paths.append(request.path)
        hits.headers.append(dict(request.headers))
        hits.starts.append(time.monotonic())

    async def status(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(status=int(request.match_info["code"]), text="x")

    async def chain(request: web.Request) -> web.StreamResponse:
        await record(request)
        n = int(request.match_info["n"])
        if n == 0:
            return web.Response(text="end")
        return web.Response(status=301, headers={"Location": f"/chain/{n - 1}"})

    async def loop(request: web.Request) -> web.StreamResponse:
        await record(request)
        other = "b" if request.match_info["x"] == "a" else "a"
        return web.Response(status=302, headers={"Location": f"/loop/{other}"})

    async def flaky_page(request: web.Request) -> web.StreamResponse:
        """First ``n`` requests fail with ``code`` (and an optional Retry-After), then 200."""
        await record(request)
        key = request.path_qs
        flaky[key] = flaky.get(key, 0) + 1
        if flaky[key] <= int(request.query.get("n", "1")):
            headers = {"Retry-After": request.query["ra"]} if "ra" in request.query else {}
            return web.Response(status=int(request.match_info["code"]), headers=headers)
        return web.Response(text="ok")

    async def slow(request: web.Request) -> web.StreamResponse:
        await record(request)
        await asyncio.sleep(30)  # cancelled when the client gives up
        return web.Response(text="late")

    async def huge(request: web.Request) -> web.StreamResponse:
        await record(request)
        resp = web.StreamResponse()
        resp.content_length = 2**30
        await resp.prepare(request)
        chunk = b"x" * 65536
        try:
            while hits.sent < 2**30:
                await resp.write(chunk)
                hits.sent += len(chunk)
        except ConnectionError:
            pass  # the checker hung up: exactly what we want (or the handler is cancelled)
        return resp

    async def busy(request: web.Request) -> web.StreamResponse:
        await record(request)
        hits.active += 1
        hits.peak = max(hits.peak, hits.active)
        try:
            await asyncio.sleep(0.05)
        finally:
            hits.active -= 1
        return web.Response(text="ok")

    async def no_location(request: web.Request) -> web.StreamResponse:
        await record(request)
        return web.Response(status=301)

    app = web.Application()
    app.router.add_get("/status/{code}", status)
    app.router.add_get("/chain/{n}", chain)
    app.router.add_get("/loop/{x}", loop)
    app.router.add_get("/flaky/{code}", flaky_page)
    app.router.add_get("/slow", slow)
    app.router.add_get("/huge", huge)
    app.router.add_get("/busy", busy)
    app.router.add_get("/no-location", no_location)
    return app


async def check_one(url: str | URL, cfg: Verify, **hooks: Any) -> CheckOutcome:
    async with UrlChecker(cfg, **hooks) as checker:
        return await checker.check(str(url))


def test_200_is_ok_and_sends_user_agent() -> None:
    async def main() -> None:
        hits = Hits()
        async with serve(site(hits)) as base:
            outcome = await check_one(base / "status" / "200", settings())
        assert outcome == CheckOutcome(True, 200, "HTTP 200")
        assert hits.headers[0]["User-Agent"] == Verify().user_agent

    run(main)


@pytest.mark.parametrize("code", [404, 410, 403, 400, 204])
def test_other_final_status_is_false(code: int) -> None:
    async def main() -> None:
        async with serve(site(Hits())) as base:
            outcome = await check_one(base / "status" / str(code), settings())
        assert outcome.ok is False and outcome.status == code

    run(main)


@pytest.mark.parametrize(("hops", "ok"), [(1, True), (5, True), (6, False)])
def test_redirect_chains(hops: int, ok: bool) -> None:
    async def main() -> None:
        hits = Hits()
        async with serve(site(hits)) as base:
            outcome = await check_one(base / "chain" / str(hops), settings(max_redirects=5))
        assert outcome.ok is ok, outcome
        if ok:
            assert outcome.status == 200 and f"{hops} redirect" in outcome.detail
            assert hits.paths[-1] == "/chain/0"
        else:
            assert outcome.status == 301 and "more than 5 redirects" in outcome.detail
            assert len(hits.paths) == 6  # stopped at the limit, not followed further

    run(main)


def test_redirect_loop_is_false() -> None:
    async def main() -> None:
        hits = Hits()
        async with serve(site(hits)) as base:
            outcome = await check_one(base / "loop" / "a", settings())
        assert outcome.ok is False and "redirect loop" in outcome.detail
        assert hits.paths == ["/loop/a", "/loop/b"]

    run(main)


def test_redirect_without_location_is_false() -> None:
    async def main() -> None:
        async with serve(site(Hits())) as base:
            outcome = await check_one(base / "no-location", settings())
        assert outcome == CheckOutcome(False, 301, "HTTP 301")

    run(main)


def test_429_retry_after_then_200() -> None:
    async def main() -> None:
        hits, fake = Hits(), FakeTime()
        async with serve(site(hits)) as base:
            url = (base / "flaky" / "429").with_query(n=1, ra=1)
            outcome = await check_one(url, settings(), sleep=fake.sleep, clock=fake.clock, wallclock=fake.wallclock)
        assert outcome == CheckOutcome(True, 200, "HTTP 200")
        assert fake.delays == [1.0]
        assert len(hits.paths) == 2

    run(main)


def test_retry_after_http_date() -> None:
    async def main() -> None:
        fake = FakeTime()
        async with serve(site(Hits())) as base:
            url = (base / "flaky" / "503").with_query(n=1, ra=formatdate(fake.now + 3, usegmt=True))
            outcome = await check_one(url, settings(), sleep=fake.sleep, clock=fake.clock, wallclock=fake.wallclock)
        assert outcome.ok is True
        assert fake.delays == [3.0]

    run(main)


def test_parse_retry_after() -> None:
    now = 1_445_412_450.0  # 30 s before Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after(" 7 ", now) == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now) == 30.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now) == 0.0  # in the past: retry now
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_retry_after_beyond_cap_is_inconclusive_without_waiting() -> None:
    async def main() -> None:
        hits, fake = Hits(), FakeTime()
        async with serve(site(hits)) as base:
            url = (base / "flaky" / "429").with_query(n=1, ra=3600)
            cfg = settings(max_retry_after=60.0)
            outcome = await check_one(url, cfg, sleep=fake.sleep, clock=fake.clock, wallclock=fake.wallclock)
        assert outcome.ok is None and outcome.status == 429 and "exceeds max_retry_after" in outcome.detail
        assert fake.delays == [] and len(hits.paths) == 1

    run(main)


def test_503_then_200_backs_off() -> None:
    async def main() -> None:
        hits, fake = Hits(), FakeTime()
        async with serve(site(hits)) as base:
            url = (base / "flaky" / "503").with_query(n=1)
            cfg = settings(backoff=0.5)
            outcome = await check_one(url, cfg, sleep=fake.sleep, clock=fake.clock, wallclock=fake.wallclock)
        assert outcome.ok is True
        assert fake.delays == [0.5]
        assert len(hits.paths) == 2

    run(main)


def test_5xx_after_retries_is_inconclusive_with_exponential_backoff() -> None:
    async def main() -> None:
        hits, fake = Hits(), FakeTime()
        async with serve(site(hits)) as base:
            url = (base / "flaky" / "502").with_query(n=99)
            cfg = settings(backoff=0.5, retries=3)
            outcome = await check_one(url, cfg, sleep=fake.sleep, clock=fake.clock, wallclock=fake.wallclock)
        assert outcome == CheckOutcome(None, 502, "HTTP 502 after 4 attempts")
        assert fake.delays == [0.5, 1.0, 2.0]
        assert len(hits.paths) == 4

    run(main)


def test_slow_response_times_out_inconclusive() -> None:
    async def main() -> None:
        hits, fake = Hits(), FakeTime()
        async with serve(site(hits)) as base:
            cfg = settings(total_timeout=0.5, connect_timeout=0.5, retries=1)
            started = time.monotonic()
            outcome = await check_one(base / "slow", cfg, sleep=fake.sleep, clock=fake.clock)
            elapsed = time.monotonic() - started
        assert outcome.ok is None and "timeout" in outcome.detail
        assert len(hits.paths) == 2  # timeouts are retried
        assert elapsed < 2.5

    run(main)


def test_huge_body_is_not_read() -> None:
    async def main() -> None:
        hits = Hits()
        async with serve(site(hits)) as base:
            cfg = settings(total_timeout=5.0)
            started = time.monotonic()
            outcome = await check_one(base / "huge", cfg)
            elapsed = time.monotonic() - started
        assert outcome == CheckOutcome(True, 200, "HTTP 200")
        assert elapsed < 1.0
        # What the server got into socket buffers before the hang-up; reading the body would be 1 GiB.
        assert hits.sent < 32 * 2**20, hits.sent

    run(main)


def test_per_host_concurrency_limit() -> None:
    async def main() -> None:
        hits = Hits()
        async with serve(site(hits)) as base, UrlChecker(settings(per_host=2, concurrency=16)) as checker:
            outcomes = await asyncio.gather(*(checker.check(str(base / "busy")) for _ in range(12)))
        assert all(o.ok for o in outcomes)
        assert hits.peak == 2

    run(main)


def test_global_concurrency_limit_across_hosts() -> None:
    async def main() -> None:
        hits = Hits()
        async with (
            serve(site(hits), "127.0.0.1") as one,
            serve(site(hits), "127.0.0.2") as two,
            UrlChecker(settings(per_host=10, concurrency=3)) as checker,
        ):
            urls = [str(base / "busy") for base in (one, two) for _ in range(8)]
            outcomes = await asyncio.gather(*(checker.check(u) for u in urls))
        assert all(o.ok for o in outcomes)
        assert hits.peak == 3

    run(main)


def test_per_host_interval_between_request_starts() -> None:
    async def main() -> None:
        hits = Hits()
        async with serve(site(hits)) as base, UrlChecker(settings(per_host=4, per_host_interval=0.2)) as checker:
            outcomes = await asyncio.gather(*(checker.check(str(base / "status" / "200")) for _ in range(4)))
        assert all(o.ok for o in outcomes)
        gaps = [b - a for a, b in zip(hits.starts, hits.starts[1:], strict=False)]
        assert len(gaps) == 3 and min(gaps) > 0.18, gaps

    run(main)


def test_keep_alive_reuses_connections() -> None:
    async def main() -> None:
        connections: set[Any] = set()

        async def page(request: web.Request) -> web.Response:
            connections.add(request.transport)
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_get("/", page)
        async with serve(app) as base, UrlChecker(settings(per_host=1)) as checker:
            for _ in range(5):
                assert (await checker.check(str(base))).ok is True
        assert len(connections) == 1  # a small declared body is read, so the connection is reused

    run(main)


@pytest.mark.parametrize(
    ("template", "detail"),
    [
        ("http://user:pass@127.0.0.1:{port}/", "credentials in URL"),
        ("http://user@127.0.0.1:{port}/", "credentials in URL"),
        ("ftp://127.0.0.1:{port}/", "scheme 'ftp' is not http(s)"),
        ("file:///etc/passwd", "scheme 'file' is not http(s)"),
    ],
)
def test_refused_urls_make_no_connection(template: str, detail: str) -> None:
    async def main() -> None:
        async with counting_server() as accepts:
            outcome = await check_one(template.format(port=accepts.port), settings())
        assert outcome == CheckOutcome(False, None, detail)
        assert accepts.count == 0

    run(main)


def test_dns_name_under_invalid_does_not_exist() -> None:
    async def main() -> None:
        outcome = await check_one("http://no-such-host.invalid/page", settings())
        assert outcome == CheckOutcome(False, None, "DNS name not found: no-such-host.invalid")

    run(main)


def test_dns_nxdomain_from_resolver_is_false_but_lookup_failure_is_inconclusive() -> None:
    async def main() -> None:
        nx = MapResolver({}, error=socket.EAI_NONAME)
        outcome = await check_one("http://gone.example.com/", settings(), resolver=nx)
        assert outcome.ok is False and "DNS name not found: gone.example.com" in outcome.detail
        fail = MapResolver({}, error=socket.EAI_AGAIN)
        fake = FakeTime()
        outcome = await check_one("http://flaky.example.com/", settings(), resolver=fail, sleep=fake.sleep)
        assert outcome.ok is None and "DNS lookup failed" in outcome.detail
        assert fail.asked == ["flaky.example.com"] * 3  # retried: a lookup failure is our trouble

    run(main)


def test_connection_refused_is_false() -> None:
    async def main() -> None:
        # Bound but not listening: the kernel answers RST, and no other process can take the port meanwhile.
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
            outcome = await check_one(f"http://127.0.0.1:{port}/", settings())
        assert outcome == CheckOutcome(False, None, f"connection refused: 127.0.0.1:{port}")

    run(main)


def test_connection_reset_is_retried_then_inconclusive() -> None:
    async def main() -> None:
        fake = FakeTime()
        async with counting_server(also_v6=False) as accepts:
            cfg = settings(retries=2)
            outcome = await check_one(f"http://127.0.0.1:{accepts.port}/", cfg, sleep=fake.sleep, clock=fake.clock)
        assert outcome.ok is None and "connection reset" in outcome.detail
        assert fake.delays == [0.01, 0.02]  # our three attempts...
        # ...each of which aiohttp itself may retry once on a fresh connection (RFC 9112 section 9.3.1).
        assert accepts.count in (3, 6)

    run(main)


def test_check_outside_context_manager_raises() -> None:
    async def main() -> None:
        with pytest.raises(RuntimeError):
            await UrlChecker(settings()).check("http://127.0.0.1/")

    run(main)


def test_client_session_error_types_are_aiohttp() -> None:
    # A guard against aiohttp renaming the DNS error class this module's classification relies on.
    assert issubclass(aiohttp.ClientConnectorDNSError, aiohttp.ClientConnectorError)
