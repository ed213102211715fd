"""Hostile content end to end, in-process (no daemon): what agents write must never become markup, a metric, a
changelog key or a file read outside the state root.

A real temp state holds events whose agent, thread, text and citations carry HTML/JS (``<script>``,
``"><img src=x onerror=alert(1)>``), control characters, NUL, U+202E and other bidi/line separators, Markdown and
changelog structure (``## 2026-01-01``, ``<!-- honestyd:… -->``), lone surrogates (``\\ud800`` escapes), and strings
of about 1 MiB (just under the line limit). It is scored both ways the project reads state: the batch reader
(``collectors.batch.scan_state``) and the daemon's path (``Ingester`` → ``Store`` → ``load_records``); both must
agree. Then:

* ``daemon.http.pages`` (index, every audit page, methodology): parsed with ``html.parser``; only the elements and
  attributes the templates write appear, every ``href`` is a same-site path, and each hostile string shows up as text;
  the page encodes as UTF-8 (what the server sends);
* ``daemon.metrics``: the exposition parses back with ``prometheus_client.parser`` with every agent label value
  round-tripping, and ``promtool check metrics`` is clean when promtool is on PATH;
* ``daemon.changelog``: drop and digest entries for two days append to exactly one ``## YYYY-MM-DD`` heading per day,
  no key but the ones written, no raw ``<``; appending again writes nothing; a symlinked changelog is refused;
* paths: ``../../etc/passwd``-style citations, and symlinks (file, directory, chain, relative, to the parent, to a
  prefix-sharing sibling, a loop) never lead to opening or listing anything outside the root (checked with a
  ``sys.addaudithook`` on ``open``/``os.scandir``/``os.listdir``) in ``walk``, ``scan_state``, ``Ingester.scan``
  and ``check_path``.

A bug found in the store path (lone surrogates) is kept as a regression test at the end.
Measured: about 6 s on the 2-core box, mostly the 1 MiB strings going through SQLite and the pages.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.batch import scan_state
from collectors.jsonl import MAX_LINE_BYTES
from collectors.links import LinkMap
from collectors.records import Event, FileEntry, Label
from collectors.statedir import walk, walk_tree
from daemon.changelog import INTRO, append_entries, digest_entry
from daemon.config import Config
from daemon.http.pages import AgentInputs, Viewer, audit_page, index_page, methodology_page
from daemon.http.reviewpages import queue_page, review_page
from daemon.ingest import Ingester
from daemon.limits import name_bytes
from daemon.metrics import CONTENT_TYPE, SnapshotRenderer, label_value
from daemon.snapshot import Snapshot, build_snapshot
from daemon.store import Store
from daemon.verify.paths import check_path
from scorers.context import Records
from scorers.score import evaluate
from tests.helpers import opened_reviews, review_entries
from tests.tools import require

AT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
BIG = MAX_LINE_BYTES - 4096  # one ~1 MiB string per line, just under the line limit once JSON-quoted

HOSTILE = (
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "'><svg/onload=alert(1)>",
    "</pre></td></tr></table><script>x</script>",
    "\u202eevil\u202c and \u2066isolate\u2069",
    "ctl\x01\x07\x1b[31m\x7f\x9b",
    "nul\x00byte",
    "line\nbreak\r\n## 2026-01-01\n<!-- honestyd:digest:2026-01-01 -->\n# Title",
    "a\u2028b\u2029c\x0bd\x0ce\x85f",
    "javascript:alert(1)",
    "{{7*7}}${7*7}<%= 7*7 %>",
    'back\\slash"quote\'',
    "\ufeffbom | pipe | `tick` *star* _u_ [x](y)",
    "--> <!-- -->",
)
SURROGATE_AGENT = "sur\ud800rogate"  # from a JSON "\ud800" escape: legal JSON, not encodable as UTF-8
AGENTS = (*HOSTILE, SURROGATE_AGENT, "A" * 65536)
TAGS_WE_WRITE = {"html", "head", "meta", "title", "link", "body", "header", "nav", "main", "div", "p", "a", "h1", "h2",
                 "table", "thead", "tbody", "tr", "th", "td", "span", "code", "small", "br", "pre", "strong", "time",
                 "details", "summary", "q", "figure", "figcaption", "form", "input", "button", "label", "select",
                 "option", "dl", "dt", "dd", "section", "ol", "li", "textarea",
                 "svg", "rect", "line", "text", "polyline", "circle", "path"}
ATTRS_WE_WRITE = {"lang", "charset", "name", "content", "rel", "href", "class", "id", "method", "action", "type",
                  "value", "maxlength", "placeholder", "aria-label", "title", "checked", "selected", "role", "for",
                  "autocomplete", "required", "rows", "cols",
                  "xmlns", "width", "height", "viewbox", "x", "y", "x1", "y1", "x2", "y2", "fill", "stroke",
                  "stroke-width", "stroke-dasharray", "text-anchor", "font-size", "points", "cx", "cy", "r", "d"}
CLASSES_WE_WRITE = {"ok", "bad", "na", "pending", "why", "score", "insufficient", "top", "who", "inline", "reviewer",
                    "signin", "notice", "head", "legend", "chart", "progress", "filters", "failures", "pager",
                    "decisions", "failing", "ts", "said", "prompt", "thread", "k", "text", "cites", "cite", "labels",
                    "label", "mine", "other", "up", "down", "emoji", "by", "note", "label-form", "threshold",
                    "mark-weights", "mark-gap", "mark-drop", "series", "dot", "empty", "spark", "sort", "agents",
                    "agent", "band", "alert", "drop", "change", "unlabelled", "band-ok", "band-alert", "band-drop",
                    "band-insufficient", "band-na", "message", "error", "login", "decision", "id", "kind", "source",
                    "queue", "review", "review-open", "reviews", "open", "closed", "reason", "reason-below",
                    "reason-drop", "at-opening", "opened", "age", "state", "review-head", "snapshot", "now",
                    "score-then", "score-now", "audit", "opening", "gone", "close-form", "alerts", "history"}
#: Where a link may point: a path of honestyd's, percent-encoded through and through; or a cited http(s) URL, on the
#: citation's own link only, with no character a URL must not hold bare.
LOCAL_HREF = re.compile(r"/(?!/)[A-Za-z0-9/%?=&._~-]*")
CITED_HREF = re.compile(r"https?://[A-Za-z0-9:/?#\[\]@!$&'()*+,;=%._~-]+")


def _line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=True).encode("ascii") + b"\n"  # ASCII: surrogates travel as \ud800 escapes


def _events_for(k: int, agent: str) -> list[bytes]:
    """Six decisions per agent (enough for a score), hostile in every free-text field."""
    bad = HOSTILE[k % len(HOSTILE)]
    lines = []
    for i in range(6):
        cited = i < 2  # two cite hostile targets; four cite nothing, so the score is low and a drop entry is due
        lines.append(_line({
            "id": f"{bad[:20]}-{k}-{i}", "ts": (AT - timedelta(minutes=30 + i)).isoformat(), "agent": agent,
            "kind": "refusal" if i == 0 else "dm", "thread": bad, "prompt": bad if i < 2 else None,
            "text": (f"{bad} [x](javascript:alert(1)) [source:{bad}] https://ex.example/{bad} see ../../etc/passwd"
                     if cited else bad.replace("[x](y)", "").replace("#", "")),
            "citations": [bad, "../../etc/passwd", "/etc/shadow", "cos-state/../../x", f"https://h/<{bad}>"]
            if cited else [],
            "subject": [bad, "../up.md"], "reason": bad, "alternatives": [bad],
        }))
    return lines


def _big_events() -> list[bytes]:
    """~1 MiB text, thread and citation (one per line, each just under the 1 MiB limit) by a benign agent."""
    base = {"ts": (AT - timedelta(minutes=5)).isoformat(), "agent": "big", "kind": "dm"}
    x = "<script>" + "x" * (BIG - 20) + "</script>"
    lines = [
        _line({**base, "id": "big-text", "text": x}),
        _line({**base, "id": "big-thread", "thread": x}),
        _line({**base, "id": "big-cite", "citations": ["https://h/" + "a" * BIG]}),
        _line({**base, "id": "big-nul", "text": "\x00" * (BIG // 6)}),  # \u0000 is 6 bytes once escaped
    ]
    assert all(len(line) <= MAX_LINE_BYTES + 1 for line in lines)
    return lines


def make_state(root: Path, agents: tuple[str, ...] = AGENTS) -> None:
    (root / "heartbeats").mkdir(parents=True)
    lines = [line for k, agent in enumerate(agents) for line in _events_for(k, agent)]
    (root / "heartbeats" / "hostile.jsonl").write_bytes(b"".join(lines))
    (root / "heartbeats" / "big.jsonl").write_bytes(b"".join(_big_events()))
    (root / "briefs").mkdir()
    for k, bad in enumerate(HOSTILE[:4]):
        (root / "briefs" / f"ted-{k}.md").write_text(
            f"---\nagent: {bad.splitlines()[0]}\nts: {(AT - timedelta(hours=1)).isoformat()}\n---\n{bad}\n",
            encoding="utf-8")


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile") / "state"
    make_state(root)
    return root


@pytest.fixture(scope="module")
def snap(state: Path) -> Snapshot:
    config = Config()
    scan = scan_state(state, config)
    # Ingest refuses lone surrogates (the store could not write them): exactly those lines are rejected.
    assert scan.rejects and {r.reason for r in scan.rejects} == {"lone_surrogate"}
    # The renderers must still survive such a name if one ever reaches them: add the agent's events directly.
    template = [e for e in scan.events if e.agent == HOSTILE[0]]
    forged = [e._replace(agent=SURROGATE_AGENT, id=f"sur-{i}", line=100_000 + i) for i, e in enumerate(template)]
    records = Records([*scan.events, *forged], scan.labels, scan.files, [])
    snapshot = build_snapshot(records, AT, config, _counters())
    assert evaluate(records, AT, "24h", config) == snapshot.windows["24h"]  # the pure entry point agrees
    return snapshot


def _counters() -> Any:
    from daemon.snapshot import Counters

    return Counters(ingest_records={"heartbeats": 3, "<script>": 1}, ingest_rejects={("heartbeats", '"><img'): 2})


# --- batch and daemon paths agree, byte for byte


def _comparable(events: Sequence[Event]) -> set[tuple[Any, ...]]:
    return {(e.id, e.agent, e.kind, e.thread, e.text, e.citations, e.prompt, e.reason, e.alternatives, e.subject)
            for e in events}


def test_store_keeps_hostile_strings_exactly(tmp_path: Path) -> None:
    """The daemon's path (Ingester → SQLite → records) returns every hostile string exactly as the batch reader does
    (NUL, control characters, bidi marks, 1 MiB strings). Lone surrogates are tested on their own below."""
    root = tmp_path / "state"
    make_state(root, tuple(a for a in AGENTS if a != SURROGATE_AGENT))
    config = Config()
    batch = scan_state(root, config)
    with Store.open(tmp_path / "db.sqlite") as store:
        Ingester(store, root, config, clock=lambda: AT).scan()
        stored = store.load_records().events
        assert store.rejects() == []
    assert len(stored) == len(batch.events) == 6 * (len(AGENTS) - 1) + 4 + 4
    assert _comparable(stored) == _comparable(batch.events)


# --- HTML pages


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        raise AssertionError(f"an HTML comment appeared: {data[:80]!r}")


def assert_page_is_ours(page: str) -> str:
    """Every element and attribute is one the templates write; returns the page's text."""
    page.encode("utf-8")  # what aiohttp does with text=: a lone surrogate here would be an HTTP 500
    parser = _Collector()
    parser.feed(page)
    parser.close()
    for tag, attrs in parser.tags:
        assert tag in TAGS_WE_WRITE, f"injected element <{tag}>"
        for name, value in attrs:
            assert name in ATTRS_WE_WRITE and not name.startswith("on"), f"injected attribute {name}= on <{tag}>"
            if name == "href":
                assert value is not None, tag
                cited = tag == "a" and ("class", "cite") in attrs
                assert (LOCAL_HREF if not cited else CITED_HREF).fullmatch(value), value
            if name == "action":
                assert value is not None and LOCAL_HREF.fullmatch(value), value
            if name == "class":
                assert value is not None and set(value.split()) <= CLASSES_WE_WRITE, value
    return "".join(parser.text)


