"""The review queue's JSON routes and Alertmanager's webhook.

* ``GET /v1/reviews?state=open|closed`` — the queue (open first, oldest first), each with progress and age;
* ``GET /v1/reviews/{review}`` — one review: the evidence's decisions with their labels, the alerts, the history;
* ``POST /v1/reviews/{review}/close`` — a reviewer (bearer token of ``[api] reviewers_*``) closes it with a note;
* ``POST /v1/alerts/alertmanager`` — Alertmanager's notifications (payload version 4), with the bearer token of
  ``[alerts] token_env`` / ``token_file``; a firing honesty alert opens or joins its agent's review.

Both POSTs are body-limited like ``POST /v1/labels`` (``[api] max_body``, :data:`~daemon.http.handling.BODY_TIMEOUT`).
"""

from __future__ import annotations

import json

from aiohttp import web

from collectors.rfc3339 import format_ts
from daemon.http.backend import BACKEND
from daemon.http.handling import bearer_owner, error, json_response, limited_body
from daemon.reviews import views
from daemon.reviews.alertmanager import PayloadError, parse_payload
from daemon.reviews.queue import ReviewRefused

#: The values ``?state=`` takes.
STATES = ("open", "closed")
#: White space as the OpenAPI document's ``pattern: \S`` (ECMAScript's ``\s``) reads it: Python's ``str.isspace``
#: also takes U+001C to U+001F, which would refuse a note the document calls valid.
SPACE = "\t\n\v\f\r \u00a0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000\ufeff"


def is_blank(note: str) -> bool:
    """True for a note of nothing but white space (:data:`SPACE`), the empty one included."""
    return not note.strip(SPACE)


async def list_reviews(request: web.Request) -> web.Response:
    """The queue: open reviews first, oldest first, then the closed ones (``?state=`` keeps one kind)."""
    backend = request.app[BACKEND]
    state = request.query.get("state")
    if state is not None and state not in STATES:
        return error(400, f"unknown state {state!r}", allowed=list(STATES))
    now = backend.now()
    return json_response({"at": format_ts(now), "state": state,
                          "reviews": [views.summary(r, now) for r in backend.review_list(state)]})


async def get_review(request: web.Request) -> web.Response:
    """One review, with its evidence and history."""
    backend = request.app[BACKEND]
    review = backend.review(request.match_info["review"])
    if review is None:
        return error(404, f"no review {request.match_info['review']!r}")
    return json_response(views.detail(review, backend.now()))


def _note(raw: bytes) -> str | web.Response:
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return error(400, "body must be a JSON object")
    if not isinstance(body, dict):
        return error(400, "body must be a JSON object")
    unknown = sorted(set(body) - {"note"})
    if unknown:
        return error(400, f"unknown field {unknown[0]!r}")
    note = body.get("note")
    if not isinstance(note, str) or is_blank(note):
        return error(400, "note must be a non-empty string: what the review found")
    try:
        note.encode("utf-8")
    except UnicodeEncodeError:
        return error(400, "note must be text (no lone surrogate)")
    return note


async def close_review(request: web.Request) -> web.Response:
    """An authorised reviewer closes an open review with a note (the ``closed`` event in ``reviews/honestyd.jsonl``)."""
    backend = request.app[BACKEND]
    reviewer = bearer_owner(request, backend.reviewers(), "a reviewer")
    if isinstance(reviewer, web.Response):
        return reviewer
    raw = await limited_body(request, backend.config.api.max_body)
    if isinstance(raw, web.Response):
        return raw
    note = _note(raw)
    if isinstance(note, web.Response):
        return note
    try:
        review = await backend.close_review(request.match_info["review"], reviewer, note)
    except ReviewRefused as exc:
        return error(exc.status, str(exc))
    except OSError as exc:  # refused (daemon/safefile.py) or failed: the review stays open
        return error(500, f"review not closed: {exc.filename}: {exc.strerror}", path=str(exc.filename))
    return json_response({"ok": True, "review": views.detail(review, backend.now())})


async def alertmanager(request: web.Request) -> web.Response:
    """Alertmanager's webhook: every alert of the notification recorded on its review, or acknowledged and ignored."""
    backend = request.app[BACKEND]
    token = backend.alert_token()
    allowed = bearer_owner(request, {token: "alertmanager"} if token is not None else {}, "the alerts")
    if isinstance(allowed, web.Response):  # 401 without a token; 403 for a wrong one, or when none is configured
        if token is None and allowed.status == 403:
            return error(403, "no alert token is configured ([alerts] token_env or token_file): every post is refused")
        return allowed
    raw = await limited_body(request, backend.config.api.max_body)
    if isinstance(raw, web.Response):
        return raw
    try:
        notification = parse_payload(raw)
    except PayloadError as exc:
        return error(400, str(exc))
    try:
        summary = await backend.alert_notification(notification)
    except OSError as exc:  # Alertmanager retries a 5xx: nothing is lost
        return error(500, f"alert not recorded: {exc.filename}: {exc.strerror}", path=str(exc.filename))
    return json_response(summary)
