"""daemon/http/reviewviews.py: the queue's pages and POST /reviews/{id}/close on the real app and a real aiohttp test
server (tests/pagebackend.py: a real state scored by the pure evaluation, its review opened by the real opening rule,
the queue folded from real review events)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from daemon.http.app import make_app
from daemon.http.reviewviews import close_note
from daemon.http.templating import anchor
from daemon.reviews.queue import Review
from tests.pagebackend import REVIEWERS, PageBackend, login
from tests.system.test_browser import SCORED, write_state

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
Client = TestClient[Any, Any]


@pytest.fixture
def backend(tmp_path: Path) -> PageBackend:
    b = PageBackend(write_state(tmp_path / "state", NOW), NOW, dict(REVIEWERS))
    assert [(r.agent, r.reason) for r in b.open_due_reviews()] == [(SCORED, "below")]  # ada is at 51 %
    return b


def the_review(backend: PageBackend) -> Review:
    [review] = backend.review_list()
    return review


def run(backend: PageBackend, test: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        async with TestClient(TestServer(make_app(backend))) as client:  # type: ignore[arg-type]
            await test(client)

    asyncio.run(main())


async def token_on(client: Client, path: str) -> str:
    page = await (await client.get(path)).text()
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found is not None, page[:500]
    return found.group(1)


async def signed_in(client: Client, path: str, reviewer: str = "alice") -> str:
    """Sign in; the form token of the page at ``path``."""
    assert (await login(client, reviewer, REVIEWERS[reviewer])).status == 303
    return await token_on(client, path)


def test_the_queue_and_the_review_page_and_what_they_refuse(backend: PageBackend) -> None:
    review = the_review(backend)
    page = f"/reviews/{review.id}"

    async def test(client: Client) -> None:
        queue = await client.get("/reviews")
        text = await queue.text()
        assert queue.status == 200 and f'<a href="{page}"><code>{review.id}</code></a>' in text
        assert "0 of 3 decisions labelled" in text and "already below when honestyd started" in text
        assert review.id not in await (await client.get("/reviews?state=closed")).text()
        bad = await client.get("/reviews?state=stale")
        assert bad.status == 400 and "state must be one of open, closed (or left out), not &#39;stale&#39;" in \
            await bad.text()
        one = await client.get(page)
        text = await one.text()
        assert one.status == 200 and f"<h1>Review <code>{review.id}</code> · {SCORED} · below</h1>" in text
        assert [d for d in ("ada-4", "ada-3", "ada-2") if f'<code class="id">{d}</code>' in text] == review.failed_ids()
        assert 'action="/labels"' not in text and "Sign in</a> to label these decisions" in text
        missing = await client.get("/reviews/r-20260101-00000000")
        assert missing.status == 404 and "honestyd has no review &#39;r-20260101-00000000&#39;." in \
            await missing.text()
        index = await (await client.get("/")).text()
        assert f'<a href="{page}" title="' in index and "1 review open" in index
        agent = await (await client.get(f"/agents/{SCORED}?window=24h")).text()
        assert f'Open review <a href="{page}">{review.id}</a>' in agent

    run(backend, test)


def test_labels_from_the_review_page_come_back_to_it_and_count_in_its_progress(backend: PageBackend) -> None:
    review = the_review(backend)
    page = f"/reviews/{review.id}"

    async def test(client: Client) -> None:
        token = await signed_in(client, page)
        for decision, value in (("ada-4", "down"), ("ada-2", "up")):
            resp = await client.post("/labels", data={"csrf_token": token, "decision": decision, "value": value,
                                                      "next": f"{page}#{anchor(decision)}"}, allow_redirects=False)
            assert resp.status == 303 and resp.headers["Location"] == f"{page}#{anchor(decision)}"
        text = await (await client.get(page)).text()
        assert "2 of 3 decisions labelled" in text and "👍 up on ada-2 recorded." not in text
        assert '<p class="label mine down"><span class="emoji">👎</span> <span class="by">alice</span> (you)' in text
        assert "2 of 3 decisions labelled" in await (await client.get("/reviews")).text()

    run(backend, test)


def test_a_signed_in_reviewer_closes_the_review_with_a_note_as_themself(backend: PageBackend) -> None:
    review = the_review(backend)
    page = f"/reviews/{review.id}"
    note = '<b>ada cites nothing</b> {{ 7*7 }} "told her owner"'

    async def test(client: Client) -> None:
        token = await signed_in(client, page)
        resp = await client.post(f"{page}/close", data={"csrf_token": token, "note": f"  {note}\n",
                                                        "reviewer": "maya"}, allow_redirects=False)
        assert resp.status == 303 and resp.headers["Location"] == page
        closed = backend.review(review.id)
        assert closed is not None and not closed.is_open
        assert (closed.closed_by, closed.note) == ("alice", note)  # the session's reviewer, the note trimmed
        text = await (await client.get(page)).text()
        assert f"Review {review.id} closed." in text and 'action="/reviews/' not in text
        assert "by <strong class=\"reviewer\">alice</strong>: <q class=\"note\">&lt;b&gt;ada cites nothing&lt;/b&gt;" \
            " {{ 7*7 }} &#34;told her owner&#34;</q>" in text
        again = await client.post(f"{page}/close", data={"csrf_token": token, "note": "twice"},
                                  allow_redirects=False)
        assert again.status == 409 and f"Not closed: review {review.id} is closed already." in await again.text()
        assert [e.event for e in backend.review_lines].count("closed") == 1
        assert "Closed (1)" in await (await client.get("/reviews")).text()

    run(backend, test)


def test_a_close_without_a_session_a_token_or_from_another_site_closes_nothing(backend: PageBackend) -> None:
    review = the_review(backend)
    page = f"/reviews/{review.id}"

    async def test(client: Client) -> None:
        anonymous = await client.post(f"{page}/close", data={"note": "x"}, allow_redirects=False)
        assert anonymous.status == 303
        assert anonymous.headers["Location"] == f"/login?next=%2Freviews%2F{review.id}"
        token = await signed_in(client, page)
        for data, headers in (({"note": "x"}, {}), ({"note": "x", "csrf_token": "guess"}, {}),
                              ({"note": "x", "csrf_token": token}, {"Origin": "http://evil.example"}),
                              ({"note": "x", "csrf_token": token}, {"Sec-Fetch-Site": "cross-site"})):
            refused = await client.post(f"{page}/close", data=data, headers=headers, allow_redirects=False)
            assert refused.status == 403, (data, headers)
            assert "the review was not closed" in await refused.text()
        for note, why in (("", "a review closes with a note: what the review found"),
                          (" \t\u3000\n", "a review closes with a note: what the review found"),
                          ("n" * 4001, "the note is longer than 4000 characters")):
            blank = await client.post(f"{page}/close", data={"note": note, "csrf_token": token},
                                      allow_redirects=False)
            assert blank.status == 400 and f"Not closed: {why}." in await blank.text()
        unknown = await client.post("/reviews/r-nope/close", data={"note": "x", "csrf_token": token},
                                    allow_redirects=False)
        assert unknown.status == 404 and "Not closed: no review &#39;r-nope&#39;." in await unknown.text()
        backend.close_fails = PermissionError(13, "Permission denied", "reviews/honestyd.jsonl")
        failed = await client.post(f"{page}/close", data={"note": "x", "csrf_token": token}, allow_redirects=False)
        assert failed.status == 500
        assert "The review was not closed: reviews/honestyd.jsonl: Permission denied." in await failed.text()
        assert backend.review(review.id) is not None and backend.review(review.id).is_open  # type: ignore[union-attr]
        assert "closed" not in [e.event for e in backend.review_lines]

    run(backend, test)


def test_a_close_note_is_trimmed_of_the_white_space_the_api_calls_blank() -> None:
    assert close_note({"note": "\u00a0 found it \ufeff"}) == ("found it", None)
    assert close_note({"note": "\x1c"}) == ("\x1c", None)  # text to the OpenAPI pattern \S, as to the JSON route
    assert close_note({}) == ("", "a review closes with a note: what the review found")
    assert close_note({"note": "\ud800"}) == ("", "the note is not text (it holds a lone surrogate)")
