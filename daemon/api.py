"""The HTTP API and pages (aiohttp): thin handlers that translate requests into pure calls.

Reads come from the latest in-memory snapshot only. The one write, ``POST /v1/labels``,
appends to ``labels/api.jsonl`` under the state root so that files stay the source of truth.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Protocol

from aiohttp import web
from prometheus_client import CollectorRegistry

from collectors.jsonl import LABEL_VALUES
from collectors.rfc3339 import TimestampError, format_ts, parse_ts
from daemon import pages
from daemon.config import Config
from daemon.snapshot import Snapshot
from scorers.audit import audit_json
from scorers.history import DayCounts
from scorers.history import render as render_history
from scorers.score import WindowResult, to_json


class Backend(Protocol):
    """What the handlers need from the running daemon."""

    @property
    def snapshot(self) -> Snapshot | None: ...

    @property
    def config(self) -> Config: ...

    @property
    def registry(self) -> CollectorRegistry: ...

    def reviewers(self) -> Mapping[str, str]: ...

    def now(self) -> datetime: ...

    def changelog_text(self) -> str: ...

    async def append_label(self, label: dict[str, str]) -> None: ...

    async def history(self, agent: str) -> list[DayCounts]: ...


BACKEND: web.AppKey[Backend] = web.AppKey("backend", Backend)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, ensure_ascii=False))


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


async def metrics(request: web.Request) -> web.Response:
    """Prometheus text exposition of the latest snapshot."""
    from daemon.metrics import render

    body, content_type = render(request.app[BACKEND].registry)
    resp = web.Response(body=body)
    resp.headers["Content-Type"] = content_type
    return resp


async def healthz(request: web.Request) -> web.Response:
    """Liveness: the event loop answers."""
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    """Readiness: a first evaluation exists."""
    if request.app[BACKEND].snapshot is None:
        return web.Response(status=503, text="starting\n")
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


async def agent_audit(request: web.Request) -> web.Response:
    """The audit of one agent in one window: every decision, every outcome, the arithmetic."""
    snap = _snapshot(request)
    result = _window(request, snap)
    agent = _agent(request, result)
    return _json(audit_json(result.agents[agent], result))


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
    points = [p for p in render_history(counts, cfg.weights_versions[version], cfg.scoring.min_decisions)
              if p.window == result.window]
    return _json({"agent": agent, "window": result.window, "weights_version": version, "points": [
        {"day": p.day.isoformat(), "decisions": p.decisions, "score": p.score, "percent": p.percent,
         "coverage": p.coverage} for p in points]})


async def agent_page(request: web.Request) -> web.Response:
    """The HTML audit page a Grafana panel links to."""
    snap = _snapshot(request)
    result = _window(request, snap)
    agent = _agent(request, result)
    return web.Response(text=pages.audit_page(result.agents[agent], result, snap), content_type="text/html")


async def index(request: web.Request) -> web.Response:
    """All agents, all windows."""
    return web.Response(text=pages.index_page(_snapshot(request)), content_type="text/html")


async def methodology(request: web.Request) -> web.Response:
    """The formula, the weights side by side, and the changelog."""
    backend = request.app[BACKEND]
    snap = backend.snapshot
    agents = sorted({a for w in snap.windows.values() for a in w.agents}) if snap else []
    return web.Response(
        text=pages.methodology_page(backend.config, agents, backend.changelog_text()), content_type="text/html"
    )


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


async def post_label(request: web.Request) -> web.Response:
    """A 👍/👎 from an authorised reviewer, appended to ``labels/api.jsonl``."""
    backend = request.app[BACKEND]
    reviewer = _reviewer(request)
    if isinstance(reviewer, web.Response):
        return reviewer
    limit = backend.config.api.max_body
    if request.content_length is not None and request.content_length > limit:
        return _error(413, f"body larger than {limit} bytes")
    raw = await request.content.read(limit + 1)
    if len(raw) > limit:
        return _error(413, f"body larger than {limit} bytes")
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
    if not isinstance(decision, str) or not decision or len(decision) > 1000:
        return _error(400, "decision must be a non-empty decision id")
    if value not in LABEL_VALUES:
        return _error(400, "value must be 'up' or 'down'")
    if body.get("reviewer", reviewer) != reviewer:
        return _error(403, "a token may only label as its own reviewer")
    ts = backend.now()
    if "ts" in body:
        try:
            ts = parse_ts(body["ts"])
        except TimestampError:
            return _error(400, "ts must be an RFC 3339 timestamp with an offset")
    label = {"ts": format_ts(ts), "decision": decision, "value": str(value), "reviewer": reviewer}
    await backend.append_label(label)
    return _json({"ok": True, "label": label}, status=201)


def make_app(backend: Backend) -> web.Application:
    """The aiohttp application with every route."""
    app = web.Application(client_max_size=max(backend.config.api.max_body, 1024))
    app[BACKEND] = backend
    routes: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] = [
        ("GET", "/metrics", metrics),
        ("GET", "/healthz", healthz),
        ("GET", "/readyz", readyz),
        ("GET", "/", index),
        ("GET", "/methodology", methodology),
        ("GET", "/v1/agents", list_agents),
        ("GET", "/v1/agents/{agent}", agent_score),
        ("GET", "/v1/agents/{agent}/audit", agent_audit),
        ("GET", "/v1/agents/{agent}/history", agent_history),
        ("GET", "/agents/{agent}", agent_page),
        ("POST", "/v1/labels", post_label),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    return app
