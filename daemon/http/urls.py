"""The URL scheme of the pages and the API: the path patterns the routes use and the links other sinks carry.

Kept apart from the handlers (no aiohttp here), so the changelog can link to an audit page without loading a
web server.
"""

from __future__ import annotations

from urllib.parse import quote

#: The ``{agent}`` path segment: any character but ``/`` (sent as %2F). aiohttp's default, ``[^{}/]+``, refused names
#: holding a brace, so the index linked ``{{7*7}}`` to a 404.
AGENT = "{agent:[^/]+}"


def agent_href(agent: str, window: str) -> str:
    """The audit page of one agent and window (the link Grafana panels carry)."""
    # surrogatepass: quote() raised on a lone surrogate (tests/daemon/test_hostile.py).
    segment = quote(agent, safe="", errors="surrogatepass")
    if not segment.strip("."):  # "." and "..": a client resolves a dot segment away ("/agents/.." is "/")
        segment = segment.replace(".", "%2E")
    return f"/agents/{segment}?window={quote(window, safe='')}"
