"""URL checks over aiohttp: does a cited URL answer HTTP 200 (after ≤ ``max_redirects`` redirects)?

Every hop is a streaming GET whose body is not read (a small declared body is read so the
connection can be reused); redirects are followed by hand so each hop's URL is re-validated
and each hop's connection passes the SSRF guard (:mod:`daemon.verify.netguard`). Concurrency
is bounded globally and per host, request starts to one host are spaced, and 429/5xx, timeouts
and resets are retried with backoff that honours ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import errno
import re
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Self

import aiohttp
from aiohttp import hdrs
from aiohttp.abc import AbstractResolver
from yarl import URL

from daemon.config import Verify
from daemon.verify.netguard import AddressGuard, ForbiddenAddressError, is_forbidden_error, parse_networks
from daemon.verify.outcome import CheckOutcome

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_DELAY_SECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")
# getaddrinfo's "this name does not exist" answers; anything else (EAI_AGAIN, EAI_FAIL) is our trouble.
_NO_SUCH_NAME = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)
# Host entries are dropped once idle, so a long run over many hosts does not keep them all.
_MAX_IDLE_HOSTS = 1024


def retryable_status(status: int) -> bool:
    """429 and 5xx are the server's temporary trouble, worth another try."""
    return status == 429 or 500 <= status <= 599


def parse_retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now`` (epoch seconds): delay-seconds or an HTTP-date; None if absent/bad."""
    if value is None:
        return None
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a naive result means the zone was "-0000"
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now)


def classify_error(exc: BaseException) -> tuple[CheckOutcome, bool]:
    """A request's exception → (outcome, worth retrying). Spec 3.3: the target's fault is False, ours None."""
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        code = getattr(exc.os_error, "errno", None)
        if code in _NO_SUCH_NAME:
            return CheckOutcome(False, None, f"DNS name not found: {exc.host}"), False
        return CheckOutcome(None, None, f"DNS lookup failed: {exc.os_error}"), True
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        # A certificate we cannot verify says nothing about whether the cited page exists.
        return CheckOutcome(None, None, f"TLS error: {exc}"), False
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, ForbiddenAddressError):
            return CheckOutcome(False, None, f"forbidden address {exc.os_error.address} (refused at connect)"), False
        if is_forbidden_error(exc):  # several addresses tried, merged into one message
            return CheckOutcome(False, None, f"forbidden address (refused at connect): {exc.os_error}"), False
        if exc.os_error.errno == errno.ECONNREFUSED:
            return CheckOutcome(False, None, f"connection refused: {exc.host}:{exc.port}"), False
        return CheckOutcome(None, None, f"cannot connect: {exc.os_error}"), True
    if isinstance(exc, aiohttp.InvalidURL):
        return CheckOutcome(False, None, f"invalid URL: {exc}"), False
    if isinstance(exc, TimeoutError):
        return CheckOutcome(None, None, "timeout"), True
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError | aiohttp.ClientPayloadError):
        return CheckOutcome(None, None, f"connection reset: {exc}"), True
    return CheckOutcome(None, None, f"network error: {type(exc).__name__}: {exc}"), False


class HostPaused(Exception):
    """A host is paused (rate limit) for longer than the checker will wait."""

    def __init__(self, host: str, remaining: float) -> None:
        super().__init__(f"{host} paused for {remaining:.1f}s")
        self.host = host
        self.remaining = remaining


@dataclass
class _HostState:
    sem: asyncio.Semaphore
    lock: asyncio.Lock
    next_start: float = float("-inf")
    paused_until: float = float("-inf")
    users: int = 0


class HostLimiter:
    """Global and per-host concurrency, a minimum interval between request starts per host, host pauses.

    The global slot is taken only once a request is ready to start, so a host that is paused or
    spaced out holds none of it and other hosts keep going.
    """

    def __init__(self, *, concurrency: int, per_host: int, interval: float, max_wait: float,
                 clock: Clock, sleep: Sleep) -> None:
        self._global = asyncio.Semaphore(concurrency)
        self._per_host = per_host
        self._interval = interval
        self._max_wait = max_wait
        self._clock = clock
        self._sleep = sleep
        self._hosts: dict[str, _HostState] = {}

    def _state(self, host: str) -> _HostState:
        state = self._hosts.get(host)
        if state is None:
            if len(self._hosts) >= _MAX_IDLE_HOSTS:
                self._prune()
            state = self._hosts[host] = _HostState(asyncio.Semaphore(self._per_host), asyncio.Lock())
        return state

    def _prune(self) -> None:
        now = self._clock()
        for host, state in list(self._hosts.items()):
            if not state.users and state.next_start <= now and state.paused_until <= now:
                del self._hosts[host]

    def pause(self, host: str, seconds: float) -> None:
        """Start no request to ``host`` for ``seconds`` (a rate limit applies to the host, not one URL)."""
        state = self._state(host)
        state.paused_until = max(state.paused_until, self._clock() + seconds)

    @asynccontextmanager
    async def slot(self, host: str) -> AsyncIterator[None]:
        """Hold a per-host and a global slot for one request; raises :class:`HostPaused` if paused too long."""
        state = self._state(host)
        state.users += 1
        try:
            async with state.sem:
                await self._start(host, state)
                try:
                    yield
                finally:
                    self._global.release()
        finally:
            state.users -= 1

    async def _start(self, host: str, state: _HostState) -> None:
        """Wait out the host's pause and spacing, then take a global slot (the caller releases it)."""
        # The lock orders starts to this host, so the spacing holds however the global slot is won.
        async with state.lock:
            paused = state.paused_until - self._clock()
            if paused > self._max_wait:
                raise HostPaused(host, paused)
            wait = max(paused, state.next_start - self._clock())
            if wait > 0:
                await self._sleep(wait)
            await self._global.acquire()
            state.next_start = self._clock() + self._interval


