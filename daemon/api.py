"""The HTTP API and pages (aiohttp): thin handlers that translate requests into pure calls.

Reads come from the latest in-memory snapshot only. The one write, ``POST /v1/labels``,
appends to ``labels/api.jsonl`` under the state root so that files stay the source of truth.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
import logging
import math
import resource
import socket
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import Executor
from dataclasses import replace
from datetime import datetime
from typing import Any, Protocol, TypeVar

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from collectors.jsonl import LABEL_VALUES
from collectors.rfc3339 import TimestampError, format_ts, parse_ts
from daemon import openapi, pages
from daemon.config import Config
from daemon.snapshot import Snapshot
from scorers.audit import audit_rows, audit_summary
from scorers.history import DayCounts
from scorers.history import render as render_history
from scorers.score import AgentResult, WindowResult, to_json


class Backend(Protocol):
    """What the handlers need from the running daemon."""

    @property
    def snapshot(self) -> Snapshot | None: ...

    @property
    def config(self) -> Config: ...

    @property
    def unready(self) -> str | None: ...

    def reviewers(self) -> Mapping[str, str]: ...

    def now(self) -> datetime: ...

    def changelog_text(self) -> str: ...

    async def knows_decision(self, decision: str) -> bool | None: ...

    async def append_label(self, label: dict[str, str]) -> None: ...

    async def history(self, agent: str) -> list[DayCounts]: ...

    async def audit(self, agent: str, window: str) -> tuple[datetime, AgentResult] | None: ...


BACKEND: web.AppKey[Backend] = web.AppKey("backend", Backend)

#: Server limits: keyword arguments of ``web.AppRunner``, i.e. of its request handler. A request line or header
#: field longer than 8 KiB is answered 400 before any handler runs. ``keepalive_timeout`` closes a connection idle
#: that long; since aiohttp 3.14.4 it is armed when the connection opens, so a client that trickles its headers
#: (slowloris) is cut off after it too, not held for aiohttp's default of an hour. ``lingering_time`` bounds how
#: long the unread rest of a refused body is drained before closing (bodies are at most 16 KiB).
HTTP_LIMITS: Mapping[str, Any] = {"max_line_size": 8190, "max_field_size": 8190, "keepalive_timeout": 10.0,
                                  "lingering_time": 2.0}
#: A request body (POST /v1/labels) must arrive within this many seconds (408 otherwise).
BODY_TIMEOUT = 10.0


class _MalformedRequests(logging.Filter):
    """aiohttp logs every request its parser refuses (a 400) as an ERROR with a traceback and the offending bytes.

    Anyone who can connect could fill the journal that way, and the bytes may hold an ``Authorization`` header.
    Such records become one WARNING line per ``every`` seconds, naming only the error class and the count; errors
    raised in a handler (500s) pass through unchanged.
    """

    def __init__(self, every: float = 60.0) -> None:
        super().__init__()
        self.every = every
        self.last = -math.inf
        self.dropped = 0

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError) or not 400 <= (exc.code or 500) < 500:
            return True
        now = time.monotonic()
        if now - self.last < self.every:
            self.dropped += 1
            return False
        record.msg = "refused a malformed request (%s, %d); %d more since the last such line"
        record.args = (type(exc).__name__, exc.code, self.dropped)
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        self.last, self.dropped = now, 0
        return True


#: The logger of the HTTP server (pass as ``logger=`` with :data:`HTTP_LIMITS`).
HTTP_LOG = logging.getLogger("honestyd.http")
HTTP_LOG.addFilter(_MalformedRequests())

#: Descriptors kept from the HTTP connections for the rest of the daemon (at least; a quarter of the limit when
#: that is more): the store's database, WAL and shared-memory files on each connection, the logs an ingest pass
#: opens, the watcher's inotify descriptor, verification's outbound connections, the model cache, the journal.
RESERVED_FDS = 128
#: Seconds between two looks for room while the server holds all the connections it may.
ROOM_POLL = 0.01
#: Seconds before accept() is tried again after it failed (out of descriptors or memory, or anything else).
ACCEPT_RETRY = 1.0


def connection_budget(soft_limit: int) -> int:
    """The most connections the server may hold under a soft descriptor limit of ``soft_limit``."""
    return max(1, soft_limit - max(RESERVED_FDS, soft_limit // 4))


def descriptor_limit() -> int:
    """This process's soft RLIMIT_NOFILE (unlimited read as 2^20)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


