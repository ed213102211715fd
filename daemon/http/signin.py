"""Signing in and out: ``GET /login`` (the form), ``POST /login`` (reviewer name and token), ``POST /logout``.

A token is the reviewer's from ``[api] reviewers_env`` / ``reviewers_file`` (the labels API's), compared in constant
time. Wrong credentials are a 401; after :data:`MOST_FAILURES` failures within :data:`FAILURE_WINDOW` seconds from
one client address, or against one reviewer's name, further attempts from it or on them get 429 with
``Retry-After`` until the oldest failure ages out, right credentials included. ``next`` is followed only to a local
path (daemon/http/guards.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import aiohttp_jinja2
from aiohttp import web

from daemon.http import pages
from daemon.http.backend import BACKEND
from daemon.http.forms import forged, read_form, see_other
from daemon.http.guards import AttemptLimiter, local_path
from daemon.http.sessions import check_token, form_token, sign_in, signed_in
from daemon.http.views import html, message

MOST_FAILURES = 5
FAILURE_WINDOW = 300.0
LIMITER: web.AppKey[AttemptLimiter] = web.AppKey("signin_limiter", AttemptLimiter)


def limiter(clock: Callable[[], float] = time.monotonic) -> AttemptLimiter:
    """The failed sign-ins of one app (``clock``: seconds)."""
    return AttemptLimiter(MOST_FAILURES, FAILURE_WINDOW, clock=clock)


async def _form_page(request: web.Request, status: int, next_path: str, reviewer: str = "",
                     error: str | None = None) -> web.Response:
    who, session = await signed_in(request, request.app[BACKEND].reviewers())
    viewer = pages.Viewer(who, form_token(session), next_path)
    return html(pages.login_page(viewer=viewer, next_path=next_path, reviewer=reviewer, error=error,
                                 env=aiohttp_jinja2.get_env(request.app)), status)


async def login_form(request: web.Request) -> web.Response:
    """The sign-in form; ``?next=`` is where a sign-in goes on to (a local path, else ``/``)."""
    return await _form_page(request, 200, local_path(request.query.get("next")))


async def login(request: web.Request) -> web.Response:
    """Check the reviewer's token; 303 to ``next`` with a fresh session, or the form again with why not."""
    form = await read_form(request)
    if isinstance(form, web.Response):
        return form
    next_path = local_path(form.get("next"))
    name, token = form.get("reviewer", "").strip(), form.get("token", "")
    _, session = await signed_in(request, request.app[BACKEND].reviewers())
    if forged(request, session, form):
        return await _form_page(request, 403, next_path, name, "This sign-in form came from another site or has "
                                "expired: sign in from this page.")
    reviewers = request.app[BACKEND].reviewers()
    limits = request.app[LIMITER]
    keys = [f"client:{request.remote}"] + ([f"reviewer:{name}"] if name in reviewers.values() else [])
    wait = max((limits.retry_after(k) or 0) for k in keys)
    if wait:
        refused = await _form_page(request, 429, next_path, name, f"Too many failed sign-ins: try again in {wait} s.")
        refused.headers["Retry-After"] = str(wait)
        return refused
    if not name or not token or not check_token(reviewers, name, token):
        for k in keys:
            limits.failed(k)
        return await _form_page(request, 401, next_path, name, "Wrong reviewer name or token.")
    await sign_in(request, name, token)
    return see_other(next_path)


async def logout(request: web.Request) -> web.Response:
    """End the session; 303 to ``/``."""
    form = await read_form(request)
    if isinstance(form, web.Response):
        return form
    _, session = await signed_in(request, request.app[BACKEND].reviewers())
    if forged(request, session, form):
        return await message(request, 403, "Refused", "This sign-out did not come from honestyd's own page (its form"
                             " token is missing or wrong): you are still signed in.", back="/")
    session.invalidate()
    return see_other("/")
