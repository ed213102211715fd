"""daemon/http/templating.py: which citations become links, row anchors, and a page that can always be sent."""

from __future__ import annotations

import pytest

from collectors.citations import Citation
from daemon.http.pages import Viewer
from daemon.http.templating import anchor, cite_href, environment, render


@pytest.mark.parametrize(("target", "href"), [
    ("https://docs.example.org/deploy", "https://docs.example.org/deploy"),
    ("http://x.org/a b?q=\"<c>\"", "http://x.org/a%20b?q=%22%3Cc%3E%22"),
    ("https://x.org/caf\u00e9#s", "https://x.org/caf%C3%A9#s"),
    ("javascript://%0aalert(1)", None), ("ftp://files.example/x", None), ("https:///nohost", None),
    ("https://[::1", None), ("data:text/html,x", None),
])
def test_only_http_urls_with_a_host_are_links(target: str, href: str | None) -> None:
    assert cite_href(Citation("url", target)) == href


def test_paths_issues_and_runs_are_never_links() -> None:
    for c in (Citation("path", "https://x.org/"), Citation("issue", "acme/app#1"), Citation("run", "run:1")):
        assert cite_href(c) is None


def test_anchors_are_stable_ids_for_any_decision_id() -> None:
    ids = ["e-1", "", "a b", '"><x>', "\ud800", "é" * 500]
    anchors = [anchor(i) for i in ids]
    assert len(set(anchors)) == len(ids)
    assert all(a.startswith("d-") and a[2:].isalnum() and len(a) == 14 for a in anchors)
    assert anchor("e-1") == anchors[0]


def test_a_lone_surrogate_is_shown_escaped_not_a_500() -> None:
    page = render(environment(), "message.html", {"viewer": Viewer(), "title": "x\ud800", "message": "m",
                                                  "back": None})
    page.encode("utf-8")
    assert "x\\ud800" in page


def test_undefined_names_are_errors_not_blanks() -> None:
    import jinja2

    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("{{ nothing.here }}").render()
    assert environment().from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"  # autoescape on strings too
