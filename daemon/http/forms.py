"""What the page forms share: reading a posted form within the body limits, refusing a post from another site or
without the session's form token, the checks of a form that acts as the signed-in reviewer (a label, a close), and
answering with a redirect (the pages' POSTs end in 303 See Other, so a reload does not post again)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import aiohttp_session
from aiohttp import web

from daemon.http.backend import BACKEND
from daemon.http.guards import same_origin, tokens_match
from daemon.http.pages import Viewer
from daemon.http.sessions import form_token, signed_in
from daemon.http.views import message

#: A form's body must arrive within this many seconds (408 otherwise), as POST /v1/labels's.
FORM_TIMEOUT = 10.0


#: What the pages' forms send (they set no enctype); anything else is a 415.
FORM_TYPE = "application/x-www-form-urlencoded"


async def read_form(request: web.Request) -> Mapping[str, str] | web.Response:
    """The form's fields (the first value of each), or the 408/413/415 answer it gets."""
    if request.body_exists and request.content_type != FORM_TYPE:
        return web.Response(status=415, text=f"a form must be sent as {FORM_TYPE}")
    try:
        async with asyncio.timeout(FORM_TIMEOUT):
            form = await request.post()
    except TimeoutError:
        timed_out = web.Response(status=408, text=f"form not received within {FORM_TIMEOUT:g} s")
        timed_out.force_close()  # the rest of the body may still come: do not read it as the next request
        return timed_out
    except web.HTTPRequestEntityTooLarge:
        return web.Response(status=413, text=f"form larger than {request.app[BACKEND].config.api.max_body} bytes")
    fields: dict[str, str] = {}
    for key, value in form.items():
        if isinstance(value, str):
            fields.setdefault(key, value)
    return fields


def from_elsewhere(request: web.Request) -> bool:
    """True for a post a browser says came from another site: its ``Origin`` is neither this server's nor
    ``[api] public_url``'s, or ``Sec-Fetch-Site`` says cross-site."""
    if request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
        return True
    origin = request.headers.get("Origin")
    public = request.app[BACKEND].config.api.public_url
    if origin is not None and public and origin.lower() == "/".join(public.lower().split("/", 3)[:3]):
        return False
    return not same_origin(origin, request.scheme, request.host)


def forged(request: web.Request, session: Mapping[str, object], form: Mapping[str, str]) -> bool:
    """True for a post every page form refuses (403, nothing done): from another site (:func:`from_elsewhere`), or
    without the session's form token."""
    return from_elsewhere(request) or not tokens_match(session.get("csrf"), form.get("csrf_token"))


def see_other(location: str) -> web.Response:
    """303 to ``location`` (a local path the caller checked)."""
    return web.Response(status=303, headers={"Location": location})


@dataclass(frozen=True)
class Poster:
    """The signed-in reviewer a form came from, their session and how the answer's page shows them."""

    reviewer: str
    session: aiohttp_session.Session  # the notice of the page the answer redirects to goes in it
    viewer: Viewer


async def reviewer_post(request: web.Request, form: Mapping[str, str], back: str, problem: str | None, *,
                        undone: str, again: str) -> Poster | web.Response:
    """Who posted ``form`` (a page's form that acts as the signed-in reviewer: a label, a close), or the answer
    refusing it, in this order: ``problem`` (what makes the form unusable, said signed in or not) a 400 page; no
    session a 303 to ``/login`` and back to ``back``; a :func:`forged` post a 403 page saying ``undone`` (what was
    not done) and to reload and ``again``. Nothing is written before this returns a :class:`Poster`."""
    reviewer, session = await signed_in(request, request.app[BACKEND].reviewers())
    viewer = Viewer(reviewer, form_token(session) if reviewer else "", back)
    if problem is not None:
        return await message(request, 400, "Bad request", problem, back=back, viewer=viewer)
    if reviewer is None:
        return see_other("/login?" + urlencode({"next": back}))
    if forged(request, session, form):
        return await message(request, 403, "Refused", "This form did not come from honestyd's own page (its form token"
                             f" is missing or wrong): {undone}. Reload the page and {again}.", back=back, viewer=viewer)
    return Poster(reviewer, session, viewer)
