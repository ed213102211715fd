"""Every page the real daemon serves (signed in and not, errors and refusals included; the review queue's with the
review the daemon opens for ada, below 70 % at start) is valid HTML — html5lib's strict parser raises on the first
parse error — and every answer carries the headers that keep a page from being framed, sniffed, leaking its URL or
running anything that is not honestyd's."""

from __future__ import annotations

import http.cookiejar
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from email.message import Message
from pathlib import Path

import html5lib
import pytest

from tests.daemon_harness import Running, daemon, stop
from tests.system.test_browser import SCORED, THIN, wait_until_scored, write_state

CSP = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
TOKEN = "tok-valid-3e1"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


class Client:
    """A cookie-keeping HTTP client that does not follow redirects."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()),
                                                  _NoRedirect)

    def fetch(self, path: str, form: dict[str, str] | None = None) -> tuple[int, Message, str]:
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        try:
            with self.opener.open(self.base + path, data=data, timeout=10) as resp:
                return resp.status, resp.headers, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.headers, err.read().decode()

    def token(self, path: str) -> str:
        status, _, body = self.fetch(path)
        assert status == 200, (path, status)
        found = re.search(r'name="csrf_token" value="([^"]+)"', body)
        assert found, path
        return found.group(1)


def assert_valid(body: str, what: str) -> None:
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    try:
        parser.parse(body)
    except html5lib.html5parser.ParseError as exc:
        raise AssertionError(f"{what}: not valid HTML: {exc}; {parser.errors[:3]}") from exc


def assert_headers(headers: Message, what: str) -> None:
    assert headers["Content-Security-Policy"] == CSP, what
    assert headers["X-Content-Type-Options"] == "nosniff", what
    assert headers["Referrer-Policy"] == "same-origin", what


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("valid")
    root = write_state(tmp / "state", datetime.now(UTC))
    with daemon(tmp, root, env={"HONESTYD_REVIEWERS": f"alice:{TOKEN}"}) as d:
        wait_until_scored(d)
        yield d
        assert stop(d)[0] == 0
    assert "Traceback" not in d.logs(), d.logs()


PAGES = [
    ("/", 200), ("/?sort=score", 200), ("/?sort=change", 200), ("/?sort=worst", 400),
    (f"/agents/{SCORED}?window=24h", 200), (f"/agents/{THIN}?window=7d", 200),
    (f"/agents/{SCORED}?window=30d&only=failures&component=citation_rate&unlabelled=1&page=1", 200),
    (f"/agents/{SCORED}?window=24h&page=9", 200), (f"/agents/{SCORED}?page=0", 400),
    (f"/agents/{SCORED}?window=1y", 400), (f"/agents/{SCORED}?only=passes", 400),
    (f"/agents/{SCORED}?component=vibes", 400), (f"/agents/{SCORED}?unlabelled=yes", 400),
    ("/agents/nobody?window=24h", 404), ("/agents/%3Cscript%3E", 404), ("/methodology", 200),
    ("/login", 200), ("/login?next=//evil.example", 200),
]


def review_of(live: Running) -> str:
    """The id of the review the daemon opened for ada (below the threshold at its first evaluation)."""
    status, text = live.get("/v1/reviews")
    assert status == 200, text
    [review] = json.loads(text)["reviews"]
    assert (review["agent"], review["reason"]) == (SCORED, "below")
    return str(review["id"])


def review_pages(review: str) -> list[tuple[str, int]]:
    return [("/reviews", 200), ("/reviews?state=open", 200), ("/reviews?state=closed", 200),
            ("/reviews?state=stale", 400), (f"/reviews/{review}", 200), ("/reviews/r-20260101-00000000", 404),
            ("/reviews/%3Cscript%3E", 404)]


@pytest.mark.parametrize("signed_in", [False, True])
def test_every_page_is_valid_html_with_the_headers(live: Running, signed_in: bool, tmp_path: Path) -> None:
    client = Client(live.base)
    if signed_in:
        status, headers, _ = client.fetch("/login", {"csrf_token": client.token("/login"), "reviewer": "alice",
                                                     "token": TOKEN, "next": "/"})
        assert status == 303 and headers["Location"] == "/"
    for path, expected in PAGES + review_pages(review_of(live)):
        status, headers, body = client.fetch(path)
        assert status == expected, (path, status, body[:300])
        assert headers["Content-Type"].startswith("text/html"), path
        assert headers["Cache-Control"] == "no-store", path
        assert_headers(headers, path)
        assert_valid(body, path)
        assert ("signed in as" in body) == signed_in, path


def test_form_answers_and_refusals_are_valid_html_with_the_headers(live: Running) -> None:
    client = Client(live.base)
    # Sign-in refused: no form token (403), then a wrong token (401).
    for form, expected in (({"reviewer": "alice", "token": TOKEN}, 403),
                           ({"csrf_token": client.token("/login"), "reviewer": "alice", "token": "nope"}, 401)):
        status, headers, body = client.fetch("/login", form)
        assert status == expected, body[:300]
        assert_headers(headers, f"POST /login {expected}")
        assert_valid(body, f"POST /login {expected}")
    status, headers, _ = client.fetch("/login", {"csrf_token": client.token("/login"), "reviewer": "alice",
                                                 "token": TOKEN, "next": f"/agents/{SCORED}?window=24h"})
    assert status == 303 and headers["Location"] == f"/agents/{SCORED}?window=24h"
    assert_headers(headers, "POST /login 303")
    token = client.token(f"/agents/{SCORED}?window=24h")
    label = {"csrf_token": token, "decision": f"{SCORED}-1", "value": "up", "next": "/"}
    for form, expected in (({**label, "csrf_token": ""}, 403), ({**label, "decision": "no-such-id"}, 404),
                           ({**label, "value": "sideways"}, 400), ({**label, "note": "n" * 1001}, 400)):
        status, headers, body = client.fetch("/labels", form)
        assert status == expected, (form, status, body[:300])
        assert_headers(headers, f"POST /labels {expected}")
        assert_valid(body, f"POST /labels {expected}")
    status, headers, body = client.fetch("/labels", label)
    assert status == 303 and headers["Location"] == "/"
    # Closing ada's review from its page: refused without the token (403), with no note (400), for an unknown
    # review (404); closed (303 back to it), then closed already (409).
    review = review_of(live)
    token = client.token(f"/reviews/{review}")
    close = f"/reviews/{review}/close"
    for path, form, expected in ((close, {"note": "found it"}, 403), (close, {"note": " ", "csrf_token": token}, 400),
                                 ("/reviews/r-nope/close", {"note": "x", "csrf_token": token}, 404),
                                 (close, {"note": "<b>ada</b> cites nothing", "csrf_token": token}, 303),
                                 (close, {"note": "again", "csrf_token": token}, 409)):
        status, headers, body = client.fetch(path, form)
        assert status == expected, (path, form, status, body[:300])
        assert_headers(headers, f"POST {path} {expected}")
        if expected == 303:
            assert headers["Location"] == f"/reviews/{review}"
        else:
            assert_valid(body, f"POST {path} {expected}")
    for path in (f"/reviews/{review}", "/reviews?state=closed"):  # the close and its note on the pages
        status, headers, body = client.fetch(path)
        assert status == 200 and "&lt;b&gt;ada&lt;/b&gt; cites nothing" in body, path
        assert_valid(body, path)
    status, headers, body = client.fetch("/logout", {"csrf_token": "wrong"})
    assert status == 403
    assert_valid(body, "POST /logout 403")
    status, headers, _ = client.fetch("/logout", {"csrf_token": token})
    assert status == 303 and headers["Location"] == "/"
    # Signed out: a label goes to the sign-in, and back to where it was posted from; so does a close.
    status, headers, _ = client.fetch("/labels", label)
    assert status == 303 and headers["Location"] == "/login?next=%2F"
    status, headers, _ = client.fetch(close, {"note": "x"})
    assert status == 303 and headers["Location"] == f"/login?next=%2Freviews%2F{review}"


def test_the_other_answers_carry_the_headers_too(live: Running) -> None:
    client = Client(live.base)
    for path in ("/static/honestyd.css", "/metrics", "/healthz", "/v1/agents", "/openapi.json", "/no/such/route"):
        _, headers, _ = client.fetch(path)
        assert_headers(headers, path)
    status, headers, css = client.fetch("/static/honestyd.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css") and "url(" not in css