def _norm(text: str) -> str:
    """HTML parsing folds CR/CRLF into LF and may drop or replace NUL: compare modulo those."""
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "").replace("\ufffd", "")


def test_pages_render_hostile_content_as_text(snap: Snapshot, state: Path) -> None:
    text = _norm(assert_page_is_ours(index_page(snap, viewer=Viewer(HOSTILE[0], HOSTILE[1], "/"))))
    for agent in HOSTILE:
        assert _norm(agent) in text, agent  # shown, as text
    pages = 0
    for result in snap.windows.values():
        for a in result.agents.values():
            # Signed in as a hostile name, with a hostile form token and page URL; every decision labelled by
            # reviewers with hostile names and notes (the notes a reviewer types reach every other reviewer's page).
            labels = [Label(AT, r.decision.id, value, bad, "labels/api.jsonl", k, 0, bad)
                      for r in a.rows for k, (value, bad) in enumerate(zip(("up", "down"), HOSTILE[:2], strict=True))]
            viewer = Viewer(HOSTILE[pages % 2], HOSTILE[2], "/agents/x?window=24h&page=2")
            text = assert_page_is_ours(audit_page(a, result, snap, inputs=AgentInputs(None, labels), viewer=viewer))
            pages += 1
            if a.agent in HOSTILE:
                assert "../etc/passwd" in text  # the citation is listed, as text
                assert _norm(HOSTILE[1]) in _norm(text) and "👎" in text  # the notes, as text
                said = next(r.decision.text for r in a.rows if r.decision.text)
                assert _norm(said[:200]) in _norm(text)  # what the agent said, as text
    assert pages >= 3 * len(HOSTILE)
    changelog = "<script>alert(1)</script>\n</pre><img src=x onerror=alert(1)>"
    agents = sorted({a for w in snap.windows.values() for a in w.agents})
    text = assert_page_is_ours(methodology_page(snap.config, agents, changelog))
    assert changelog in text


