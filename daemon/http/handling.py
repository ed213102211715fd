"""What every HTTP handler shares: JSON answers and errors, the lookups of a request, the executor, the slots.

A handler finds the snapshot, window and agent it answers about with :func:`current_snapshot`,
:func:`window_of` and :func:`agent_of` (each raises the documented 503/400/404), builds anything long with
:func:`off_loop`, and a heavy route is wrapped in :func:`capped`.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from typing import Any, TypeVar

from aiohttp import web

from daemon.http.backend import BACKEND
from daemon.snapshot import Snapshot
from scorers.score import AgentResult, WindowResult

T = TypeVar("T")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

#: Lists longer than this are encoded an element at a time (see :func:`dumps`).
_PIECEWISE = 64


def dumps(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)``, the same text, with long lists encoded an element at a time.

    The C encoder holds the GIL for the whole of one call, and a call over a 30-day audit (thousands of rows)
    kept the event loop, /healthz included, from running until it returned; between elements it can run.
    """
    if isinstance(value, list) and len(value) > _PIECEWISE:
        return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) for k in value) and any(
            isinstance(v, list) and len(v) > _PIECEWISE for v in value.values()):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {dumps(v)}" for k, v in value.items()) + "}"
    return json.dumps(value, ensure_ascii=False)


def json_response(data: Any, status: int = 200) -> web.Response:
    """``data`` as a JSON answer (UTF-8, not ASCII-escaped)."""
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, ensure_ascii=False))


def json_bytes(data: Any) -> bytes:
    """``data`` as the body :func:`json_response` would send (for bodies built off the loop)."""
    return dumps(data).encode("utf-8")


#: Bytes of a large answer handed to the transport per turn of the event loop (see :func:`send_parts`).
SEND_CHUNK = 256 * 1024


async def send_json(request: web.Request, body: bytes | bytearray) -> web.StreamResponse:
    """A JSON answer of a body encoded already (by :func:`json_bytes`, off the loop), sent as :func:`send_parts`."""
    view = memoryview(body)
    return await send_parts(request, [view[at:at + SEND_CHUNK] for at in range(0, len(body), SEND_CHUNK)],
                            "application/json; charset=utf-8")


async def send_parts(request: web.Request, parts: Sequence[bytes | memoryview], content_type: str
                     ) -> web.StreamResponse:
    """The body the ``parts`` make, joined, sent a chunk (of :data:`SEND_CHUNK` or so) per turn of the loop: a 30-day
    audit or a 1,000-agent /metrics body is megabytes, whose copies into the socket and the transport's buffer in one
    step kept /healthz and /metrics waiting (docs/performance.md), and held a second copy of the body per answer
    under way. Each write returns once the transport's buffer is down to its low mark; only a chunk is joined at a
    time. The same bytes and headers as a plain response of the whole body."""
    resp = web.StreamResponse(headers={"Content-Type": content_type})
    resp.content_length = sum(map(len, parts))
    await resp.prepare(request)
    chunk: list[bytes | memoryview] = []
    size = 0
    for part in parts:
        chunk.append(part)
        size += len(part)
        if size >= SEND_CHUNK:
            await _write(resp, chunk)
            chunk, size = [], 0
    if chunk:
        await _write(resp, chunk)
    await resp.write_eof()
    return resp


async def _write(resp: web.StreamResponse, chunk: list[bytes | memoryview]) -> None:
    await resp.write(chunk[0] if len(chunk) == 1 else b"".join(chunk))
    await asyncio.sleep(0)  # a write that did not fill the buffer does not yield by itself


def error(status: int, message: str, **extra: Any) -> web.Response:
    """A JSON error answer: ``{"error": message, **extra}``."""
    return json_response({"error": message, **extra}, status=status)


#: The executor request work runs on (None: the loop's default): audits, history and pages take long enough to
#: stall every other request, /healthz and /metrics included, if built on the loop.
EXECUTOR: web.AppKey[Executor | None] = web.AppKey("executor")


async def off_loop(request: web.Request, fn: Callable[[], T]) -> T:
    """``fn()`` on the request executor."""
    return await asyncio.get_running_loop().run_in_executor(request.app[EXECUTOR], fn)


#: Seconds a request refused for want of a slot is asked to wait (``Retry-After``).
RETRY_AFTER = 1


