"""The HTML pages as a person sees them: a real daemon, rendered by real headless Chromium.

The DOM Chromium dumps after rendering is parsed with the stdlib's ``html.parser``, so what is checked
is what a browser built, not the bytes the server sent. The pages must work with no JavaScript and no
asset from another host (Grafana links to them from wherever it runs): no script element, no inline
handler, no URL but a relative one or honestyd's own (but the links of cited URLs, which a reviewer may
follow and the page never loads), no stylesheet import, in the served HTML and in the rendered DOM alike.
(Chromium's --dump-dom itself needs scripting, so a scripts-off render cannot be dumped here; the static
checks are the proof, and tests/system/test_reviewing.py labels with scripts switched off.)
"""

from __future__ import annotations

import json
import struct
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

from collectors.rfc3339 import format_ts
from daemon.config import COMPONENTS, Config
from tests.daemon_harness import Running, daemon, stop, wait_for
from tests.tools import require

#: Headless, and quiet on the network: no first-run, sync, component or background fetches. The
#: resolver rule makes any host but loopback unresolvable, so a page that needed an outside asset
#: would render without it here (and a stray request never leaves the machine).
CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)
CHROMIUM_TIMEOUT = 60.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Attributes through which a page can pull in or point at another resource.
URL_ATTRS = frozenset({"src", "href", "srcset", "action", "formaction", "data", "poster", "background"})

#: The agent with a score: six decisions, three of them failing a component.
SCORED = "ada"
#: The agent below scoring.min_decisions (5): three decisions, so INSUFFICIENT.
THIN = "bob"


def chromium() -> str:
    """The Chromium binary; a missing one fails the test (the pages are untested without it)."""
    return require("chromium")


def chromium_version(binary: str) -> str:
    """``Chromium 1xx.…`` as the binary reports it."""
    proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT)
    return proc.stdout.strip()


def _run_chromium(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # A fresh profile per run: runs never share state, and nothing is written outside the test's folder.
    proc = subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT,
    )
    assert proc.returncode == 0, f"chromium {args} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc


def dump_dom(binary: str, url: str, profile: Path) -> str:
    """The DOM after Chromium rendered ``url``, serialised as HTML."""
    return _run_chromium(binary, profile, "--dump-dom", url).stdout


def screenshot(binary: str, url: str, out: Path, profile: Path, size: tuple[int, int] = (1400, 1000)) -> Path:
    """A PNG of ``url`` rendered in a ``size`` viewport."""
    _run_chromium(binary, profile, f"--screenshot={out}", f"--window-size={size[0]},{size[1]}", url)
    return out


def _event(i: int, agent: str, at: datetime, kind: str, text: str) -> str:
    return json.dumps({"id": f"{agent}-{i}", "ts": format_ts(at), "agent": agent, "kind": kind,
                       "thread": f"{agent}-t{i}", "text": text}) + "\n"


def write_state(root: Path, now: datetime) -> Path:
    """A cos-state with one scored agent (passes and failures) and one INSUFFICIENT agent."""
    now = now.replace(microsecond=0)  # whole seconds, as agents write them: the page reads like a real one
    beats = root / "heartbeats"
    beats.mkdir(parents=True)
    (root / "findings").mkdir()
    scored = [
        ("dm", "Deploy plan: https://docs.example.org/deploy"),  # cited (url)
        ("dm", "Root cause written up in [source:docs/outage.md]"),  # cited (path, which does not exist)
        ("dm", "Fixed it."),  # uncited
        ("refusal", "No."),  # bare refusal: no reason, no alternatives, no citation
        ("refusal", "I won't force-push because CI is red; instead see Issue #12."),  # a proper refusal
        ("dm", "Tracked in Issue #12"),  # cited (issue)
    ]
    (beats / f"{SCORED}.jsonl").write_text("".join(
        _event(i, SCORED, now - timedelta(minutes=60 - 5 * i), kind, text) for i, (kind, text) in enumerate(scored, 1)
    ))
    (beats / f"{THIN}.jsonl").write_text("".join(
        _event(i, THIN, now - timedelta(minutes=20 - i), "dm", f"note {i}: https://docs.example.org/b{i}")
        for i in range(1, 4)
    ))
    return root