class ConnectionLimit:
    """Accepts the connections of an aiohttp server itself, never holding more than ``most()`` open at once.

    asyncio's server accepts every connection offered: idle connections took every descriptor, and then each
    failed ``accept()`` logged a traceback and was retried, the store, the logs and the watcher unable to open
    theirs meanwhile. Here, once ``most()`` are open, nothing more is accepted until one closes: new connections
    wait in the kernel's listen queue (and beyond it, their clients retry), and are served in turn. An accept()
    that fails anyway is one line and a second's pause, never a busy loop. :meth:`take_over` the sites' sockets
    once they listen; :meth:`stop` before the sites close.
    """

    def __init__(self, server: web.Server, most: Callable[[], int]) -> None:
        self.server = server
        self.most = most
        #: Times the server reached the cap (an episode ends when a tenth of it is free again).
        self.full = 0
        self._full_since: float | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._sockets: list[socket.socket] = []

    def take_over(self, sockets: Iterable[Any]) -> None:
        """Accept on ``sockets`` (listening, e.g. a started site's) from now on, instead of asyncio's server."""
        loop = asyncio.get_running_loop()
        for listening in sockets:
            loop.remove_reader(listening.fileno())  # asyncio's own accept() on it stops here
            sock = listening.dup()  # a socket object to accept on (asyncio lends out only a wrapper of its own)
            sock.setblocking(False)
            self._sockets.append(sock)
            self._tasks.append(loop.create_task(self._accept(sock)))

    async def stop(self) -> None:
        """Stop accepting (the sites still close their own sockets)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for sock in self._sockets:
            sock.close()
        self._tasks, self._sockets = [], []

    def has_room(self) -> bool:
        """Whether one more connection may be accepted now (logs the start and end of each episode at the cap)."""
        most, open_ = self.most(), len(self.server.connections)
        if open_ >= most:
            if self._full_since is None:
                self._full_since = time.monotonic()
                self.full += 1
                HTTP_LOG.warning("holding %d connections, the most [api] max_connections allows: new ones wait to be"
                                 " accepted", open_)
            return False
        if self._full_since is not None and open_ <= most - max(1, most // 10):
            HTTP_LOG.info("accepting connections at once again after %.1f s at the cap",
                          time.monotonic() - self._full_since)
            self._full_since = None
        return True

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self.has_room():
                await asyncio.sleep(ROOM_POLL)
                continue
            try:
                conn, _ = await loop.sock_accept(sock)
            except ConnectionAbortedError:
                continue  # the client gave up before it was accepted
            except OSError as exc:
                HTTP_LOG.error("cannot accept connections: %s; trying again in %g s", exc.strerror or exc,
                               ACCEPT_RETRY)
                await asyncio.sleep(ACCEPT_RETRY)
                continue
            try:
                await loop.connect_accepted_socket(self.server, conn)
            except Exception as exc:  # gone before its transport was made: whatever it was, accepting goes on
                HTTP_LOG.debug("accepted connection lost at once: %r", exc)
                conn.close()


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, ensure_ascii=False))


#: Lists longer than this are encoded an element at a time (see :func:`_dumps`).
_PIECEWISE = 64


def _dumps(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)``, the same text, with long lists encoded an element at a time.

    The C encoder holds the GIL for the whole of one call, and a call over a 30-day audit (thousands of rows)
    kept the event loop, /healthz included, from running until it returned; between elements it can run.
    """
    if isinstance(value, list) and len(value) > _PIECEWISE:
        return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) for k in value) and any(
            isinstance(v, list) and len(v) > _PIECEWISE for v in value.values()):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {_dumps(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def _json_bytes(data: Any) -> bytes:
    """``data`` as the body :func:`_json` would send (for bodies built off the loop)."""
    return _dumps(data).encode("utf-8")


def _json_body(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json", charset="utf-8")


#: The executor request work runs on (None: the loop's default): audits, history and pages take long enough to
#: stall every other request, /healthz and /metrics included, if built on the loop.
EXECUTOR: web.AppKey[Executor | None] = web.AppKey("executor")
T = TypeVar("T")


async def _off_loop(request: web.Request, fn: Callable[[], T]) -> T:
    """``fn()`` on the request executor."""
    return await asyncio.get_running_loop().run_in_executor(request.app[EXECUTOR], fn)


#: Seconds a request refused for want of a slot is asked to wait (``Retry-After``).
RETRY_AFTER = 1
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _Slots:
    """The audits, histories and pages being answered, counted: one beyond ``[api] max_concurrent_audits`` is
    answered 429 at once rather than queued, so a crowd of them cannot hold the worker threads, the scoring
    model's lock and the memory of every queued answer while /healthz, /metrics and ingest wait."""

    def __init__(self) -> None:
        self.busy = 0


SLOTS: web.AppKey[_Slots] = web.AppKey("slots", _Slots)


def capped(handler: Handler) -> Handler:
    """``handler`` behind the slots: checked without waiting, 429 with ``Retry-After`` when all are taken."""

    @functools.wraps(handler)
    async def within_slots(request: web.Request) -> web.StreamResponse:
        slots, most = request.app[SLOTS], request.app[BACKEND].config.api.max_concurrent_audits
        if slots.busy >= most:
            busy = _error(429, f"{most} audits, histories or pages are being answered ([api] max_concurrent_audits);"
                               f" retry in {RETRY_AFTER} s")
            busy.headers["Retry-After"] = str(RETRY_AFTER)
            return busy
        slots.busy += 1
        try:
            return await handler(request)
        finally:
            slots.busy -= 1

    return within_slots


def _error(status: int, message: str, **extra: Any) -> web.Response:
    return _json({"error": message, **extra}, status=status)


def _snapshot(request: web.Request) -> Snapshot:
    snap = request.app[BACKEND].snapshot
    if snap is None:
        raise web.HTTPServiceUnavailable(text="no evaluation yet")
    return snap


def _window(request: web.Request, snap: Snapshot) -> WindowResult:
    name = request.query.get("window", next(iter(snap.windows)))
    if name not in snap.windows:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"unknown window {name!r}", "allowed": list(snap.windows)}),
            content_type="application/json",
        )
    return snap.windows[name]


