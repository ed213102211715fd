"""The reviewer's workspace used as a reviewer uses it: real headless Chromium (driven over the DevTools protocol,
tests/cdp.py) against the real daemon, signing in, filtering, labelling, signing out.

The state: the browser test's two agents (ada scored, with passes and failures; bob INSUFFICIENT), one more
decision of ada's with a prompt and a long text holding markup, 29 days of stored history for ada (two days
INSUFFICIENT, a drop) and a recorded change of weights, and two reviewers. With ``HONESTYD_SCREENSHOTS=DIR`` set,
the pages are also saved as PNGs there (docs/img/ holds the ones in docs/operations.md).

What a click costs, from the release of 👎 to the page that shows the label on its row, is printed (a figure for
docs/performance.md, not an assertion).
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiohttp import web

from collectors.records import ComponentResult, DayCounts
from collectors.rfc3339 import format_ts
from daemon import changelog
from daemon.config import COMPONENTS, Config, GitHub
from daemon.http.templating import anchor
from daemon.store import Store
from tests.cdp import Browser
from tests.daemon_harness import Running, daemon, free_port, start_demo, stop, wait_for
from tests.servers import serve_in_thread
from tests.system.test_browser import SCORED, THIN, Node, chromium, parse, write_state

REVIEWERS = {"alice": "tok-alice-7f3a", "maya": "tok-maya-91c2"}
LONG = ("Deploy is green across all regions <script>alert(1)</script> and {{ 7*7 }} \"quoted\" — " * 8).strip()
SHOTS = os.environ.get("HONESTYD_SCREENSHOTS")


def _history(db: Path, today: datetime) -> None:
    """29 days before today: ada mostly scoring, two INSUFFICIENT days, one fall of 30 points."""
    rows = []
    for n in range(1, 30):
        day = (today - timedelta(days=n)).date()
        cited = 9 if n not in (6, 7) else 4  # a bad stretch 6–7 days ago
        decisions = 2 if n in (12, 20) else 10  # below the floor of 5: INSUFFICIENT
        parts = [ComponentResult(cited, 10, 0), ComponentResult(2, 3, 0), ComponentResult(3, 4, 0),
                 ComponentResult(1, 1, 0), ComponentResult(0, 0, 0), ComponentResult(0, 0, 0)]
        for window in ("24h", "7d", "30d"):
            rows.append(DayCounts(day, SCORED, window, decisions if window == "24h" else 40, tuple(parts)))
    with Store.open(db) as store, store.transaction():
        store.put_history(rows)


def _weights_change(root: Path, at: datetime) -> None:
    """A methodology change that moved the active weights, as the changelog records it."""
    alt = {"v2026.Q2": (0.3, 0.3, 0.2, 0.1, 0.05, 0.05)}
    new = Config(github=GitHub(repo="acme/app"))
    old = Config(github=GitHub(repo="acme/app"), weights_versions={**new.weights_versions, **alt},
                 weights_active="v2026.Q2")
    changelog.append_entries(root / new.changelog, changelog.methodology_entries(old, new, at), root)


def _state(tmp: Path, now: datetime) -> Path:
    root = write_state(tmp / "state", now)
    extra = {"id": f"{SCORED}-7", "ts": format_ts(now.replace(microsecond=0) - timedelta(minutes=2)),
             "agent": SCORED, "kind": "dm", "thread": "deploy-42", "prompt": "Is the deploy done?", "text": LONG}
    with (root / "heartbeats" / f"{SCORED}.jsonl").open("a") as f:
        f.write(json.dumps(extra) + "\n")
    _history(tmp / "honestyd.db", now)
    _weights_change(root, now - timedelta(days=9))
    return root


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("reviewing")
    root = _state(tmp, datetime.now(UTC))
    env = {"HONESTYD_REVIEWERS": ",".join(f"{r}:{t}" for r, t in REVIEWERS.items())}
    with daemon(tmp, root, env=env) as d:
        for agent, n in ((SCORED, 7), (THIN, 3)):
            wait_for(lambda a=agent, k=n: d.metric("honesty_window_decisions", agent=a, window="24h") == k, 10,
                     f"{agent}'s {n} decisions")
        yield d
        assert stop(d)[0] == 0
    assert "Traceback" not in d.logs(), d.logs()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    with Browser(chromium(), tmp_path / "profile") as b:
        yield b


def shot(b: Browser, name: str) -> None:
    """A full-page PNG of what the browser shows, saved as NAME in $HONESTYD_SCREENSHOTS (when set)."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        b.screenshot(Path(SHOTS) / name, full=True)