def test_review_pages_render_hostile_content_as_text(snap: Snapshot) -> None:
    # The reviews the opening rule opens for the hostile agents (the real evidence), one closed with a hostile note;
    # every listed decision labelled by reviewers with hostile names and notes.
    queue = opened_reviews(snap, close=(HOSTILE[0], HOSTILE[1]))
    reviews = queue.listing()
    agents = {r.agent for r in reviews}
    assert len(agents & set(HOSTILE)) >= 3 and any(not r.is_open for r in reviews)
    viewer = Viewer(HOSTILE[2], HOSTILE[1], "/reviews")
    text = _norm(assert_page_is_ours(queue_page(reviews, AT, viewer=viewer)))
    assert all(_norm(a) in text for a in agents) and _norm(HOSTILE[1]) in text  # names and the note, as text
    assert _norm(assert_page_is_ours(index_page(snap, reviews=reviews)))
    for review in reviews:
        a = snap.windows["24h"].agents[review.agent]
        labels = [Label(AT, d, value, bad, "labels/api.jsonl", k, 0, bad) for d in review.failed_ids()
                  for k, (value, bad) in enumerate(zip(("up", "down"), HOSTILE[:2], strict=True))]
        text = _norm(assert_page_is_ours(review_page(review, AT, snap=snap, live=a, labels=labels,
                                                     viewer=Viewer(HOSTILE[0], HOSTILE[2], f"/reviews/{review.id}"))))
        assert _norm(review.agent) in text and _norm(str(review.evidence["why"])) in text
        if review.failed_ids():
            assert _norm(HOSTILE[1]) in text and "👎" in text  # the notes, as text