def _agent(request: web.Request, result: WindowResult) -> str:
    agent = request.match_info["agent"]
    if agent not in result.agents:
        raise web.HTTPNotFound(
            text=json.dumps({"error": f"unknown agent {agent!r}"}), content_type="application/json"
        )
    return agent


class _MetricsCache:
    """The ``/metrics`` body, rendered once per snapshot instead of once per scrape, and incrementally.

    The body is a pure function of the snapshot (see daemon/metrics.py: no I/O, no clock), and a snapshot is
    immutable and swapped in whole, so the same snapshot object always renders the same bytes: concurrent scrapes
    of one snapshot share one render (docs/performance.md has what rendering per scrape cost).
    :class:`~daemon.metrics.SnapshotRenderer` re-renders only the agents whose results changed since the last body.
    """

    def __init__(self) -> None:
        from daemon.metrics import SnapshotRenderer

        self.snapshot: Snapshot | None = None
        self.renderer = SnapshotRenderer()
        self.rendered: tuple[bytes, str] = (b"", "")

    def get(self, backend: Backend) -> tuple[bytes, str]:
        from daemon.metrics import CONTENT_TYPE

        snap = backend.snapshot
        if snap is None or snap is not self.snapshot:
            self.rendered, self.snapshot = (self.renderer.exposition(snap), CONTENT_TYPE), snap
        return self.rendered


METRICS_CACHE: web.AppKey[_MetricsCache] = web.AppKey("metrics_cache", _MetricsCache)


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text exposition of the latest snapshot."""
    body, content_type = request.app[METRICS_CACHE].get(request.app[BACKEND])
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = content_type
    return resp


async def healthz(request: web.Request) -> web.Response:
    """Liveness: the event loop answers."""
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    """Readiness: a first evaluation exists, and the store it reads is sound and in place (see ``unready``)."""
    backend = request.app[BACKEND]
    if backend.snapshot is None:
        return web.Response(status=503, text="starting\n")
    if backend.unready is not None:
        return web.Response(status=503, text=f"{backend.unready}\n")
    return web.Response(text="ready\n")


async def list_agents(request: web.Request) -> web.Response:
    """Every agent's score in every window."""
    snap = _snapshot(request)
    agents: dict[str, dict[str, Any]] = {}
    for window, result in snap.windows.items():
        for name, a in result.agents.items():
            agents.setdefault(name, {})[window] = {
                "score": a.score, "percent": a.percent, "insufficient": a.insufficient, "decisions": a.decisions,
                "weights_version": a.weights_version, "audit": pages.agent_href(name, window),
            }
    return _json({"at": format_ts(snap.at), "weights_version": snap.config.weights_active, "agents": agents})


async def agent_score(request: web.Request) -> web.Response:
    """One agent in one window, as ``honestyd score --json`` gives it."""
    snap = _snapshot(request)
    result = _window(request, snap)
    agent = _agent(request, result)
    data = to_json(result)
    return _json({"at": data["at"], "window": result.window, "agent": agent, **data["agents"][agent]})


