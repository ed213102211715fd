"""daemon/http/pages.py and the templates: what an agent or a reviewer wrote is text on every page (agent names,
texts, prompts, threads, citations, notes, decision ids in form fields), ``{{ }}`` is never evaluated, quotes never
end an attribute; the numbers and words the pages show."""

from __future__ import annotations

from datetime import timedelta

import pytest
from markupsafe import escape

from collectors.records import ComponentResult, DayCounts, Event, Label
from daemon.config import COMPONENTS, Config, GitHub
from daemon.http.pages import (
    AgentInputs,
    Viewer,
    audit_page,
    band,
    index_page,
    login_page,
    message_page,
    methodology_page,
)
from daemon.http.templating import anchor
from daemon.snapshot import Counters, Snapshot, build_snapshot
from tests.helpers import T0, ev, records, score, t

EVIL = '<script>alert("x")</script> {{ 7*7 }} {% raw %} \'quoted\' "double" & ampersand'
CFG = Config(github=GitHub(repo="acme/app"))


def _events(agent: str, n: int = 6) -> list[Event]:
    return [ev(f"{agent}-{k}", t(-10 * k - 1), agent=agent, thread=f"thread {EVIL}", prompt=f"prompt {EVIL}",
               text=f"said {EVIL} https://x.org/ok?a=1&b=\"2\" javascript:alert(1)",
               cites=("javascript://%0aalert(1)", "ftp://files.example/x", "https://x.org/p?q=<b>", "docs/<i>.md"),
               path="heartbeats/a.jsonl",
               line=k + 1) for k in range(n)]


def _snapshot(events: list[Event], labels: tuple[Label, ...] = ()) -> Snapshot:
    return build_snapshot(records(*events, labels=labels), T0, CFG, Counters())


def _agent_page(events: list[Event], agent: str, viewer: Viewer | None = None, labels: tuple[Label, ...] = ()
                ) -> str:
    """The agent page as the daemon serves it: the audit rows from the records, with their outcomes."""
    window = score(records(*events, labels=labels), T0)
    return audit_page(window.agents[agent], window, _snapshot(events, labels), inputs=AgentInputs(None, list(labels)),
                      viewer=viewer or Viewer())


def test_everything_an_agent_wrote_is_text_on_its_page() -> None:
    page = _agent_page(_events(EVIL), EVIL)
    escaped = str(escape(EVIL))
    assert "<script>" not in page and "{{ 7*7 }} {% raw %}" in page  # shown as written, never evaluated
    assert f"<h1>{escaped} · 24h</h1>" in page  # the agent's name
    assert f"said {escaped}" in page and f"prompt {escaped}" in page and f"thread {escaped}" in page
    # Citations: the http(s) ones are links, percent-encoded; javascript: and paths are text only.
    assert 'href="https://x.org/p?q=%3Cb%3E"' in page
    assert 'href="javascript' not in page and "url: javascript://%0aalert(1)" in page  # a url citation, not a link
    assert 'href="ftp' not in page and "url: ftp://files.example/x" in page
    assert "path: docs/&lt;i&gt;.md" in page


def test_notes_and_names_of_reviewers_are_text_and_ids_stay_inside_their_attributes() -> None:
    decision = f"{EVIL}-1"
    labels = (Label(t(-1), decision, "down", EVIL, "labels/api.jsonl", 1, 0, f"note {EVIL}"),
              Label(t(-1), decision, "up", "maya", "labels/api.jsonl", 2, 0, '"><img src=x onerror=alert(1)>'))
    page = _agent_page(_events(EVIL), EVIL, Viewer("maya", 'tok"><b>', '/agents/x?window=24h&a="<>'), labels)
    escaped = str(escape(EVIL))
    assert f"note {escaped}" in page and "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<img" not in page
    assert f'<input type="hidden" name="decision" value="{escaped}-1">' in page
    assert 'name="csrf_token" value="tok&#34;&gt;&lt;b&gt;"' in page
    assert f'name="next" value="/agents/x?window=24h&amp;a=&#34;&lt;&gt;#{anchor(decision)}"' in page
    assert f'<tr id="{anchor(decision)}"' in page
    assert '<span class="emoji">👍</span> <span class="by">maya</span> (you)' in page  # hers, apart