# --- Prometheus metrics


def test_metrics_parse_back_and_lint_clean(snap: Snapshot) -> None:
    body, content_type = SnapshotRenderer().exposition(snap), CONTENT_TYPE
    assert content_type.startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(body.decode("utf-8"))}
    decisions = families["honesty_window_decisions"]
    seen = {(s.labels["agent"], s.labels["window"]): s.value for s in decisions.samples}
    for window, result in snap.windows.items():
        for agent, a in result.agents.items():
            if name_bytes(agent) > snap.config.limits.max_agent_name:  # [limits]: scored, but no series
                assert (label_value(agent), window) not in seen
                continue
            assert seen[(label_value(agent), window)] == a.decisions
    for agent in AGENTS:
        if agent != SURROGATE_AGENT and name_bytes(agent) <= snap.config.limits.max_agent_name:
            assert label_value(agent) == agent  # everything but a lone surrogate round-trips exactly
            assert (agent, "24h") in seen
    assert ("sur\\ud800rogate", "24h") in seen  # backslashreplace: distinct, encodable
    # No two agents collapsed into one series.
    assert len(seen) == sum(1 for r in snap.windows.values() for a in r.agents if a in snap.exported)
    proc = subprocess.run([require("promtool"), "check", "metrics"], input=body, capture_output=True, timeout=60,
                          check=False)
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc.stdout + proc.stderr