async def _audited(request: web.Request) -> tuple[AgentResult, WindowResult, Snapshot]:
    """The requested agent's result with its audit rows, and the window result it belongs to."""
    snap = _snapshot(request)
    result = _window(request, snap)
    agent = _agent(request, result)
    found = await request.app[BACKEND].audit(agent, result.window)
    if found is None:  # gone from the model since the snapshot: show the snapshot's numbers, without rows
        return result.agents[agent], result, snap
    at, audited = found
    # The rows are built now, from the model as of its last evaluation: label them with that time.
    return audited, replace(result, at=at, agents={**result.agents, agent: audited}), snap


async def agent_audit(request: web.Request) -> web.Response:
    """The audit of one agent in one window: every decision, every outcome, the arithmetic."""
    audited, result, _ = await _audited(request)
    return _json_body(await _off_loop(request, lambda: _audit_body(audited, result)))


def _audit_body(audited: AgentResult, result: WindowResult) -> bytes:
    """``audit_json``'s body, each row encoded as it is built: thousands of rows held at once were what the garbage
    collector's full collections walked again and again while audits ran (the loop waiting for each)."""
    head = _dumps(audit_summary(audited, result))
    rows = ", ".join(json.dumps(row, ensure_ascii=False) for row in audit_rows(audited))
    return f'{head[:-1]}, "decision_rows": [{rows}]}}'.encode()


async def agent_history(request: web.Request) -> web.Response:
    """An agent's daily scores in one window under any weights version (stored counts, re-weighted)."""
    backend = request.app[BACKEND]
    snap = _snapshot(request)
    result = _window(request, snap)
    agent = request.match_info["agent"]
    counts = await backend.history(agent)
    if agent not in result.agents and not counts:
        return _error(404, f"unknown agent {agent!r}")
    cfg = backend.config
    version = request.query.get("weights", cfg.weights_for(agent)[0])
    if version not in cfg.weights_versions:
        return _error(400, f"unknown weights version {version!r}", allowed=sorted(cfg.weights_versions))

    def render() -> bytes:
        points = [p for p in render_history(counts, cfg.weights_versions[version], cfg.scoring.min_decisions)
                  if p.window == result.window]
        return _json_bytes({"agent": agent, "window": result.window, "weights_version": version, "points": [
            {"day": p.day.isoformat(), "decisions": p.decisions, "score": p.score, "percent": p.percent,
             "coverage": p.coverage} for p in points]})

    return _json_body(await _off_loop(request, render))


async def agent_page(request: web.Request) -> web.Response:
    """The HTML audit page a Grafana panel links to."""
    audited, result, snap = await _audited(request)
    return web.Response(text=await _off_loop(request, lambda: pages.audit_page(audited, result, snap)),
                        content_type="text/html")


async def index(request: web.Request) -> web.Response:
    """All agents, all windows."""
    snap = _snapshot(request)
    return web.Response(text=await _off_loop(request, lambda: pages.index_page(snap)), content_type="text/html")


async def methodology(request: web.Request) -> web.Response:
    """The formula, the weights side by side, and the changelog."""
    backend = request.app[BACKEND]
    snap, config = backend.snapshot, backend.config

    def render() -> str:
        agents = sorted({a for w in snap.windows.values() for a in w.agents}) if snap else []
        return pages.methodology_page(config, agents, backend.changelog_text())

    return web.Response(text=await _off_loop(request, render), content_type="text/html")