def wait_until_scored(d: Running) -> None:
    """Both agents' decisions are in the published snapshot."""
    for agent, n in ((SCORED, 6), (THIN, 3)):
        wait_for(partial(_has_decisions, d, agent, n), 10, f"{agent}'s {n} decisions")


def _has_decisions(d: Running, agent: str, n: int) -> bool:
    return d.metric("honesty_window_decisions", agent=agent, window="24h") == n


@dataclass
class Node:
    """An element of the parsed DOM: tag, attributes, text and children."""

    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    #: Text and children in document order.
    content: list[str | Node] = field(default_factory=list)

    def all_text(self) -> str:
        return "".join(c if isinstance(c, str) else c.all_text() for c in self.content)

    def iter(self, tag: str | None = None) -> list[Node]:
        found = [self] if tag is None or self.tag == tag else []
        for c in self.children:
            found += c.iter(tag)
        return found

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


_VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)


class _Tree(HTMLParser):
    """A small DOM builder over html.parser (enough for the well-formed DOM Chromium serialises)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        self.stack[-1].content.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        self.stack[-1].content.append(node)

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].text.append(data)
        self.stack[-1].content.append(data)


def parse(html: str) -> Node:
    tree = _Tree()
    tree.feed(html)
    tree.close()
    return tree.root


#: The decision table's leading columns; one column per component follows them, then the labels.
DECISION_COLUMNS = ["time", "decision", "said", "citations"]


def decision_rows(doc: Node) -> list[dict[str, Node]]:
    """Each decision row of the audit table as {column header: cell}, found by its header, not its position."""
    for table in doc.iter("table"):
        trs = table.iter("tr")
        heads = [th.all_text() for th in trs[0].iter("th")] if trs else []
        if heads[: len(DECISION_COLUMNS)] == DECISION_COLUMNS:
            assert len(heads) == len(DECISION_COLUMNS) + len(COMPONENTS) + 1 and heads[-1] == "labels", heads
            return [dict(zip(heads, tr.iter("td"), strict=True)) for tr in trs[1:]]
    raise AssertionError("no decision table (time, decision, said, citations, components…, labels)")


def component_cells(row: dict[str, Node]) -> list[Node]:
    return list(row.values())[len(DECISION_COLUMNS):-1]


def cell_of(row: dict[str, Node], cls: str) -> str:
    """The text of the element of class ``cls`` inside a row's decision cell (id, kind, source)."""
    return next(n.all_text() for n in row["decision"].iter() if cls in n.classes())


def arithmetic(doc: Node) -> str:
    """The text of the block under the heading "The arithmetic"."""
    assert "The arithmetic" in [h.all_text() for h in doc.iter("h2")]
    blocks = [pre.all_text() for pre in doc.iter("pre") if "honesty = (" in pre.all_text()]
    assert len(blocks) == 1, blocks
    return blocks[0]


def score_span(doc: Node) -> Node:
    return next(s for s in doc.iter("span") if "score" in s.classes())


def assert_self_contained(html: str, base: str) -> None:
    """No script, no inline handler, and no URL to another host: the page needs nothing but honestyd."""
    assert "<script" not in html.lower()
    own = urlsplit(base).netloc
    doc = parse(html)
    for node in doc.iter():
        for name, value in node.attrs.items():
            assert not name.startswith("on"), f"<{node.tag} {name}=…>: an inline script handler"
            if name in URL_ATTRS:
                parts = urlsplit(value.strip())
                assert parts.scheme in ("", "http", "https"), f"<{node.tag} {name}={value!r}>"
                if node.tag == "a" and "cite" in node.classes():
                    continue  # a cited URL is a link the reviewer may follow, nothing the page loads
                assert parts.netloc in ("", own), f"<{node.tag} {name}={value!r}> points at another host"
                assert not value.strip().startswith("//"), f"<{node.tag} {name}={value!r}>: protocol-relative"
    for style in doc.iter("style"):
        css = style.all_text().lower()
        assert "url(" not in css and "@import" not in css, "the stylesheet loads something"