class Slots:
    """The audits, histories and pages being answered, counted: one beyond ``[api] max_concurrent_audits`` is
    answered 429 at once rather than queued, so a crowd of them cannot hold the worker threads, the scoring
    model's lock and the memory of every queued answer while /healthz, /metrics and ingest wait."""

    def __init__(self) -> None:
        self.busy = 0


SLOTS: web.AppKey[Slots] = web.AppKey("slots", Slots)


def capped(handler: Handler) -> Handler:
    """``handler`` behind the slots: checked without waiting, 429 with ``Retry-After`` when all are taken."""

    @functools.wraps(handler)
    async def within_slots(request: web.Request) -> web.StreamResponse:
        slots, most = request.app[SLOTS], request.app[BACKEND].config.api.max_concurrent_audits
        if slots.busy >= most:
            busy = error(429, f"{most} audits, histories or pages are being answered ([api] max_concurrent_audits);"
                              f" retry in {RETRY_AFTER} s")
            busy.headers["Retry-After"] = str(RETRY_AFTER)
            return busy
        slots.busy += 1
        try:
            return await handler(request)
        finally:
            slots.busy -= 1

    return within_slots


def current_snapshot(request: web.Request) -> Snapshot:
    """The latest snapshot; 503 before the first evaluation."""
    snap = request.app[BACKEND].snapshot
    if snap is None:
        raise web.HTTPServiceUnavailable(text="no evaluation yet")
    return snap


def window_of(request: web.Request, snap: Snapshot) -> WindowResult:
    """The result of the ``window`` the query names (default: the first configured); 400 for an unknown one."""
    name = request.query.get("window", next(iter(snap.windows)))
    if name not in snap.windows:
        raise web.HTTPBadRequest(
            text=json.dumps({"error": f"unknown window {name!r}", "allowed": list(snap.windows)}),
            content_type="application/json",
        )
    return snap.windows[name]


def agent_of(request: web.Request, result: WindowResult) -> str:
    """The ``{agent}`` of the path, listed in ``result``; 404 otherwise."""
    agent = request.match_info["agent"]
    if agent not in result.agents:
        raise web.HTTPNotFound(
            text=json.dumps({"error": f"unknown agent {agent!r}"}), content_type="application/json"
        )
    return agent


async def audited(request: web.Request) -> tuple[AgentResult, WindowResult, Snapshot]:
    """The requested agent's result with its audit rows, and the window result it belongs to."""
    snap = current_snapshot(request)
    result = window_of(request, snap)
    agent = agent_of(request, result)
    found = await request.app[BACKEND].audit(agent, result.window)
    if found is None:  # gone from the model since the snapshot: show the snapshot's numbers, without rows
        return result.agents[agent], result, snap
    at, audited_result = found
    # The rows are built now, from the model as of its last evaluation: label them with that time.
    return audited_result, replace(result, at=at, agents={**result.agents, agent: audited_result}), snap


#: A request body (POST /v1/labels, the review and alert POSTs) must arrive within this many seconds (408 otherwise).
BODY_TIMEOUT = 10.0


def bearer_owner(request: web.Request, tokens: Mapping[str, str], what: str) -> str | web.Response:
    """Whose the request's bearer token is among ``tokens`` ({token: owner}): 401 without one, 403 for another.

    Compared against every token in constant time, so timing does not reveal a prefix."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        return error(401, f"{what} bearer token is required")
    found = None
    for known, owner in tokens.items():
        if hmac.compare_digest(known.encode(), token.encode()):
            found = owner
    return found if found is not None else error(403, "token not authorised")


async def _read_upto(request: web.Request, most: int) -> bytes:
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


async def limited_body(request: web.Request, limit: int) -> bytes | web.Response:
    """The whole body, at most ``limit`` bytes (413 beyond), arrived within :data:`BODY_TIMEOUT` (408 otherwise)."""
    if request.content_length is not None and request.content_length > limit:
        return error(413, f"body larger than {limit} bytes")
    try:
        async with asyncio.timeout(BODY_TIMEOUT):  # a slow sender must not hold a handler forever
            raw = await _read_upto(request, limit + 1)
    except TimeoutError:
        timed_out = error(408, f"body not received within {BODY_TIMEOUT:g} s")
        timed_out.force_close()  # the rest of the body may still come: do not read it as the next request
        return timed_out
    if len(raw) > limit:
        return error(413, f"body larger than {limit} bytes")
    return raw