def _is_text(value: str) -> bool:
    """False for a string holding a lone surrogate (a "\\ud800" escape): it cannot be written as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reviewer(request: web.Request) -> str | web.Response:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return _error(401, "a reviewer bearer token is required")
    found = None
    # Compare against every token in constant time, so timing does not reveal a prefix.
    for known, reviewer in request.app[BACKEND].reviewers().items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = reviewer
    return found if found is not None else _error(403, "token not authorised")


async def _read_body(request: web.Request, most: int) -> bytes:
    """The body up to ``most`` bytes. ``content.read(n)`` returns whatever has arrived, so a body that comes
    in several TCP segments needs a loop (one read would see a truncated body and answer 400)."""
    chunks: list[bytes] = []
    size = 0
    while size < most:
        chunk = await request.content.read(most - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


async def _unknown_decision(backend: Backend, decision: str) -> web.Response | None:
    """404 for an id no stored record carries (a typo would sit in labels/api.jsonl for good, labelling nothing);
    503 while the daemon cannot tell yet; None for a decision it knows."""
    known = await backend.knows_decision(decision)
    if known is None:
        return _error(503, "starting: the decisions are not loaded yet; try again shortly")
    if not known:
        return _error(404, f"unknown decision {decision!r}: honestyd has stored no record with this id",
                      decision=decision)
    return None


def _label_body(raw: bytes, reviewer: str, now: datetime) -> tuple[str, str, datetime] | web.Response:
    """The (decision, value, ts) of a label request's body, or the 400/403 answer it gets."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return _error(400, "body must be a JSON object")
    if not isinstance(body, dict):
        return _error(400, "body must be a JSON object")
    unknown = sorted(set(body) - {"decision", "value", "ts", "reviewer"})
    if unknown:
        return _error(400, f"unknown field {unknown[0]!r}")
    decision, value = body.get("decision"), body.get("value")
    if not isinstance(decision, str) or not decision or len(decision) > 1000 or not _is_text(decision):
        return _error(400, "decision must be a non-empty decision id")
    if value not in LABEL_VALUES:
        return _error(400, "value must be 'up' or 'down'")
    if body.get("reviewer", reviewer) != reviewer:
        return _error(403, "a token may only label as its own reviewer")
    ts = now
    if "ts" in body:
        try:
            ts = parse_ts(body["ts"])
        except TimestampError:
            return _error(400, "ts must be an RFC 3339 timestamp with an offset")
    return decision, str(value), ts


async def post_label(request: web.Request) -> web.Response:
    """A 👍/👎 from an authorised reviewer, appended to ``labels/api.jsonl``."""
    backend = request.app[BACKEND]
    reviewer = _reviewer(request)
    if isinstance(reviewer, web.Response):
        return reviewer
    limit = backend.config.api.max_body
    if request.content_length is not None and request.content_length > limit:
        return _error(413, f"body larger than {limit} bytes")
    try:
        async with asyncio.timeout(BODY_TIMEOUT):  # a slow sender must not hold a handler forever
            raw = await _read_body(request, limit + 1)
    except TimeoutError:
        timed_out = _error(408, f"body not received within {BODY_TIMEOUT:g} s")
        timed_out.force_close()  # the rest of the body may still come: do not read it as the next request
        return timed_out
    if len(raw) > limit:
        return _error(413, f"body larger than {limit} bytes")
    parsed = _label_body(raw, reviewer, backend.now())
    if isinstance(parsed, web.Response):
        return parsed
    decision, value, ts = parsed
    refused = await _unknown_decision(backend, decision)
    if refused is not None:
        return refused
    label = {"ts": format_ts(ts), "decision": decision, "value": value, "reviewer": reviewer}
    try:
        await backend.append_label(label)
    except OSError as exc:  # refused (daemon/safefile.py: a symlink, FIFO or device there) or failed: never a 201
        return _error(500, f"label not written: {exc.filename}: {exc.strerror}", path=str(exc.filename))
    return _json({"ok": True, "label": label}, status=201)


async def openapi_document(request: web.Request) -> web.Response:
    """The OpenAPI 3.0 description of this API (windows and weights versions from the config in force)."""
    return _json(openapi.document(request.app[BACKEND].config))


#: The ``{agent}`` path segment: any character but ``/`` (sent as %2F). aiohttp's default, ``[^{}/]+``, refused names
#: holding a brace, so the index linked ``{{7*7}}`` to a 404.
AGENT = "{agent:[^/]+}"


def make_app(backend: Backend, *, executor: Executor | None = None) -> web.Application:
    """The aiohttp application with every route; ``executor`` runs the request work (None: the loop's default)."""
    app = web.Application(client_max_size=max(backend.config.api.max_body, 1024))
    app[BACKEND] = backend
    app[METRICS_CACHE] = _MetricsCache()
    app[EXECUTOR] = executor
    app[SLOTS] = _Slots()
    routes: list[tuple[str, str, Handler]] = [
        ("GET", "/metrics", metrics),
        ("GET", "/healthz", healthz),
        ("GET", "/readyz", readyz),
        ("GET", "/", capped(index)),
        ("GET", "/methodology", capped(methodology)),
        ("GET", "/v1/agents", list_agents),
        ("GET", f"/v1/agents/{AGENT}", agent_score),
        ("GET", f"/v1/agents/{AGENT}/audit", capped(agent_audit)),
        ("GET", f"/v1/agents/{AGENT}/history", capped(agent_history)),
        ("GET", f"/agents/{AGENT}", capped(agent_page)),
        ("POST", "/v1/labels", post_label),
        ("GET", "/openapi.json", openapi_document),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    return app