def sign_in(b: Browser, d: Running, reviewer: str, token: str | None = None, start: str = "/") -> Node:
    """Sign in from the page ``start`` by its "sign in" link; returns the page signing in led to."""
    b.goto(d.base + start)
    b.click_and_load("a.signin")
    b.type("#reviewer", reviewer)
    b.type("#token", token or REVIEWERS[reviewer])
    b.click_and_load("form.login button")
    return parse(b.html())


def row(doc: Node, decision: str) -> Node:
    """The table row of one decision."""
    found = [tr for tr in doc.iter("tr") if tr.attrs.get("id") == anchor(decision)]
    assert len(found) == 1, f"no single row for {decision}"
    return found[0]


def cells(tr: Node) -> dict[str, str]:
    """A row's cells by class (the component cells by their position: Cite … Corrected)."""
    tds = tr.iter("td")
    named = {c: td.all_text() for td in tds for c in td.classes() & {"ts", "decision", "said", "cites", "labels"}}
    return {**named, **dict(zip(COMPONENTS, (td.all_text() for td in tds[4:10]), strict=True))}


def labels_on(tr: Node) -> list[tuple[str, str]]:
    """(classes, text) of each label shown on a row."""
    return [(" ".join(sorted(p.classes())), p.all_text()) for p in tr.iter("p") if "label" in p.classes()]