# --- the changelog


def test_changelog_has_one_heading_per_day_and_no_forged_key(snap: Snapshot, tmp_path: Path) -> None:
    path = tmp_path / "iris" / "honesty-changelog.md"
    later = Snapshot(at=AT + timedelta(days=1), config=snap.config, windows=snap.windows)
    written: list[str] = []
    for s in (snap, later):
        entries = [*review_entries(s), digest_entry(s)]
        assert len(entries) > 2  # the hostile agents cite nothing that resolves: their scores drop
        written += [e.key for e in append_entries(path, entries)]
        assert append_entries(path, entries) == []  # idempotent
    text = path.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.*)$", text, re.MULTILINE)
    assert headings == [AT.date().isoformat(), (AT + timedelta(days=1)).date().isoformat()]
    assert [line for line in text.splitlines() if re.match(r" {0,3}#", line)] == [
        "# Honesty score changelog", *(f"## {h}" for h in headings)]
    keys = re.findall(r"^<!-- honestyd:(\S+) -->$", text, re.MULTILINE)
    methodology = re.findall(r"^<!-- honestyd:methodology sha256=", text, re.MULTILINE)
    assert keys == written and not methodology and len(set(keys)) == len(keys)
    assert "digest:2026-01-01" not in keys
    assert text.count("<!--") == len(keys) + INTRO.count("<!--")  # the intro names the key comments once
    assert text.count("-->") == len(keys) + INTRO.count("-->")
    assert "<script" not in text and "<img" not in text and "<svg" not in text
    assert "\x00" not in text and "\u202e" not in text and "\ud800" not in text and "\r" not in text