def open_session(
    settings: Verify, guard: AddressGuard, resolver: AbstractResolver | None, headers: Mapping[str, str]
) -> aiohttp.ClientSession:
    """A session whose connections all pass ``guard``; no proxies, no cookies, the configured timeouts.

    Call it with the event loop running (the default resolver binds to it).
    """
    # The threaded (getaddrinfo) resolver, not aiodns even when installed: its gaierror codes tell a
    # name that does not exist (False) from a lookup that failed (None); aiodns' errors lose the code.
    connector = guard.connector(
        limit=settings.concurrency,
        limit_per_host=settings.per_host,
        resolver=resolver if resolver is not None else aiohttp.ThreadedResolver(),
    )
    # sock_connect bounds each connection attempt; total bounds one request from start to headers.
    timeout = aiohttp.ClientTimeout(total=settings.total_timeout, sock_connect=settings.connect_timeout)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        headers=dict(headers),
        trust_env=False,  # no HTTP(S)_PROXY: a proxy would make the connect-time guard see only the proxy
        cookie_jar=aiohttp.DummyCookieJar(),  # one check must not change what the next one sees
    )


async def discard_body(resp: aiohttp.ClientResponse, cap: int) -> None:
    """Finish with a response without reading more than ``cap`` bytes of its body.

    A declared body within the cap is read so the keep-alive connection can serve the next
    check; anything else (large, unknown length) closes the connection instead of reading it.
    """
    length = resp.content_length
    if length is not None and length <= cap:
        try:
            await resp.read()
        except (aiohttp.ClientError, TimeoutError):
            resp.close()
    else:
        resp.close()


@dataclass(frozen=True)
class _Hop:
    status: int
    location: str | None
    retry_after: float | None


class GuardedClient:
    """One guarded aiohttp session with the per-host limiter; the base of the URL and API checkers.

    ``resolver``, ``sleep``, ``clock`` (monotonic) and ``wallclock`` (epoch) are test hooks with
    production defaults.
    """

    def __init__(
        self,
        settings: Verify,
        *,
        resolver: AbstractResolver | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
        wallclock: Clock = time.time,
    ) -> None:
        self._settings = settings
        self.guard = AddressGuard(parse_networks(settings.allow_networks))
        self._resolver = resolver
        self._sleep = sleep
        self._wallclock = wallclock
        self._limiter = HostLimiter(
            concurrency=settings.concurrency,
            per_host=settings.per_host,
            interval=settings.per_host_interval,
            max_wait=settings.max_retry_after,
            clock=clock,
            sleep=sleep,
        )
        self._session: aiohttp.ClientSession | None = None

    def _headers(self) -> dict[str, str]:
        """Headers sent with every request of this client."""
        return {hdrs.USER_AGENT: self._settings.user_agent, hdrs.ACCEPT: "*/*"}

    async def __aenter__(self) -> Self:
        self._session = open_session(self._settings, self.guard, self._resolver, self._headers())
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session and its connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None


