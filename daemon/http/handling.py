"""What every HTTP handler shares: JSON answers and errors, the lookups of a request, the executor, the slots.

A handler finds the snapshot, window and agent it answers about with :func:`current_snapshot`,
:func:`window_of` and :func:`agent_of` (each raises the documented 503/400/404), builds anything long with
:func:`off_loop`, and a heavy route is wrapped in :func:`capped`.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable
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


def json_body(body: bytes) -> web.Response:
    """A JSON answer of a body encoded already (by :func:`json_bytes`, off the loop)."""
    return web.Response(body=body, content_type="application/json", charset="utf-8")


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