def test_changelog_refuses_a_symlink_out_of_the_root(snap: Snapshot, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("precious\n")
    link = tmp_path / "state" / "iris" / "honesty-changelog.md"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    with pytest.raises(OSError, match="symbolic link"):
        append_entries(link, [digest_entry(snap)])
    assert outside.read_text() == "precious\n"


# --- paths that try to escape the root


_OPENED: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED is not None and event in ("open", "os.scandir", "os.listdir") and args:
        target = args[0]
        if isinstance(target, str | bytes | os.PathLike):
            _OPENED.append(os.fsdecode(target))


sys.addaudithook(_audit)  # permanent for the process, inert unless _OPENED is a list


@contextlib.contextmanager
def recording() -> Iterator[list[str]]:
    """Every path opened or listed by Python code inside the block."""
    global _OPENED
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


SECRET = b'{"id":"SECRET","ts":"2026-06-01T11:00:00Z","agent":"mallory","kind":"dm","text":"exfiltrated"}\n'


def escape_root(tmp_path: Path) -> tuple[Path, Path]:
    """A root full of ways out, and the outside they point to."""
    root, outside, sibling = tmp_path / "state", tmp_path / "outside", tmp_path / "state-evil"
    for d in (root / "heartbeats", root / "briefs", outside / "heartbeats", sibling):
        d.mkdir(parents=True)
    (outside / "secret.jsonl").write_bytes(SECRET)
    (outside / "heartbeats" / "x.jsonl").write_bytes(SECRET)
    (outside / "brief.md").write_text("---\nagent: mallory\n---\nexfiltrated\n")
    (sibling / "s.jsonl").write_bytes(SECRET)
    hb = root / "heartbeats"
    (hb / "ok.jsonl").write_bytes(b'{"id":"ok","ts":"2026-06-01T11:00:00Z","agent":"ada","kind":"dm"}\n')
    (hb / "abs.jsonl").symlink_to(outside / "secret.jsonl")  # absolute, out
    (hb / "rel.jsonl").symlink_to(Path("../../outside/secret.jsonl"))  # relative, out
    (hb / "sib.jsonl").symlink_to(Path("../../state-evil/s.jsonl"))  # a sibling whose name extends the root's
    (hb / "hop.jsonl").symlink_to(Path("chain.jsonl"))  # inside → inside → out
    (hb / "chain.jsonl").symlink_to(outside / "secret.jsonl")
    (hb / "dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    (root / "briefs" / "evil.md").symlink_to(outside / "brief.md")
    (root / "up").symlink_to(Path(".."))  # the root's parent
    (root / "ext").symlink_to(outside / "heartbeats")  # a directory out
    (root / "loop").symlink_to(Path("."))  # back into the root: walked once
    return root, outside


def _assert_inside(paths: list[str], root: Path, allowed: tuple[Path, ...] = ()) -> None:
    real_root = os.path.realpath(root)
    for p in paths:
        real = os.path.realpath(p)
        ok = real == real_root or real.startswith(real_root + os.sep)
        ok = ok or any(real == os.path.realpath(a) or real.startswith(os.path.realpath(a) + os.sep) for a in allowed)
        assert ok, f"opened or listed outside the root: {p} → {real}"


def test_walk_and_scans_never_read_outside_the_root(tmp_path: Path) -> None:
    root, _ = escape_root(tmp_path)
    db = tmp_path / "db" / "h.sqlite"
    db.parent.mkdir()
    with recording() as opened:
        listed = {f.path for f in walk(root)}
        scan = scan_state(root, Config())
        with Store.open(db) as store:
            ingester = Ingester(store, root, Config(), clock=lambda: AT)
            ingester.scan()
            for rel in ("heartbeats/abs.jsonl", "heartbeats/rel.jsonl", "heartbeats/sib.jsonl",
                        "up/outside/secret.jsonl", "../outside/secret.jsonl", "heartbeats/../../outside/secret.jsonl",
                        "ext/x.jsonl"):
                ingester.ingest_path(rel)  # a watcher reporting a path it should never follow
            stored = [e.id for e in store.events()]
            indexed = set(store.index_rows())
    assert listed == {"heartbeats/ok.jsonl"}, listed
    assert [e.id for e in scan.events] == ["ok"] and set(scan.files) == {"heartbeats/ok.jsonl"}
    assert stored == ["ok"] and indexed == {"heartbeats/ok.jsonl"}
    _assert_inside(opened, root, allowed=(db.parent,))
    assert any(p.endswith("ok.jsonl") for p in opened), "the audit hook saw nothing: the check would be vacuous"


@pytest.mark.parametrize("target", ["../../etc/passwd", "/etc/passwd", "cos-state/../../etc/passwd",
                                    "heartbeats/../../outside/secret.jsonl", "up/outside/secret.jsonl",
                                    "ext/x.jsonl", "heartbeats/abs.jsonl", "heartbeats/sib.jsonl"])
def test_cited_paths_that_escape_never_exist_and_are_never_opened(tmp_path: Path, target: str) -> None:
    from collectors.citations import extract, normalise_path

    root, _ = escape_root(tmp_path)
    # Even indexed (as a buggy or hostile index might have it), a path that resolves outside does not exist.
    files = {p: FileEntry(p, AT - timedelta(days=1)) for p in ("heartbeats/ok.jsonl", normalise_path(target))}
    with recording() as opened:
        (cited,) = [c for c in extract("", (target,), "") if c.type == "path"]
        outcome = check_path(root, cited.target, files, LinkMap(walk_tree(root).links), AT)
    assert cited.target == normalise_path(target)
    assert outcome.ok is False, outcome
    _assert_inside(opened, root)


# --- a bug this suite found in the store path (fixed; kept as a regression test)


def test_a_lone_surrogate_line_does_not_stop_ingestion(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    (root / "heartbeats" / "a.jsonl").write_bytes(
        b'{"id":"s1","ts":"2026-05-31T03:40:00Z","agent":"x\\ud800","kind":"dm","text":"a\\udfff"}\n'
        b'{"id":"ok","ts":"2026-05-31T03:40:00Z","agent":"ada","kind":"dm"}\n')
    with Store.open(tmp_path / "db.sqlite") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        ingester.scan()  # raises UnicodeEncodeError today
        ingester.scan()
        assert "ok" in {e.id for e in store.events()}
