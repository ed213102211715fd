"""What every answer carries against a page being framed, sniffed, leaking its URL or running anything not honestyd's:
the headers, and the one stylesheet the pages use, served here (no external asset)."""

from __future__ import annotations

from aiohttp import web

from daemon.http.templating import STATIC

#: Nothing but the stylesheet from honestyd itself; forms post only to honestyd; no framing; no <base>. The pages
#: have no script at all, and their charts are inline SVG (drawn with attributes, no style attribute).
CSP = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"}
_CSS = (STATIC / "honestyd.css").read_bytes()


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(HEADERS)
    if response.content_type == "text/html":  # a page may show who is signed in: no cache keeps it
        response.headers["Cache-Control"] = "no-store"


def install(app: web.Application) -> None:
    """Every response of ``app`` gets :data:`HEADERS` (error answers and the metrics included)."""
    app.on_response_prepare.append(_headers)


async def stylesheet(request: web.Request) -> web.Response:
    """The pages' stylesheet."""
    return web.Response(body=_CSS, content_type="text/css", charset="utf-8",
                        headers={"Cache-Control": "public, max-age=3600"})
