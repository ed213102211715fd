"""The JSON API (``/v1/…``, ``/openapi.json``) and the operational endpoints (``/metrics``, ``/healthz``, ``/readyz``).

Reads come from the latest in-memory snapshot only. ``POST /v1/labels`` appends to ``labels/api.jsonl`` under the
state root (through the backend), so that files stay the source of truth; the review queue's routes are
daemon/http/reviews.py's.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from aiohttp import web

from collectors.jsonl import LABEL_VALUES
from collectors.rfc3339 import TimestampError, format_ts, parse_ts
from daemon import heap
from daemon.http import openapi
from daemon.http.backend import BACKEND, Backend
from daemon.http.handling import (
    agent_of,
    audited,
    bearer_owner,
    current_snapshot,
    dumps,
    error,
    json_bytes,
    json_response,
    limited_body,
    off_loop,
    send_json,
    send_parts,
    window_of,
)
from daemon.http.urls import agent_href
from daemon.snapshot import Snapshot
from scorers.audit import audit_rows, audit_summary
from scorers.history import history_points
from scorers.score import AgentResult, WindowResult, to_json

if TYPE_CHECKING:
    from daemon.metrics import Body

#: Agents' lines written by one render from which the heap is trimmed after it: a fleet's first render (a render after
#: an append writes the few agents it changed).
TRIM_AFTER = 256


class MetricsCache:
    """The ``/metrics`` body (as its parts: daemon/metrics.py's ``Body``), rendered once per snapshot instead of once
    per scrape, and incrementally.

    The body is a pure function of the snapshot (see daemon/metrics.py: no I/O, no clock), and a snapshot is
    immutable and swapped in whole, so the same snapshot object always renders the same bytes: concurrent scrapes
    of one snapshot share one render (docs/performance.md has what rendering per scrape cost).
    :class:`~daemon.metrics.SnapshotRenderer` re-renders only the agents whose results changed since the last body.
    With an ``executor`` the render runs there, not on the event loop: a 1,000-agent body takes milliseconds to
    render, which /healthz and every other request would wait out (more while audits hold the GIL).

    A render that wrote at least ``trim_after`` agents' lines (the first, at a daemon's start, or after a reload) left
    a burst of them freed below what the model holds, once joined into blocks: ``trim`` gives their pages back
    (daemon/heap.py).
    """

    def __init__(self, executor: Executor | None = None, *, trim_after: int = TRIM_AFTER,
                 trim: Callable[[], bool] = heap.trim) -> None:
        from daemon.metrics import SnapshotRenderer

        self.executor = executor
        self.renderer = SnapshotRenderer()
        self.trim_after, self.trim = trim_after, trim
        #: (snapshot, its body) of the last render; first, a token no backend holds (no snapshot, None, is one).
        self.latest: tuple[object, Body] = (object(), ())
        self._pending: tuple[Snapshot | None, asyncio.Future[Body]] | None = None
        self._lock = threading.Lock()  # the renderer is incremental: one render at a time, whatever the thread

    def render(self, snap: Snapshot | None) -> Body:
        """The body of ``snap`` (any thread)."""
        with self._lock:
            if self.latest[0] is not snap:
                self.latest = (snap, self.renderer.parts(snap))
                if self.renderer.rendered >= self.trim_after:
                    self.trim()
            return self.latest[1]

    async def get(self, backend: Backend) -> tuple[Body, str]:
        """The body of the backend's snapshot and its content type: rendered on the executor when it is new, one
        render shared by the scrapes that ask meanwhile."""
        from daemon.metrics import CONTENT_TYPE

        snap = backend.snapshot
        latest = self.latest
        if latest[0] is snap:
            return latest[1], CONTENT_TYPE
        if self.executor is None:
            return self.render(snap), CONTENT_TYPE
        return await asyncio.shield(self._rendering(snap)), CONTENT_TYPE

    def prefetch(self, snap: Snapshot | None) -> None:
        """Start rendering ``snap`` on the executor (from the event loop) for the scrapes to come: the daemon's start
        asks for its first snapshot's, every agent's lines, while HTTP and the watcher start. No executor: nothing."""
        if self.executor is not None and self.latest[0] is not snap:
            self._rendering(snap)

    def _rendering(self, snap: Snapshot | None) -> asyncio.Future[Body]:
        pending = self._pending
        if pending is None or pending[0] is not snap:
            assert self.executor is not None
            pending = (snap, asyncio.get_running_loop().run_in_executor(self.executor, self.render, snap))
            self._pending = pending
        return pending[1]


METRICS_CACHE: web.AppKey[MetricsCache] = web.AppKey("metrics_cache", MetricsCache)


async def metrics(request: web.Request) -> web.StreamResponse:
    """Prometheus text exposition of the latest snapshot (megabytes at 1,000 agents: sent a chunk at a time)."""
    body, content_type = await request.app[METRICS_CACHE].get(request.app[BACKEND])
    return await send_parts(request, body, content_type)


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
    snap = current_snapshot(request)
    agents: dict[str, dict[str, Any]] = {}
    for window, result in snap.windows.items():
        for name, a in result.agents.items():
            agents.setdefault(name, {})[window] = {
                "score": a.score, "percent": a.percent, "insufficient": a.insufficient, "decisions": a.decisions,
                "weights_version": a.weights_version, "audit": agent_href(name, window),
            }
    return json_response({"at": format_ts(snap.at), "weights_version": snap.config.weights_active, "agents": agents})


async def agent_score(request: web.Request) -> web.Response:
    """One agent in one window, as ``honestyd score --json`` gives it."""
    snap = current_snapshot(request)
    result = window_of(request, snap)
    agent = agent_of(request, result)
    data = to_json(result)
    return json_response({"at": data["at"], "window": result.window, "agent": agent, **data["agents"][agent]})


async def agent_audit(request: web.Request) -> web.StreamResponse:
    """The audit of one agent in one window: every decision, every outcome, the arithmetic."""
    a, result, _ = await audited(request)
    return await send_json(request, await off_loop(request, lambda: _audit_body(a, result)))


def _audit_body(audited: AgentResult, result: WindowResult) -> bytearray:
    """``audit_json``'s body, each row encoded as it is built: thousands of rows held at once were what the garbage
    collector's full collections walked again and again while audits ran (the loop waiting for each). The rows go
    into one buffer as they come: a 30-day audit's rows joined as strings, then encoded, held its ~4 MB four times
    over (a peak of ~33 MB each, docs/performance.md)."""
    head = dumps(audit_summary(audited, result))
    body = bytearray(head[:-1].encode())
    body += b', "decision_rows": ['
    for k, row in enumerate(audit_rows(audited)):
        if k:
            body += b", "
        body += json.dumps(row, ensure_ascii=False).encode()
    body += b"]}"
    return body


async def agent_history(request: web.Request) -> web.StreamResponse:
    """An agent's daily scores in one window under any weights version (stored counts, re-weighted)."""
    backend = request.app[BACKEND]
    snap = current_snapshot(request)
    result = window_of(request, snap)
    agent = request.match_info["agent"]
    counts = await backend.history(agent)
    if agent not in result.agents and not counts:
        return error(404, f"unknown agent {agent!r}")
    cfg = backend.config
    version = request.query.get("weights", cfg.weights_for(agent)[0])
    if version not in cfg.weights_versions:
        return error(400, f"unknown weights version {version!r}", allowed=sorted(cfg.weights_versions))

    def history_json() -> bytes:
        points = [p for p in history_points(counts, cfg.weights_versions[version], cfg.scoring.min_decisions)
                  if p.window == result.window]
        return json_bytes({"agent": agent, "window": result.window, "weights_version": version, "points": [
            {"day": p.day.isoformat(), "decisions": p.decisions, "score": p.score, "percent": p.percent,
             "coverage": p.coverage} for p in points]})

    return await send_json(request, await off_loop(request, history_json))


