"""The SSRF guard: which addresses a check may connect to, enforced on every socket aiohttp opens.

Resolving a name and checking the answer is not enough: IP literals skip the resolver, a redirect
can point anywhere, and a name can resolve differently the second time (DNS rebinding). So the
decision is taken in the connector's ``socket_factory``, which aiohappyeyeballs calls with the
exact ``(family, type, proto, canonname, sockaddr)`` it is about to ``connect()`` to: a forbidden
address raises there, before a socket exists, so not even a SYN is sent. URLs whose host is an
address literal are also refused up front (:meth:`AddressGuard.url_problem`), without a connection.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
from collections.abc import Iterable, Sequence

import aiohttp
from aiohappyeyeballs import AddrInfoType
from aiohttp.abc import AbstractResolver
from yarl import URL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# NAT64 (RFC 6052) carries an IPv4 address in the low 32 bits; the translator connects to *that*.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
# glibc's inet_aton (used by getaddrinfo for numeric hosts) reads 2130706433, 0177.0.0.1, 0x7f.1, 127.1.
_LEGACY_IPV4 = re.compile(r"[0-9][0-9a-fA-FxX.]*")


class ForbiddenAddressError(OSError):
    """Raised instead of connecting to an address the guard refuses (an OSError so aiohttp wraps it)."""

    def __init__(self, address: str) -> None:
        super().__init__(errno.EACCES, f"forbidden address {address}")
        self.address = address


def _public(ip: IPAddress) -> bool:
    """True for a globally routable unicast address, looking through IPv6 forms that embed IPv4."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return _public(ip.ipv4_mapped)
        if ip in _NAT64:
            # Judged by the IPv4 address behind it (64:ff9b::/96 itself counts as reserved).
            return _public(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
        if ip.sixtofour is not None and not _public(ip.sixtofour):
            return False
        if ip.teredo is not None and not all(_public(part) for part in ip.teredo):
            return False
        if ip.is_site_local:
            return False
    # is_global alone is not enough on 3.11: it is True for multicast, ::/8 and fec0::/10.
    return ip.is_global and not (
        ip.is_multicast or ip.is_reserved or ip.is_unspecified or ip.is_loopback or ip.is_link_local or ip.is_private
    )


def is_allowed(addr: IPAddress, allow: Sequence[IPNetwork]) -> bool:
    """Whether a check may connect to ``addr``: a public address, or one inside an allowed network.

    An IPv4-mapped IPv6 address (``::ffff:a.b.c.d``) reaches the IPv4 address, so it is matched
    against the allowed networks as that address too. Allowing one network opens only that network.
    """
    if isinstance(addr, ipaddress.IPv6Address) and addr.scope_id is not None:
        addr = ipaddress.IPv6Address(int(addr))
    candidates: list[IPAddress] = [addr]
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        candidates.append(addr.ipv4_mapped)
    for net in allow:
        if any(c.version == net.version and c in net for c in candidates):
            return True
    return _public(addr)


def parse_networks(items: Iterable[str]) -> tuple[IPNetwork, ...]:
    """``Verify.allow_networks`` strings → networks (host bits allowed, as the config validator does)."""
    return tuple(ipaddress.ip_network(item, strict=False) for item in items)


def literal_address(host: str) -> IPAddress | None:
    """The address a URL host denotes when it is an address literal (any form libc accepts), else None."""
    host = host.strip("[]")
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _LEGACY_IPV4.fullmatch(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _special_name(host: str, suffix: str) -> bool:
    """Whether ``host`` is an RFC 6761 special-use name ``suffix`` or under it (trailing dot ignored)."""
    name = host.rstrip(".").lower()
    return name == suffix or name.endswith("." + suffix)


_LOOPBACK_V4 = ipaddress.IPv4Address("127.0.0.1")


class AddressGuard:
    """The allow policy plus the two places it is enforced: URL pre-checks and the socket factory."""

    def __init__(self, allow: Sequence[IPNetwork] = ()) -> None:
        self.allow = tuple(allow)
        # How many connections the socket factory refused; tests use it to see which layer acted.
        self.refused_connects = 0

    def allowed(self, addr: IPAddress) -> bool:
        """:func:`is_allowed` under this guard's networks."""
        return is_allowed(addr, self.allow)

    def url_problem(self, url: URL) -> str | None:
        """Why ``url`` must not be fetched (scheme, credentials, host, literal address), or None if it may."""
        if url.scheme not in ("http", "https"):
            return f"scheme {url.scheme or '(none)'!r} is not http(s)"
        if url.raw_user is not None or url.raw_password is not None or "@" in (url.raw_authority or ""):
            return "credentials in URL"
        host = url.raw_host
        if not host:
            return "URL has no host"
        try:
            url.port  # noqa: B018 - yarl validates the port lazily; an invalid one raises here
        except ValueError:
            return "invalid port"
        # RFC 6761 names are answered here: .invalid never exists and localhost is always loopback,
        # so neither needs a DNS query (which "localhost." with its trailing dot would otherwise make).
        if _special_name(host, "invalid"):
            return f"DNS name not found: {host}"
        if _special_name(host, "localhost") and not self.allowed(_LOOPBACK_V4):
            return f"forbidden address {_LOOPBACK_V4} ({host})"
        addr = literal_address(host)
        if addr is not None and not self.allowed(addr):
            return f"forbidden address {addr}"
        return None

    def socket_factory(self, addr_info: AddrInfoType) -> socket.socket:
        """aiohttp/aiohappyeyeballs hook: make the socket for ``addr_info`` only if its address is allowed.

        ``addr_info[4]`` is the sockaddr passed straight to ``loop.sock_connect`` next, so this is
        the real peer of every connection (first request, redirect hop and retry alike).
        """
        family, type_, proto, _, sockaddr = addr_info
        host = str(sockaddr[0])
        try:
            addr = ipaddress.ip_address(host)
        except ValueError:
            # A name here would be resolved again by sock_connect, behind the guard's back: refuse.
            addr = None
        if family not in (socket.AF_INET, socket.AF_INET6) or addr is None or not self.allowed(addr):
            self.refused_connects += 1
            raise ForbiddenAddressError(host)
        return socket.socket(family=family, type=type_, proto=proto)

    def connector(
        self, *, limit: int, limit_per_host: int, resolver: AbstractResolver | None = None
    ) -> aiohttp.TCPConnector:
        """A TCPConnector whose every connection goes through :meth:`socket_factory` (needs aiohttp ≥ 3.11)."""
        return aiohttp.TCPConnector(
            limit=limit,
            limit_per_host=limit_per_host,
            resolver=resolver,
            socket_factory=self.socket_factory,
        )


def is_forbidden_error(exc: BaseException) -> bool:
    """True if a connection error came from the guard (also when aiohappyeyeballs merged several errors)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ForbiddenAddressError):
            return True
        os_error = getattr(current, "os_error", None)
        if isinstance(os_error, BaseException) and (
            isinstance(os_error, ForbiddenAddressError) or "forbidden address" in str(os_error)
        ):
            return True
        current = current.__cause__ or current.__context__
    return False
