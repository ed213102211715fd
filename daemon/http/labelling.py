"""``POST /labels``: a signed-in reviewer's 👍/👎 (and note) on one decision row, from the agent page's form.

The reviewer is the session's, never a form field. No session: 303 to ``/login`` (and back). A missing or wrong form
token, or a post from another site: 403, nothing written. A decision id honestyd never stored: 404 with a message.
The label goes through the labels API's own writer to ``labels/api.jsonl``; the answer waits (at most
:data:`LABEL_WAIT` seconds) until the daemon has read its line back and evaluated with it, then 303s to the row, so
the page that follows shows the label and what it changed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime

from aiohttp import web

from collectors.jsonl import LABEL_VALUES, MAX_NOTE
from collectors.rfc3339 import format_ts, parse_ts
from daemon.http.api import is_text
from daemon.http.backend import BACKEND, Backend
from daemon.http.forms import read_form, reviewer_post, see_other
from daemon.http.guards import local_path
from daemon.http.rows import EMOJI
from daemon.http.views import message

#: Seconds the answer waits for the daemon to show the label it wrote; then it answers anyway (the label is written).
LABEL_WAIT = 2.0
LABEL_POLL = 0.02
MAX_DECISION = 1000


def label_fields(form: Mapping[str, str]) -> tuple[str, str, str | None] | str:
    """(decision, value, note or None) of a label form, or the message of the 400 it gets."""
    decision, value, note = form.get("decision", ""), form.get("value", ""), form.get("note", "")
    if not decision or len(decision) > MAX_DECISION:
        return "the form names no decision (or an id longer than 1000 characters)"
    if value not in LABEL_VALUES:
        return "value must be up (👍) or down (👎)"
    if len(note) > MAX_NOTE:
        return f"the note is longer than {MAX_NOTE} characters"
    note = note.strip()
    if not is_text(decision) or not is_text(note):
        return "the decision id or the note is not text (it holds a lone surrogate)"
    return decision, value, note or None



async def shown(backend: Backend, decision: str, reviewer: str, ts: datetime, wait: float = LABEL_WAIT) -> bool:
    """Whether the daemon showed the label within ``wait`` seconds (polled: each look is a dictionary lookup)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while not await backend.label_shown(decision, reviewer, ts):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(LABEL_POLL)
    return True


async def post_label(request: web.Request) -> web.Response:
    """Append the signed-in reviewer's label and go back to the row (see the module)."""
    backend = request.app[BACKEND]
    form = await read_form(request)
    if isinstance(form, web.Response):
        return form
    next_path = local_path(form.get("next"))
    fields = label_fields(form)
    poster = await reviewer_post(request, form, next_path, f"Not labelled: {fields}." if isinstance(fields, str)
                                 else None, undone="nothing was labelled", again="label again")
    if isinstance(poster, web.Response):
        return poster
    assert not isinstance(fields, str)  # reviewer_post refused it
    reviewer, session, viewer = poster.reviewer, poster.session, poster.viewer
    decision, value, note = fields
    known = await backend.knows_decision(decision)
    if known is None:
        return await message(request, 503, "Starting", "The daemon is still loading its decisions: nothing was"
                             " labelled; try again in a moment.", back=next_path, viewer=viewer)
    if not known:
        return await message(request, 404, "Unknown decision", f"honestyd has stored no decision with the id "
                             f"{decision!r}: nothing was labelled.", back=next_path, viewer=viewer)
    ts = format_ts(backend.now())
    label = {"ts": ts, "decision": decision, "value": value, "reviewer": reviewer, **({"note": note} if note else {})}
    try:
        await backend.append_label(label)
    except OSError as exc:
        return await message(request, 500, "Not written", f"The label was not written: {exc.filename}: "
                             f"{exc.strerror}.", back=next_path, viewer=viewer)
    if await shown(backend, decision, reviewer, parse_ts(ts)):
        session["notice"] = f"{EMOJI[value]} on {decision} recorded."
    else:
        session["notice"] = (f"{EMOJI[value]} on {decision} written to labels/api.jsonl; it shows here once the daemon"
                             " has read it (reload in a moment).")
    return see_other(next_path)
