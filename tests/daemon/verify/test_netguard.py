"""The SSRF guard: with an empty allow list nothing but public addresses is ever connected to.

Every forbidden target here is either on loopback, where a real listening socket counts the
connections it accepts (it must count none), or off-box (169.254.169.254, 10.0.0.1, 192.168.1.1),
where the guard must refuse before connecting: those checks assert the refusal happened with no
connection attempt at all, and use a tiny connect timeout so a broken guard fails fast, not hangs.
A positive control shows the counting server does count when loopback is allowed.
"""

from __future__ import annotations

import ipaddress
import socket
import time

import pytest
from aiohttp import web

from daemon.verify.http import UrlChecker
from daemon.verify.netguard import AddressGuard, ForbiddenAddressError, is_allowed, literal_address
from tests.daemon.verify.test_http import MapResolver, counting_server, run, serve, settings


def strict(**overrides: object) -> dict[str, object]:
    """Settings overrides for the SSRF suite: nothing allowed, fail fast."""
    values: dict[str, object] = {"allow_networks": (), "connect_timeout": 0.2, "total_timeout": 1.0, "retries": 0}
    values.update(overrides)
    return values


FORBIDDEN = [
    "127.0.0.1", "127.255.255.254", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::", "169.254.169.254", "10.0.0.1",
    "172.16.0.1", "192.168.1.1", "100.64.0.1", "192.0.0.1", "192.0.2.1", "198.18.0.1", "224.0.0.1",
    "239.255.255.250", "240.0.0.1", "255.255.255.255", "fe80::1", "fc00::1", "fd00::1", "fec0::1", "ff02::1",
    "2001:db8::1", "::7f00:1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "2002:7f00:1::1", "2002:a00:1::1",
    "64:ff9b::7f00:1", "64:ff9b::a9fe:a9fe", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "100::1",
]
PUBLIC = ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2002:808:808::1", "64:ff9b::808:808", "::ffff:8.8.8.8"]


@pytest.mark.parametrize("addr", FORBIDDEN)
def test_forbidden_addresses(addr: str) -> None:
    assert not is_allowed(ipaddress.ip_address(addr), [])


@pytest.mark.parametrize("addr", PUBLIC)
def test_public_addresses(addr: str) -> None:
    assert is_allowed(ipaddress.ip_address(addr), [])


def test_allowing_one_network_opens_only_that_network() -> None:
    allow = [ipaddress.ip_network("127.0.0.2/32")]
    assert is_allowed(ipaddress.ip_address("127.0.0.2"), allow)
    assert is_allowed(ipaddress.ip_address("::ffff:127.0.0.2"), allow)
    for addr in ("127.0.0.1", "::1", "10.0.0.1", "169.254.169.254", "192.168.1.1", "0.0.0.0"):
        assert not is_allowed(ipaddress.ip_address(addr), allow), addr
    v6 = [ipaddress.ip_network("fd00:1::/64")]
    assert is_allowed(ipaddress.ip_address("fd00:1::5"), v6)
    assert not is_allowed(ipaddress.ip_address("fd00:2::5"), v6)