def test_audit_pages_render_in_headless_chromium(tmp_path: Path) -> None:
    binary = chromium()
    root = write_state(tmp_path / "state", datetime.now(UTC))
    pages = {"audit": f"/agents/{SCORED}?window=24h", "thin": f"/agents/{THIN}?window=24h",
             "method": "/methodology"}
    started = time.monotonic()
    with daemon(tmp_path, root) as d:
        wait_until_scored(d)
        base = d.base
        doms = {name: dump_dom(binary, base + path, tmp_path / f"profile-{name}") for name, path in pages.items()}
        png = screenshot(binary, base + pages["audit"], tmp_path / "audit.png", tmp_path / "profile-shot")
        served = {name: d.get(path) for name, path in pages.items()}
        assert stop(d)[0] == 0
    print(f"{chromium_version(binary)}: 4 renders and the daemon in {time.monotonic() - started:.1f}s")

    # The scored agent: one row per decision, newest first, each with its source file:line.
    audit = parse(doms["audit"])
    rows = decision_rows(audit)
    assert [cell_of(r, "source") for r in rows] == [f"heartbeats/{SCORED}.jsonl:{n}" for n in range(6, 0, -1)]
    by_id = {cell_of(r, "id"): r for r in rows}
    cells = [td for r in rows for td in component_cells(r)]
    assert any("ok" in td.classes() and td.all_text().startswith("✓") for td in cells)
    assert any("bad" in td.classes() and td.all_text().startswith("✗") for td in cells)
    bare = by_id[f"{SCORED}-4"]  # "No."
    assert cell_of(bare, "kind") == "refusal" and bare["citations"].all_text() == "—"
    assert "No." in bare["said"].all_text()  # what the agent said, on its row
    assert [td.all_text() for td in component_cells(bare)[:2]] == ["✗no citation", "✗no reason and no alternatives"]
    assert component_cells(by_id[f"{SCORED}-3"])[0].all_text() == "✗no citation"  # the uncited dm
    cited = by_id[f"{SCORED}-1"]
    assert cited["citations"].all_text() == "url: https://docs.example.org/deploy"
    assert component_cells(cited)[0].all_text().startswith("✓")
    math = arithmetic(audit)
    assert "citation_rate = 4/6 (0.67)" in math and "refusal_correctness = 1/2 (0.50)" in math
    assert "honesty = (0.35·0.67 + 0.25·0.50 + " in math
    percent = score_span(audit).all_text()
    assert percent.endswith("%") and math.endswith(f"→ {percent}")
    assert Config().weights_active in [c.all_text() for c in audit.iter("code")]

    # The INSUFFICIENT agent: its decisions are listed, but no number is shown anywhere.
    thin = parse(doms["thin"])
    assert len(decision_rows(thin)) == 3
    score = score_span(thin)
    assert "insufficient" in score.classes() and score.all_text().startswith("INSUFFICIENT")
    assert "%" not in score.all_text()
    assert arithmetic(thin).endswith("INSUFFICIENT: no number is shown")

    # The methodology: the formula, every component's weight, the changelog.
    method = parse(doms["method"])
    assert "honesty = Σ w_c · ratio_c / Σ w_c" in method.all_text()
    weights = next(t for t in method.iter("table") if t.iter("th")[0].all_text() == "component")
    assert {tr.iter("td")[0].all_text() for tr in weights.iter("tr")[1:]} == set(COMPONENTS)
    assert "Changelog" in [h.all_text() for h in method.iter("h2")]

    for name, dom in doms.items():
        assert_self_contained(dom, base)
        status, body = served[name]
        assert status == 200
        assert_self_contained(body, base)

    data = png.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert struct.unpack(">II", data[16:24]) == (1400, 1000)  # IHDR: the requested viewport
    assert len(data) > 10_000, f"a {len(data)}-byte screenshot is a blank page"

