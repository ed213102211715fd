"""The aiohttp application: :func:`make_app` and the one table of every route (method, path, handler)."""

from __future__ import annotations

from concurrent.futures import Executor

from aiohttp import web

from daemon.http import api, reviews, views
from daemon.http.backend import BACKEND, Backend
from daemon.http.handling import EXECUTOR, SLOTS, Handler, Slots, capped
from daemon.http.urls import AGENT


def make_app(backend: Backend, *, executor: Executor | None = None) -> web.Application:
    """The aiohttp application with every route; ``executor`` runs the request work (None: the loop's default)."""
    app = web.Application(client_max_size=max(backend.config.api.max_body, 1024))
    app[BACKEND] = backend
    app[api.METRICS_CACHE] = api.MetricsCache()
    app[EXECUTOR] = executor
    app[SLOTS] = Slots()
    routes: list[tuple[str, str, Handler]] = [
        ("GET", "/metrics", api.metrics),
        ("GET", "/healthz", api.healthz),
        ("GET", "/readyz", api.readyz),
        ("GET", "/", capped(views.index)),
        ("GET", "/methodology", capped(views.methodology)),
        ("GET", "/v1/agents", api.list_agents),
        ("GET", f"/v1/agents/{AGENT}", api.agent_score),
        ("GET", f"/v1/agents/{AGENT}/audit", capped(api.agent_audit)),
        ("GET", f"/v1/agents/{AGENT}/history", capped(api.agent_history)),
        ("GET", f"/agents/{AGENT}", capped(views.agent_page)),
        ("POST", "/v1/labels", api.post_label),
        ("GET", "/v1/reviews", reviews.list_reviews),
        ("GET", "/v1/reviews/{review}", reviews.get_review),
        ("POST", "/v1/reviews/{review}/close", reviews.close_review),
        ("POST", "/v1/alerts/alertmanager", reviews.alertmanager),
        ("GET", "/openapi.json", api.openapi_document),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, handler)
    return app
