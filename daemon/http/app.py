"""The aiohttp application: :func:`make_app` and the one table of every route (method, path, handler)."""

from __future__ import annotations

import secrets
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Executor

import aiohttp_session
from aiohttp import web

from daemon.http import api, labelling, reviews, reviewviews, security, sessions, signin, templating, views
from daemon.http.backend import BACKEND, Backend
from daemon.http.handling import EXECUTOR, SLOTS, Handler, Slots, capped
from daemon.http.urls import AGENT

# aiohttp-session keeps its storage on the request under a string key: aiohttp's advice, not a fault of ours.
warnings.filterwarnings("ignore", "It is recommended to use web.RequestKey", web.NotAppKeyWarning, "aiohttp_session")


def make_app(backend: Backend, *, executor: Executor | None = None, session_key: bytes | None = None,
             clock: Callable[[], float] = time.monotonic, metrics: api.MetricsCache | None = None) -> web.Application:
    """The aiohttp application with every route; ``executor`` runs the request work (None: the loop's default),
    ``session_key`` encrypts the sign-in cookies (None: a key of this app only), ``clock`` times failed sign-ins,
    ``metrics`` holds the ``/metrics`` bodies (None: one of this app's, rendered on the loop)."""
    app = web.Application(client_max_size=max(backend.config.api.max_body, 1024))
    app[BACKEND] = backend
    app[api.METRICS_CACHE] = metrics if metrics is not None else api.MetricsCache()
    app[EXECUTOR] = executor
    app[SLOTS] = Slots()
    app[signin.LIMITER] = signin.limiter(clock)
    templating.setup(app)
    security.install(app)
    secure = backend.config.api.public_url.startswith("https://")
    aiohttp_session.setup(app, sessions.storage(session_key or secrets.token_bytes(sessions.KEY_BYTES), secure=secure))
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
        ("GET", "/login", signin.login_form),
        ("POST", "/login", signin.login),
        ("POST", "/logout", signin.logout),
        ("POST", "/labels", labelling.post_label),
        ("GET", "/reviews", capped(reviewviews.queue)),
        ("GET", "/reviews/{review}", capped(reviewviews.review)),
        ("POST", "/reviews/{review}/close", reviewviews.close),
        ("GET", templating.STYLESHEET, security.stylesheet),
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