def test_the_index_the_methodology_and_the_forms_escape_too() -> None:
    snap = _snapshot(_events(EVIL))
    escaped = str(escape(EVIL))
    for page in (index_page(snap, viewer=Viewer(EVIL, "t", "/")),
                 methodology_page(CFG, [EVIL], f"changelog {EVIL}", viewer=Viewer(EVIL, "t", "/")),
                 login_page(viewer=Viewer(None, EVIL, "/"), next_path=f"/a?b={EVIL}", reviewer=EVIL, error=EVIL),
                 message_page(EVIL, EVIL, back="/")):
        assert "<script>" not in page and escaped in page and "{{ 7*7 }}" in page


def test_insufficient_says_n_and_what_it_means() -> None:
    index = index_page(_snapshot(_events("bob", 3)))
    assert "INSUFFICIENT · N=3" in index and "fewer than the 5 a score needs" in index
    page = _agent_page(_events("bob", 3), "bob")
    assert '<span class="score insufficient">INSUFFICIENT · N=3</span>' in page
    assert "the window holds 3 decisions, fewer than the 5 a score needs" in page


def test_bands_have_words_as_well_as_colours() -> None:
    a = _snapshot(_events("ada")).windows["24h"].agents["ada"]
    assert band(None, None, CFG) == ("na", "not listed")
    from dataclasses import replace

    assert band(replace(a, score=0.9), None, CFG) == ("ok", "at or above 70 %")
    assert band(replace(a, score=0.5), None, CFG) == ("alert", "below the 70 % alert")
    assert band(replace(a, score=0.72), replace(a, score=0.95), CFG) == ("drop", "more than 15 points under its 7d "
                                                                                 "score")
    assert band(replace(a, score=None), None, CFG)[1] == "INSUFFICIENT · N=6"


def _history(agent: str, scores: list[float | None]) -> list[DayCounts]:
    out = []
    for k, s in enumerate(scores):
        day = T0.date() - timedelta(days=len(scores) - 1 - k)
        passed = 0 if s is None else round(s * 10)
        parts = tuple(ComponentResult(passed, 10, 0) for _ in COMPONENTS)
        out.append(DayCounts(day, agent, "24h", 2 if s is None else 10, parts))
    return out


def test_the_index_sorts_by_name_score_and_seven_day_change() -> None:
    uncited = [ev(f"b{k}", t(-k - 1), agent="bob", text="trust me", line=100 + k) for k in range(6)]
    events = [*_events("ada"), *uncited, *_events("cy", 2)]
    snap = build_snapshot(records(*events), T0, CFG, Counters())
    assert snap.windows["24h"].agents["bob"].score < snap.windows["24h"].agents["ada"].score  # type: ignore[operator]
    history = [*_history("ada", [0.4, None, 0.8]), *_history("bob", [0.9, 0.9, 0.5]), *_history("cy", [None])]

    def order(sort: str) -> list[str]:
        page = index_page(snap, history=history, sort=sort)
        return sorted(("ada", "bob", "cy"), key=lambda n: page.index(f'<td class="agent">{n}</td>'))

    assert order("name") == ["ada", "bob", "cy"]
    assert order("score") == ["bob", "ada", "cy"]  # the worst first, INSUFFICIENT after every number
    assert order("change") == ["bob", "ada", "cy"]  # −40 points, +40, none known
    page = index_page(snap, history=history, sort="change", unlabelled={"ada": 2})
    assert "-40 pts" in page and "+40 pts" in page
    assert 'only=failures&amp;unlabelled=1">2</a>' in page  # the count links to the list to review


@pytest.mark.parametrize("signed_in", [False, True])
def test_label_forms_only_for_a_signed_in_reviewer(signed_in: bool) -> None:
    page = _agent_page(_events("ada"), "ada", Viewer("alice", "tok", "/agents/ada") if signed_in else Viewer())
    assert (page.count('action="/labels"') == 6) == signed_in
    assert ('name="value" value="down"' in page) == signed_in
    assert ("sign in to label" in page) != signed_in
