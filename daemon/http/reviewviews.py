"""The review queue's pages: ``GET /reviews`` (the queue), ``GET /reviews/{review}`` (one review beside the live
audit of its decisions) and ``POST /reviews/{review}/close`` (a signed-in reviewer closes it with a note).

The close is refused as ``POST /labels`` refuses a label (daemon/http/labelling.py), by the same code: a form that
cannot close a review (no note, a note too long or not text) is a 400 page, signed in or not; without a session it
303s to ``/login`` and back to the review; a post from another site or without the session's form token is a 403
page, nothing written. The reviewer is the session's, never a field of the form. What the queue refuses
(:class:`~daemon.reviews.queue.ReviewRefused`: no such review, closed already, a note too long) is a page with that
status, the file refused (OSError) a 500 page; the review then stays open.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from aiohttp import web

from daemon.http import reviewpages
from daemon.http.api import is_text
from daemon.http.backend import BACKEND
from daemon.http.forms import read_form, reviewer_post, see_other
from daemon.http.reviews import SPACE
from daemon.http.views import message, render_off_loop, viewer_of
from daemon.reviews.queue import ReviewRefused
from scorers.score import AgentResult

#: The longest note a close may carry, in characters (the JSON route's and the queue's limit).
MAX_NOTE = 4000
#: The title of the page saying why the queue refused a close, by status.
REFUSED = {400: "Bad request", 404: "Unknown review", 409: "Closed already"}


def review_path(review_id: str) -> str:
    """The page of the review with this id as a local path (an id from a URL may hold any character: quoted)."""
    return "/reviews/" + quote(review_id, safe="", errors="surrogatepass")


def close_note(form: Mapping[str, str]) -> tuple[str, str | None]:
    """(the note, None) of a close form, or ("", the message of the 400 it gets)."""
    note = form.get("note", "")
    if len(note) > MAX_NOTE:
        return "", f"the note is longer than {MAX_NOTE} characters"
    if not is_text(note):
        return "", "the note is not text (it holds a lone surrogate)"
    note = note.strip(SPACE)
    if not note:
        return "", "a review closes with a note: what the review found"
    return note, None


async def queue(request: web.Request) -> web.Response:
    """The queue: open reviews first, oldest first, then the closed ones (``?state=open|closed``: one kind)."""
    backend = request.app[BACKEND]
    viewer = await viewer_of(request)
    state = request.query.get("state")
    if state is not None and state not in reviewpages.STATES:
        return await message(request, 400, "Bad request", f"state must be one of {', '.join(reviewpages.STATES)} "
                             f"(or left out), not {state!r}", back="/reviews", viewer=viewer)
    reviews, now = list(backend.review_list(state)), backend.now()
    return await render_off_loop(request, lambda env: reviewpages.queue_page(reviews, now, state=state, viewer=viewer,
                                                                             env=env))


async def review(request: web.Request) -> web.Response:
    """One review: what it recorded beside the live audit of its decisions, the 👍/👎 forms and the close form."""
    backend = request.app[BACKEND]
    viewer = await viewer_of(request)
    review_id = request.match_info["review"]
    found = backend.review(review_id)
    if found is None:
        return await message(request, 404, "Unknown review", f"honestyd has no review {review_id!r}.",
                             back="/reviews", viewer=viewer)
    window, snap = reviewpages.window_of(found), backend.snapshot
    live: AgentResult | None = None
    if snap is not None and window in snap.windows and found.agent in snap.windows[window].agents:
        audited = await backend.audit(found.agent, window)
        live = audited[1] if audited is not None else None
    listed = set(found.failed_ids())
    labels = await backend.labels_on(listed)
    texts = await backend.texts_of([r.decision.order for r in live.rows if r.decision.id in listed]) \
        if live is not None else None
    now = backend.now()
    return await render_off_loop(request, lambda env: reviewpages.review_page(
        found, now, snap=snap, live=live, texts=texts, labels=labels, viewer=viewer, env=env))


async def close(request: web.Request) -> web.Response:
    """Close the review as the signed-in reviewer, with the form's note; 303 back to its page (see the module)."""
    backend = request.app[BACKEND]
    review_id = request.match_info["review"]
    back = review_path(review_id)
    form = await read_form(request)
    if isinstance(form, web.Response):
        return form
    note, problem = close_note(form)
    poster = await reviewer_post(request, form, back, f"Not closed: {problem}." if problem is not None else None,
                                 undone="the review was not closed", again="close it again")
    if isinstance(poster, web.Response):
        return poster
    viewer = poster.viewer
    try:
        await backend.close_review(review_id, poster.reviewer, note)
    except ReviewRefused as exc:
        return await message(request, exc.status, REFUSED.get(exc.status, "Refused"), f"Not closed: {exc}.",
                             back=back if exc.status != 404 else "/reviews", viewer=viewer)
    except OSError as exc:  # refused (daemon/safefile.py) or failed: the review stays open
        return await message(request, 500, "Not written", f"The review was not closed: {exc.filename}: "
                             f"{exc.strerror}.", back=back, viewer=viewer)
    poster.session["notice"] = f"Review {review_id} closed."
    return see_other(back)
