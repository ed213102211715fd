"""The page handlers: each looks up what its page shows and has :mod:`daemon.http.pages` build it off the loop (the
review queue's are in :mod:`daemon.http.reviewviews`).

A bad query value is a 400 page saying which and what is allowed; an unknown agent a 404 page.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import aiohttp_jinja2
import jinja2
from aiohttp import web

from daemon import changelog
from daemon.http import pages
from daemon.http.backend import BACKEND
from daemon.http.handling import current_snapshot, off_loop
from daemon.http.rows import parse_query
from daemon.http.sessions import form_token, here, signed_in
from daemon.http.urls import agent_href


async def viewer_of(request: web.Request) -> pages.Viewer:
    """Who is looking (the notice a POST left is shown once, then dropped)."""
    reviewer, session = await signed_in(request, request.app[BACKEND].reviewers())
    if reviewer is None:
        return pages.Viewer(here=here(request))
    notice = session.pop("notice", None)
    return pages.Viewer(reviewer, form_token(session), here(request), notice if isinstance(notice, str) else None)


def html(text: str, status: int = 200) -> web.Response:
    """A page."""
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


async def render_off_loop(request: web.Request, build: Callable[[jinja2.Environment], str],
                          status: int = 200) -> web.Response:
    """``build(env=…)`` run on the request executor, answered as a page."""
    env = aiohttp_jinja2.get_env(request.app)
    return html(await off_loop(request, lambda: build(env)), status)


async def message(request: web.Request, status: int, title: str, text: str, back: str | None = None,
                  viewer: pages.Viewer | None = None) -> web.Response:
    """A page saying one thing, with ``status``."""
    who = viewer if viewer is not None else await viewer_of(request)
    page = pages.message_page(title, text, viewer=who, back=back, env=aiohttp_jinja2.get_env(request.app))
    return html(page, status)


async def agent_page(request: web.Request) -> web.Response:
    """The agent page a Grafana panel links to: score, chart, label progress, the decisions a page at a time."""
    backend = request.app[BACKEND]
    snap = current_snapshot(request)
    agent = request.match_info["agent"]
    viewer = await viewer_of(request)
    q = parse_query(request.query, list(snap.windows))
    if isinstance(q, str):
        return await message(request, 400, "Bad request", q, back=agent_href(agent, next(iter(snap.windows))),
                             viewer=viewer)
    result = snap.windows[q.window]
    if agent not in result.agents:
        return await message(request, 404, "Unknown agent", f"no agent {agent!r} has decisions in the "
                             f"{q.window} window", back="/", viewer=viewer)
    found = await backend.audit(agent, q.window)
    a = result.agents[agent]
    if found is not None:  # else gone from the model since the snapshot: the snapshot's numbers, without rows
        at, a = found
        result = replace(result, at=at, agents={**result.agents, agent: a})
    labels = await backend.labels_on([r.decision.id for r in a.rows])
    chunk, _ = pages.agent_rows(a, q, labels)
    texts = await backend.texts_of([r.decision.order for r in chunk])
    try:
        history = await backend.history(agent)
    except web.HTTPServiceUnavailable:  # the store is being rebuilt: the chart waits, the page does not
        history = []

    reviews = [r for r in backend.review_list("open") if r.agent == agent]

    def build(env: jinja2.Environment) -> str:  # off the loop: the changelog is a file
        inputs = pages.AgentInputs(texts, labels, history, changelog.weight_changes(backend.changelog_text()),
                                   reviews)
        return pages.audit_page(a, result, snap, query=q, inputs=inputs, viewer=viewer, env=env)

    return await render_off_loop(request, build)


async def index(request: web.Request) -> web.Response:
    """All agents, all windows: bands, sparklines, 7-day change, unlabelled failures, open reviews; sortable."""
    backend = request.app[BACKEND]
    snap = current_snapshot(request)
    viewer = await viewer_of(request)
    sort = request.query.get("sort", "name")
    if sort not in pages.SORTS:
        return await message(request, 400, "Bad request", f"sort must be one of {', '.join(pages.SORTS)}, not "
                             f"{sort!r}", back="/", viewer=viewer)
    dash, _ = pages.dashboard_windows(snap)
    try:
        history = await backend.histories(snap.at.date() - timedelta(days=pages.SPARK_DAYS - 1))
    except web.HTTPServiceUnavailable:
        history = []
    unlabelled = await backend.unlabelled_failures(dash)
    reviews = list(backend.review_list("open"))
    return await render_off_loop(request, lambda env: pages.index_page(
        snap, viewer=viewer, history=history, unlabelled=unlabelled, sort=sort, reviews=reviews, env=env))


async def methodology(request: web.Request) -> web.Response:
    """The formula, the weights side by side, label progress, and the changelog."""
    backend = request.app[BACKEND]
    snap, config = backend.snapshot, backend.config
    viewer = await viewer_of(request)

    def build(env: jinja2.Environment) -> str:
        agents = sorted({a for w in snap.windows.values() for a in w.agents}) if snap else []
        return pages.methodology_page(config, agents, backend.changelog_text(),
                                      labels=snap.labels if snap else None, viewer=viewer, env=env)

    return await render_off_loop(request, build)