def is_text(value: str) -> bool:
    """False for a string holding a lone surrogate (a "\\ud800" escape): it cannot be written as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _reviewer(request: web.Request) -> str | web.Response:
    return bearer_owner(request, request.app[BACKEND].reviewers(), "a reviewer")


async def _unknown_decision(backend: Backend, decision: str) -> web.Response | None:
    """404 for an id no stored record carries (a typo would sit in labels/api.jsonl for good, labelling nothing);
    503 while the daemon cannot tell yet; None for a decision it knows."""
    known = await backend.knows_decision(decision)
    if known is None:
        return error(503, "starting: the decisions are not loaded yet; try again shortly")
    if not known:
        return error(404, f"unknown decision {decision!r}: honestyd has stored no record with this id",
                     decision=decision)
    return None


def _label_body(raw: bytes, reviewer: str, now: datetime) -> tuple[str, str, datetime] | web.Response:
    """The (decision, value, ts) of a label request's body, or the 400/403 answer it gets."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return error(400, "body must be a JSON object")
    if not isinstance(body, dict):
        return error(400, "body must be a JSON object")
    unknown = sorted(set(body) - {"decision", "value", "ts", "reviewer"})
    if unknown:
        return error(400, f"unknown field {unknown[0]!r}")
    decision, value = body.get("decision"), body.get("value")
    if not isinstance(decision, str) or not decision or len(decision) > 1000 or not is_text(decision):
        return error(400, "decision must be a non-empty decision id")
    if value not in LABEL_VALUES:
        return error(400, "value must be 'up' or 'down'")
    if body.get("reviewer", reviewer) != reviewer:
        return error(403, "a token may only label as its own reviewer")
    ts = now
    if "ts" in body:
        try:
            ts = parse_ts(body["ts"])
        except TimestampError:
            return error(400, "ts must be an RFC 3339 timestamp with an offset")
    return decision, str(value), ts


async def post_label(request: web.Request) -> web.Response:
    """A 👍/👎 from an authorised reviewer, appended to ``labels/api.jsonl``."""
    backend = request.app[BACKEND]
    reviewer = _reviewer(request)
    if isinstance(reviewer, web.Response):
        return reviewer
    raw = await limited_body(request, backend.config.api.max_body)
    if isinstance(raw, web.Response):
        return raw
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
        return error(500, f"label not written: {exc.filename}: {exc.strerror}", path=str(exc.filename))
    return json_response({"ok": True, "label": label}, status=201)


async def openapi_document(request: web.Request) -> web.Response:
    """The OpenAPI 3.0 description of this API (windows and weights versions from the config in force)."""
    return json_response(openapi.document(request.app[BACKEND].config))