@pytest.mark.parametrize(
    ("host", "addr"),
    [
        ("127.0.0.1", "127.0.0.1"), ("2130706433", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"), ("127.1", "127.0.0.1"), ("[::1]", "::1"), ("127.0.0.1.", "127.0.0.1"),
        ("::ffff:7f00:1", "::ffff:7f00:1"), ("example.com", None), ("cafe", None), ("1.2.3.4.example", None),
    ],
)
def test_literal_address_forms(host: str, addr: str | None) -> None:
    got = literal_address(host)
    assert (str(got) if got is not None else None) == addr


@pytest.mark.parametrize("addr", ["127.0.0.1", "::1", "169.254.169.254", "10.0.0.1", "192.168.1.1", "0.0.0.0"])
def test_socket_factory_refuses_before_creating_a_socket(addr: str) -> None:
    guard = AddressGuard()
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    sockaddr = (addr, 80, 0, 0) if family == socket.AF_INET6 else (addr, 80)
    with pytest.raises(ForbiddenAddressError, match="forbidden address"):
        guard.socket_factory((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", sockaddr))
    assert guard.refused_connects == 1


def test_socket_factory_refuses_names_and_allows_allowed() -> None:
    guard = AddressGuard([ipaddress.ip_network("127.0.0.0/8")])
    with pytest.raises(ForbiddenAddressError):  # sock_connect would resolve a name behind the guard's back
        guard.socket_factory((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("localhost", 80)))
    sock = guard.socket_factory((socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", 80)))
    sock.close()


LOOPBACK_URLS = [
    "http://127.0.0.1:{port}/",
    "http://localhost:{port}/",
    "http://[::1]:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://0.0.0.0:{port}/",
    "http://2130706433:{port}/",
    "http://0177.0.0.1:{port}/",
    "http://0x7f.0.0.1:{port}/",
    "http://127.1:{port}/",
    "http://LOCALHOST.:{port}/",
]


@pytest.mark.parametrize("template", LOOPBACK_URLS)
def test_loopback_targets_are_refused_and_never_connected(template: str) -> None:
    async def main() -> None:
        async with counting_server() as accepts, UrlChecker(settings(**strict())) as checker:
            outcome = await checker.check(template.format(port=accepts.port))
        assert outcome.ok is False and "forbidden address" in outcome.detail, outcome
        assert accepts.count == 0

    run(main)


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", "http://192.168.1.1/"])
def test_off_box_targets_are_refused_before_any_connection(url: str) -> None:
    async def main() -> None:
        async with UrlChecker(settings(**strict())) as checker:
            started = time.monotonic()
            outcome = await checker.check(url)
            elapsed = time.monotonic() - started
            # Refused by the URL pre-check: the socket factory was never even asked for a socket.
            assert checker.guard.refused_connects == 0
        assert outcome.ok is False and outcome.detail.startswith("forbidden address"), outcome
        assert elapsed < 0.1

    run(main)


def test_public_name_resolving_to_loopback_is_refused_at_connect() -> None:
    async def main() -> None:
        async with counting_server() as accepts:
            resolver = MapResolver({"public.example.com": "127.0.0.1"})
            async with UrlChecker(settings(**strict()), resolver=resolver) as checker:
                outcome = await checker.check(f"http://public.example.com:{accepts.port}/")
                assert checker.guard.refused_connects == 1  # the connect-time layer acted
        assert outcome.ok is False and "forbidden address 127.0.0.1" in outcome.detail, outcome
        assert resolver.asked == ["public.example.com"]
        assert accepts.count == 0

    run(main)


def test_redirect_from_allowed_server_to_forbidden_address() -> None:
    async def main() -> None:
        async with counting_server() as target:
            hits: list[str] = []

            async def jump(request: web.Request) -> web.Response:
                hits.append(request.path)
                return web.Response(status=302, headers={"Location": request.query["to"]})

            app = web.Application()
            app.router.add_get("/jump", jump)
            resolver = MapResolver({"public.example.com": "127.0.0.1"})
            cfg = settings(**strict(allow_networks=("127.0.0.2/32",)))
            async with serve(app, "127.0.0.2") as first, UrlChecker(cfg, resolver=resolver) as checker:
                literal = await checker.check(str((first / "jump").with_query(to=f"http://127.0.0.1:{target.port}/")))
                named = await checker.check(
                    str((first / "jump").with_query(to=f"http://public.example.com:{target.port}/x"))
                )
                assert checker.guard.refused_connects == 1  # the named hop was refused at connect time
        assert literal.ok is False and "forbidden address 127.0.0.1" in literal.detail, literal
        assert named.ok is False and "forbidden address 127.0.0.1" in named.detail, named
        assert hits == ["/jump", "/jump"]  # the allowed first hop was really fetched
        assert target.count == 0

    run(main)


def test_positive_control_counting_server_counts_when_loopback_allowed() -> None:
    async def main() -> None:
        async with counting_server() as accepts:
            cfg = settings(**strict(allow_networks=("127.0.0.0/8",)))
            async with UrlChecker(cfg) as checker:
                outcome = await checker.check(f"http://127.0.0.1:{accepts.port}/")
        assert outcome.ok is None  # the counting server hangs up without answering
        assert accepts.count >= 1

    run(main)


def test_proxy_environment_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        async def page(request: web.Request) -> web.Response:
            return web.Response(text="direct")

        app = web.Application()
        app.router.add_get("/", page)
        async with counting_server() as proxy, serve(app) as base:
            for var in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
                monkeypatch.setenv(var, f"http://127.0.0.1:{proxy.port}")
            monkeypatch.delenv("NO_PROXY", raising=False)
            monkeypatch.delenv("no_proxy", raising=False)
            async with UrlChecker(settings(**strict(allow_networks=("127.0.0.0/8",)))) as checker:
                outcome = await checker.check(str(base))
        assert outcome.ok is True
        assert proxy.count == 0

    run(main)