def label_lines(d: Running) -> list[dict[str, str]]:
    path = d.root / "labels" / "api.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_reviewer_signs_in_filters_to_failures_labels_a_row_and_signs_out(live: Running, browser: Browser) -> None:
    d, b = live, browser
    agent_page = f"/agents/{SCORED}?window=24h"
    b.goto(d.base + agent_page)
    anonymous = parse(b.html())
    assert not anonymous.iter("form") or all(f.attrs.get("action") != "/labels" for f in anonymous.iter("form"))
    said = cells(row(anonymous, f"{SCORED}-7"))["said"]
    assert "Is the deploy done?" in said and "deploy-42" in said and "<script>alert(1)</script>" in said  # as text
    details = next(n for n in row(anonymous, f"{SCORED}-7").iter("details"))
    assert LONG.endswith(details.all_text().split("more characters", 1)[1].strip()[-40:])  # the rest, folded away

    # A wrong token: 401, the form again; then the right one lands back on the page signing in started from.
    b.click_and_load("a.signin")
    b.type("#reviewer", "alice")
    b.type("#token", "tok-guess")
    b.click_and_load("form.login button")
    assert "Wrong reviewer name or token." in parse(b.html()).all_text()
    b.type("#token", REVIEWERS["alice"])
    b.click_and_load("form.login button")
    page = parse(b.html())
    assert "signed in as alice" in " ".join(page.all_text().split())
    assert "decisions 1–7 of 7" in page.all_text()
    (cookie,) = [c for c in b.cookies() if c["name"] == "honestyd_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]  # http here: not Secure

    # Failures only: every row shown fails a component.
    b.click_and_load("a.failures")
    failing = parse(b.html())
    rows = [tr for tr in failing.iter("tr") if tr.attrs.get("id", "").startswith("d-")]
    assert {tr.attrs["id"] for tr in rows} == {anchor(f"{SCORED}-{n}") for n in (2, 3, 4, 7)}
    assert all("failing" in tr.classes() for tr in rows)
    before = cells(row(failing, f"{SCORED}-3"))
    assert before["self_correction_rate"] == "—" and labels_on(row(failing, f"{SCORED}-3")) == []

    # 👎 with a note on "Fixed it.": the row shows it at once, and self-correction is now pending on it.
    note = '<b>no source</b> {{ 7*7 }} "quoted"'
    target = f"tr#{anchor(f'{SCORED}-3')}"
    b.type(f"{target} input[name=note]", note)
    took = b.click_and_load(f"{target} button[value=down]")
    after = parse(b.html())
    print(f"click on 👎 → the page showing the label on its row: {took * 1000:.0f} ms")
    assert "👎 on ada-3 recorded." in after.all_text()
    shown = labels_on(row(after, f"{SCORED}-3"))
    assert len(shown) == 1 and shown[0][0] == "down label mine"
    assert shown[0][1].startswith("👎 alice (you) · ") and shown[0][1].endswith(f" · {note}")
    assert cells(row(after, f"{SCORED}-3"))["self_correction_rate"].startswith("pending")
    line = label_lines(d)[-1]
    assert {k: line[k] for k in ("decision", "value", "reviewer", "note")} == {
        "decision": f"{SCORED}-3", "value": "down", "reviewer": "alice", "note": note}

    # After a reload (no notice any more), still there; and the unlabelled filter now leaves it out.
    b.goto(d.base + agent_page + "&only=failures")
    again = parse(b.html())
    assert labels_on(row(again, f"{SCORED}-3")) == shown and "recorded." not in again.all_text()
    shot(b, "agent-page.png")
    b.goto(d.base + agent_page + "&only=failures&unlabelled=1")
    unlabelled = parse(b.html())
    assert anchor(f"{SCORED}-3") not in {tr.attrs.get("id") for tr in unlabelled.iter("tr")}

    # Sign out: the index again, no session, no label form anywhere.
    b.goto(d.base + agent_page)
    b.click_and_load("form.inline button")
    out = parse(b.html())
    assert "sign in to label" in out.all_text() and not [c for c in b.cookies() if c["name"] == "honestyd_session"]
    b.goto(d.base + agent_page)
    assert all(f.attrs.get("action") != "/labels" for f in parse(b.html()).iter("form"))


def test_a_second_reviewers_label_shows_beside_the_first(live: Running, browser: Browser) -> None:
    d, b = live, browser
    target = f"tr#{anchor(f'{SCORED}-4')}"
    sign_in(b, d, "alice", start=f"/agents/{SCORED}?window=24h")
    b.click_and_load(f"{target} button[value=down]")
    b.click_and_load("form.inline button")
    page = sign_in(b, d, "maya", start=f"/agents/{SCORED}?window=24h")
    assert [c for c, _ in labels_on(row(page, f"{SCORED}-4"))] == ["down label other"]  # alice's, not maya's
    b.type(f"{target} input[name=note]", "the refusal gives no reason, but it was right to refuse")
    b.click_and_load(f"{target} button[value=up]")
    both = labels_on(row(parse(b.html()), f"{SCORED}-4"))
    assert [c for c, _ in both] == ["label mine up", "down label other"]
    assert both[0][1].startswith("👍 maya (you)") and both[1][1].startswith("👎 alice ·")
    wait_for(lambda: d.metric("honesty_labels", agent=SCORED, value="up") == 1, 10, "maya's 👍 in honesty_labels")
    # The other reviewer's page shows them the other way round.
    b.click_and_load("form.inline button")
    mine = labels_on(row(sign_in(b, d, "alice", start=f"/agents/{SCORED}?window=24h"), f"{SCORED}-4"))
    assert [c for c, _ in mine] == ["down label mine", "label other up"]


EVIL_FORM = """<!doctype html><html><body><form method="post" action="{target}/labels">
<input type="hidden" name="decision" value="{decision}"><input type="hidden" name="value" value="down">
<input type="hidden" name="next" value="/"><button id="go" type="submit">win a prize</button></form></body></html>"""


def test_a_cross_site_form_post_without_the_token_is_refused(live: Running, browser: Browser) -> None:
    d, b = live, browser
    sign_in(b, d, "alice")
    before = label_lines(d)

    async def evil(request: web.Request) -> web.Response:
        return web.Response(text=EVIL_FORM.format(target=d.base, decision=f"{SCORED}-6"), content_type="text/html")

    app = web.Application()
    app.router.add_get("/", evil)
    with serve_in_thread(app) as port:
        b.goto(f"http://127.0.0.1:{port}/")
        b.click_and_load("#go")
        refused = parse(b.html()).all_text()
    assert "Refused" in refused and "nothing was labelled" in refused
    assert label_lines(d) == before  # nothing written
    b.goto(d.base + f"/agents/{SCORED}?window=24h")
    assert labels_on(row(parse(b.html()), f"{SCORED}-6")) == []


def test_with_javascript_disabled_the_page_still_labels(live: Running, browser: Browser) -> None:
    d, b = live, browser
    b.scripts(False)
    page = sign_in(b, d, "maya", start=f"/agents/{SCORED}?window=24h")
    assert not page.iter("script")
    b.click_and_load(f"tr#{anchor(f'{SCORED}-1')} button[value=up]")
    shown = labels_on(row(parse(b.html()), f"{SCORED}-1"))
    assert [c for c, _ in shown] == ["label mine up"] and shown[0][1].startswith("👍 maya (you)")


def test_the_index_shows_bands_sparklines_and_what_is_left_to_label(live: Running, browser: Browser) -> None:
    d, b = live, browser
    b.goto(d.base + "/?sort=score")
    index = parse(b.html())
    rows = [tr for tr in index.iter("tr") if tr.iter("td")]
    assert [tr.iter("td")[0].all_text() for tr in rows] == [SCORED, THIN]  # the scored one first, INSUFFICIENT last
    ada, bob = ({td.attrs.get("class", ""): td for td in tr.iter("td")} for tr in rows)
    assert bob["band insufficient"].all_text() == "INSUFFICIENT · N=3"
    assert "INSUFFICIENT · N=3" in index.all_text() and "fewer than the 5 a score needs" in index.all_text()
    assert any(k.startswith("band ") for k in ada)
    assert len([c for c in ada["spark"].iter("polyline") + ada["spark"].iter("circle")]) >= 1
    assert re.fullmatch(r"\d+", ada["unlabelled"].all_text())
    assert int(ada["unlabelled"].all_text()) <= 4  # four failing decisions, fewer once labelled
    b.goto(d.base + f"/agents/{SCORED}?window=24h")
    chart = next(s for s in parse(b.html()).iter("svg") if "chart" in s.classes())
    titles = [t.all_text() for t in chart.iter("title")]
    assert any("INSUFFICIENT" in t for t in titles)  # the gap days
    assert any("weights changed" in t for t in titles)  # the change of weights
    assert any("score drop" in t for t in titles)  # the bad stretch
    assert any(t.startswith("alert below 70 %") for t in titles)  # the threshold


def test_from_the_demos_banner_to_a_labelled_decision_with_nothing_but_a_browser(tmp_path: Path,
                                                                                 browser: Browser) -> None:
    """`make demo` runs this command; its banner's sign-in line is all a newcomer needs."""
    port = free_port()
    proc, banner = start_demo(tmp_path / "demo", port)
    try:
        found = re.search(r"sign in: +(\S+) +reviewer: (\S+) +token: (\S+)", banner)
        assert found, banner
        url, reviewer, token = found.groups()
        b = browser
        b.goto(url)
        b.type("#reviewer", reviewer)
        b.type("#token", token)
        b.click_and_load("form.login button")
        b.goto(url.replace("/login", "/?sort=score"))
        shot(b, "index.png")
        b.click_and_load("table.agents td a")  # the first agent's score: its page
        page = parse(b.html())
        first = next(tr for tr in page.iter("tr") if tr.attrs.get("id", "").startswith("d-"))
        took = b.click_and_load(f"tr#{first.attrs['id']} button[value=down]")
        print(f"demo: click on 👎 → the page showing the label on its row: {took * 1000:.0f} ms")
        shown = labels_on(next(tr for tr in parse(b.html()).iter("tr") if tr.attrs.get("id") == first.attrs["id"]))
        assert [c for c, _ in shown] == ["down label mine"] and shown[0][1].startswith(f"👎 {reviewer} (you)")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0
