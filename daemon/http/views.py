"""The page handlers: each looks up what its page shows and has :mod:`daemon.http.pages` build it off the loop."""

from __future__ import annotations

from aiohttp import web

from daemon.http import pages
from daemon.http.backend import BACKEND
from daemon.http.handling import audited, current_snapshot, off_loop


async def agent_page(request: web.Request) -> web.Response:
    """The HTML audit page a Grafana panel links to."""
    a, result, snap = await audited(request)
    return web.Response(text=await off_loop(request, lambda: pages.audit_page(a, result, snap)),
                        content_type="text/html")


async def index(request: web.Request) -> web.Response:
    """All agents, all windows."""
    snap = current_snapshot(request)
    return web.Response(text=await off_loop(request, lambda: pages.index_page(snap)), content_type="text/html")


async def methodology(request: web.Request) -> web.Response:
    """The formula, the weights side by side, and the changelog."""
    backend = request.app[BACKEND]
    snap, config = backend.snapshot, backend.config

    def methodology_html() -> str:
        agents = sorted({a for w in snap.windows.values() for a in w.agents}) if snap else []
        return pages.methodology_page(config, agents, backend.changelog_text())

    return web.Response(text=await off_loop(request, methodology_html), content_type="text/html")