class UrlChecker(GuardedClient):
    """Checks cited URLs; use as ``async with UrlChecker(settings) as checker: await checker.check(url)``."""

    async def check(self, url: str) -> CheckOutcome:
        """Check one URL: True iff the final response is 200; False if it cannot resolve; None if inconclusive."""
        if self._session is None:
            raise RuntimeError("UrlChecker.check() outside 'async with UrlChecker(...)'")
        try:
            current = URL(url).with_fragment(None)
        except (ValueError, TypeError) as exc:
            return CheckOutcome(False, None, f"invalid URL: {exc}")
        seen = {current}
        status = 0
        for hops in range(self._settings.max_redirects + 1):
            problem = self.guard.url_problem(current)
            if problem is not None:
                return CheckOutcome(False, None, problem if not hops else f"{problem} (after {_redirects(hops)})")
            result = await self._fetch(current)
            if isinstance(result, CheckOutcome):
                if result.ok and hops:
                    return CheckOutcome(True, result.status, f"{result.detail} after {_redirects(hops)}")
                return result
            status, location = result
            try:
                nxt = current.join(URL(location)).with_fragment(None)
            except (ValueError, TypeError):
                return CheckOutcome(False, status, f"HTTP {status} with an invalid Location")
            if nxt in seen:
                return CheckOutcome(False, status, f"redirect loop: {nxt} again after {_redirects(hops + 1)}")
            seen.add(nxt)
            current = nxt
        return CheckOutcome(False, status, f"more than {self._settings.max_redirects} redirects")

    def _backoff(self, attempt: int) -> float:
        return min(self._settings.backoff * 2.0**attempt, self._settings.max_retry_after)

    async def _fetch(self, url: URL) -> CheckOutcome | tuple[int, str]:
        """One hop with retries: a final outcome, or (status, Location) of a redirect to follow."""
        host = (url.raw_host or "").lower()
        attempts = self._settings.retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                async with self._limiter.slot(host):
                    hop = await self._request(url)
            except HostPaused as paused:
                return CheckOutcome(None, None, f"host {host} rate-limited for another {paused.remaining:.0f}s")
            except (aiohttp.ClientError, OSError) as exc:
                outcome, retry = classify_error(exc)
                if not retry or last:
                    return _after(outcome, attempts) if retry and attempts > 1 else outcome
                await self._sleep(self._backoff(attempt))
                continue
            if hop.status == 200:
                return CheckOutcome(True, 200, "HTTP 200")
            if hop.status in REDIRECT_STATUSES and hop.location:
                return hop.status, hop.location
            if not retryable_status(hop.status):
                return CheckOutcome(False, hop.status, f"HTTP {hop.status}")
            if last:
                return CheckOutcome(None, hop.status, f"HTTP {hop.status} after {attempts} attempts")
            gave_up = await self._wait_to_retry(host, hop, attempt)
            if gave_up is not None:
                return gave_up
        raise AssertionError("unreachable: the last attempt always returns")

    async def _wait_to_retry(self, host: str, hop: _Hop, attempt: int) -> CheckOutcome | None:
        """Wait before retrying a 429/5xx; an outcome instead if the server asks for longer than we wait."""
        if hop.retry_after is None:
            await self._sleep(self._backoff(attempt))
            return None
        if hop.retry_after > self._settings.max_retry_after:
            # Retrying sooner than asked would only earn another 429; call it inconclusive now.
            self._limiter.pause(host, hop.retry_after)
            return CheckOutcome(
                None, hop.status, f"HTTP {hop.status}, Retry-After {hop.retry_after:.0f}s exceeds max_retry_after"
            )
        # Retry-After speaks for the whole host: pausing it also holds back other checks of that host.
        self._limiter.pause(host, hop.retry_after)
        return None

    async def _request(self, url: URL) -> _Hop:
        assert self._session is not None  # check() made sure
        async with self._session.get(url, allow_redirects=False) as resp:
            hop = _Hop(
                resp.status,
                resp.headers.get(hdrs.LOCATION),
                parse_retry_after(resp.headers.get(hdrs.RETRY_AFTER), self._wallclock()),
            )
            await discard_body(resp, self._settings.body_cap)
        return hop


def _after(outcome: CheckOutcome, attempts: int) -> CheckOutcome:
    return CheckOutcome(outcome.ok, outcome.status, f"{outcome.detail} after {attempts} attempts")


def _redirects(n: int) -> str:
    return f"{n} redirect" if n == 1 else f"{n} redirects"
