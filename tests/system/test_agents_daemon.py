"""The real daemon with many agents and with agents named anything: /metrics stays bounded, every link works."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

from collectors.rfc3339 import format_ts
from tests.daemon_harness import Running, daemon, stop, wait_for

AGENTS = 20_000
LONG = ("L" * 129, "é" * 65, "🤖" * 40)  # over 128 UTF-8 bytes each


def _line(agent: str, i: int, ts: datetime) -> str:
    return json.dumps({"id": f"{agent}-{i}", "ts": format_ts(ts), "agent": agent, "kind": "dm", "thread": f"t{i}",
                       "text": f"update {i} see https://docs.example.org/{i}"}) + "\n"


def _fleet(root: Path, now: datetime) -> None:
    """20,000 agents × 3 decisions in one log (agent i's latest i seconds ago), and three over-long names."""
    (root / "heartbeats").mkdir(parents=True)
    with (root / "heartbeats" / "fleet.jsonl").open("w", encoding="utf-8") as f:
        for i in range(AGENTS):
            for k in range(3):
                f.write(_line(f"agent-{i:05d}", k, now - timedelta(seconds=i, minutes=10 * k)))
        for name in LONG:
            for k in range(3):
                f.write(_line(name, k, now - timedelta(minutes=k)))


def _warnings_naming(d: Running, agent: str) -> int:
    return sum(1 for line in d.logs().splitlines() if "WARNING" in line and repr(agent) in line)


def test_twenty_thousand_agents_give_a_bounded_scrape(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    root = tmp_path / "state"
    _fleet(root, now)
    with daemon(tmp_path, root) as d:  # ready: the first evaluation, of every agent, is published
        health: list[int] = []
        scrape = threading.Thread(target=lambda: health.append(d.get("/metrics")[0]))
        scrape.start()
        health.append(d.get("/healthz")[0])  # the loop answers while a scrape is in flight
        scrape.join(30)
        assert health == [200, 200] or health == [200, 200][::-1]
        status, body = d.get("/metrics")
        assert status == 200 and len(body.encode("utf-8")) < 10_000_000
        series = [line for line in body.splitlines() if line and not line.startswith("#")]
        assert len(series) < 60_000
        samples = d.metrics()
        over = {"max_agents": float(AGENTS - 1000), "agent_name_too_long": float(len(LONG))}
        for reason, count in over.items():
            assert samples[("honesty_agents_over_limit", (("reason", reason),))] == count
        exported = {dict(labels)["agent"] for name, labels in samples if name == "honesty_window_decisions"}
        assert exported == {f"agent-{i:05d}" for i in range(1000)}  # the 1,000 with the latest decisions
        # Held back from /metrics, still scored and served.
        code, text = d.get("/v1/agents/agent-19999?window=24h")
        assert code == 200 and json.loads(text)["decisions"] == 3
        assert d.get(f"/agents/{'L' * 129}?window=24h")[0] == 200
        # No daily history rows for it either (they grow the store by agents × windows × components a day).
        assert json.loads(d.get("/v1/agents/agent-19999/history?window=24h")[1])["points"] == []
        assert len(json.loads(d.get("/v1/agents/agent-00000/history?window=24h")[1])["points"]) == 1
        # Named once in the log, and not again at the next evaluation.
        assert _warnings_naming(d, "agent-01000") == 1
        assert "more agents are not exported to /metrics" in d.logs()
        with (root / "heartbeats" / "fleet.jsonl").open("a", encoding="utf-8") as f:
            f.write(_line("agent-00000", 99, now))
        wait_for(lambda: d.metric("honesty_window_decisions", agent="agent-00000", window="24h") == 4, 30,
                 "a second evaluation")
        assert _warnings_naming(d, "agent-01000") == 1
        assert stop(d)[0] == 0


# --- agents named anything

NASTY = (
    "{{7*7}}", "a/b", "../../etc/passwd", "..", ".", "100%", "%2F", "%25", "a?b=c&d", "a#frag", "sp ace", "+plus",
    "semi;colon", "back\\slash", "<b>&amp;\"'</b>", "ünï ✓ 名前", "\u202eevil", "ctl\x1b[2J", "tab\there", "~user",
)


class _Links(HTMLParser):
    """Every ``<a href>`` of a page, and the text of its ``<h1>``."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.h1 = ""
        self._in_h1 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [v for k, v in attrs if k == "href" and v]
        self._in_h1 = tag == "h1"

    def handle_endtag(self, tag: str) -> None:
        self._in_h1 = self._in_h1 and tag != "h1"

    def handle_data(self, data: str) -> None:
        if self._in_h1:
            self.h1 += data


def _parse(html: str) -> _Links:
    links = _Links()
    links.feed(html)
    return links


def test_every_agent_the_index_links_reaches_its_own_page_and_api(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    (root / "heartbeats" / "nasty.jsonl").write_text(
        "".join(_line(name, k, now - timedelta(minutes=k + 1)) for name in NASTY for k in range(5)), encoding="utf-8")
    with daemon(tmp_path, root) as d:
        code, text = d.get("/v1/agents")
        assert code == 200
        listed = json.loads(text)["agents"]
        assert set(listed) == set(NASTY)
        status, index = d.get("/")
        assert status == 200
        hrefs = [h for h in _parse(index).hrefs if h.startswith("/agents/")]
        assert sorted(hrefs) == sorted(w["audit"] for a in listed.values() for w in a.values())
        for agent, windows in listed.items():
            for window, entry in windows.items():
                href = entry["audit"]
                code, page = d.get(href)
                assert code == 200, (agent, href)
                assert _parse(page).h1 == f"{agent} · {window}", (agent, href)  # escaped in HTML, parsed back
                segment = urlsplit(href).path.removeprefix("/agents/")
                assert "/" not in segment
                for api in (f"/v1/agents/{segment}?window={window}", f"/v1/agents/{segment}/audit?window={window}",
                            f"/v1/agents/{segment}/history?window={window}"):
                    code, body = d.get(api)
                    assert code == 200, (agent, api)
                    assert json.loads(body)["agent"] == agent, (agent, api)
        assert stop(d)[0] == 0
