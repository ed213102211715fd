"""End to end: the real Prometheus (Debian package ``prometheus``) scrapes the real ``honestyd run`` and
evaluates the shipped alerts.yml; an agent that starts slipping drives its score down and its alerts on.

The rules Prometheus loads are ops/prometheus/alerts.yml with only the ``for:`` durations shortened (to 1s),
derived from the file at test time, so the expressions under test are the shipped ones.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.rfc3339 import format_ts
from tests.conftest import ROOT
from tests.daemon_harness import daemon, end, free_port, stop, wait_for, write_config
from tests.tools import require

ALERTS = ROOT / "ops" / "prometheus" / "alerts.yml"
SCORE_ALERTS = {"HonestyScoreLow", "HonestyScoreDrop", "HonestyConfidentlyBad"}
#: Seconds any one awaited change may take. Scrapes and rule evaluations come every second, but Prometheus
#: 2.42 hands targets to the scraper at most every 5 s, so the first scrape comes about 5 s after start.
STEP = 20.0

_FOR = re.compile(r"(?m)^(\s+)for:\s*\S+[ \t]*$")

# Like daemon/demo.py's agents: the honest one cites a URL (no check result exists, so only
# citation_rate counts and the score is 1.0); the slipping one mostly cites nothing, and otherwise
# cites files that do not exist (gap_surfacing pending for its 5-minute grace, citation_rate passed).
HONEST = ("Deploy of api finished; runbook followed.", "https://docs.acme.example/runbooks/deploy")
UNCITED = ("Q3 revenue closed 14% above plan.", None)
GHOST = ("Board deck numbers are final.", "reports/board-deck-final.md")


def shortened_rules(text: str) -> str:
    """alerts.yml with every ``for:`` set to 1s and nothing else changed."""
    out, count = _FOR.subn(r"\1for: 1s", text)
    assert count == text.count("- alert:"), "every alert has exactly one for: line"
    return out


def _decision(agent: str, n: int, ts: datetime, line: tuple[str, str | None]) -> str:
    text, source = line
    obj: dict[str, object] = {"id": f"{agent}-{n}", "ts": format_ts(ts), "agent": agent, "kind": "dm",
                              "thread": f"{agent}-{n}", "text": text}
    if source is not None:
        obj["citations"] = [source]
    return json.dumps(obj) + "\n"


def _state(tmp: Path, now: datetime) -> Path:
    """ada and gus honest; zoe honest, also two days ago (her 7d reference); ivy INSUFFICIENT (2 decisions)."""
    root = tmp / "state"
    (root / "heartbeats").mkdir(parents=True)
    recent = {"ada": 8, "gus": 8, "zoe": 6, "ivy": 2}
    for agent, count in recent.items():
        lines = [_decision(agent, i, now - timedelta(minutes=30 + i), HONEST) for i in range(count)]
        if agent == "zoe":
            lines += [_decision(agent, 100 + i, now - timedelta(days=2, minutes=i), HONEST) for i in range(20)]
        (root / "heartbeats" / f"{agent}.jsonl").write_text("".join(lines))
    return root


@dataclass
class Prometheus:
    """A started Prometheus: its process, base URL and log."""

    proc: subprocess.Popen[bytes]
    base: str
    log: Path

    def api(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(self.base + path + query, timeout=5) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as err:  # Prometheus explains a refused query in a JSON body
            with err:
                raise AssertionError(f"{path} {params}: HTTP {err.code}: {err.read()[:500]!r}") from None
        assert body["status"] == "success", body
        return body["data"]

    def query(self, promql: str) -> dict[str, float]:
        """Instant query → {the series' ``agent`` label (or its labels as JSON): value}."""
        result = self.api("/api/v1/query", query=promql)["result"]
        return {r["metric"].get("agent", json.dumps(r["metric"], sort_keys=True)): float(r["value"][1])
                for r in result}

    def alerts(self) -> list[dict[str, Any]]:
        """The active (pending or firing) alerts."""
        alerts: list[dict[str, Any]] = self.api("/api/v1/alerts")["alerts"]
        return alerts

    def logs(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")[-4000:]


@contextmanager
def prometheus(tmp: Path, target: str, alertmanager: str | None = None) -> Iterator[Prometheus]:
    """Run Prometheus scraping ``target`` as job honestyd every second with the shortened shipped rules (sending its
    alerts to the Alertmanager at ``alertmanager``, host:port, if given)."""
    binary = require("prometheus")
    tmp.mkdir()
    (tmp / "rules.yml").write_text(shortened_rules(ALERTS.read_text(encoding="utf-8")))
    alerting = "" if alertmanager is None else (
        f"alerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{alertmanager}']\n")
    (tmp / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n"
        "rule_files:\n  - rules.yml\n" + alerting +
        f"scrape_configs:\n  - job_name: honestyd\n    static_configs:\n      - targets: ['{target}']\n")
    port = free_port()
    log = tmp / "prometheus.log"
    args = [binary, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}"]
    with log.open("wb") as log_fh:
        proc = subprocess.Popen(args, cwd=tmp, stdout=log_fh, stderr=subprocess.STDOUT)
    running = Prometheus(proc, f"http://127.0.0.1:{port}", log)
    try:
        def ready() -> bool:
            assert proc.poll() is None, f"prometheus exited {proc.returncode}:\n{running.logs()}"
            try:
                with urllib.request.urlopen(running.base + "/-/ready", timeout=2) as resp:
                    return resp.status == 200
            except urllib.error.HTTPError as err:  # 503 while starting; close it, or its socket leaks
                err.close()
                return False

        wait_for(ready, STEP, "prometheus to be ready")
        yield running
    finally:
        end(proc)  # whatever happened: nothing outlives the test


def _agent_alerts(p: Prometheus) -> dict[tuple[str, str], str]:
    """(alertname, agent) → state of the active alerts that name an agent."""
    return {(a["labels"]["alertname"], a["labels"]["agent"]): a["state"] for a in p.alerts() if "agent" in a["labels"]}


def _rules_healthy_after(p: Prometheus, since: float) -> bool:
    """Every shipped rule has been evaluated, without error, after ``since`` (Unix time)."""
    groups = p.api("/api/v1/rules")["groups"]
    rules = [r for g in groups if g["name"] == "honestyd" for r in g["rules"]]
    assert len(rules) == ALERTS.read_text(encoding="utf-8").count("- alert:"), rules
    for rule in rules:
        assert rule["health"] != "err", f"{rule['name']}: {rule.get('lastError')}"
    evaluated = [datetime.fromisoformat(r["lastEvaluation"].replace("Z", "+00:00")).timestamp() for r in rules]
    return all(r["health"] == "ok" for r in rules) and min(evaluated) > since


@pytest.mark.timeout(60)
def test_a_slipping_agent_fires_the_score_alerts_in_real_prometheus(tmp_path: Path) -> None:
    require("prometheus")  # before anything starts: a missing binary fails at once, with the hint
    started = time.monotonic()
    now = datetime.now(UTC)
    root = _state(tmp_path, now)
    config = write_config(tmp_path / "config.toml", rescore="1s")
    with daemon(tmp_path, root, config=config) as d, prometheus(tmp_path / "prom", f"127.0.0.1:{d.port}") as p:
        try:
            # Healthy: scraped, every rule evaluated cleanly on the real series, nothing active.
            wait_for(lambda: p.query('up{job="honestyd"}') and p.query('honesty_score{window="24h"}').get("zoe") == 1.0,
                     STEP, "the first scrape")
            seen = time.time()
            wait_for(lambda: _rules_healthy_after(p, seen), STEP, "a rule evaluation after the first scrape")
            assert p.alerts() == [], p.alerts()
            scores = p.query('honesty_score{window="24h"}')
            assert scores == {"ada": 1.0, "gus": 1.0, "zoe": 1.0}, scores  # ivy: INSUFFICIENT, no series
            assert p.query('honesty_score_sufficient{window="24h"}')["ivy"] == 0.0

            # zoe slips: 30 uncited decisions and 6 citing files that do not exist, appended live.
            slip_at = datetime.now(UTC)
            lines = [_decision("zoe", 1000 + i, slip_at - timedelta(seconds=i), GHOST if i % 6 == 0 else UNCITED)
                     for i in range(36)]
            with (root / "heartbeats" / "zoe.jsonl").open("a", encoding="utf-8") as f:
                f.write("".join(lines))

            # 24h: (6 honest + 6 ghost-cited) / 42 pass citation_rate; 7d adds 20 honest from two days ago.
            # Waiting for the final value, not for "< 0.70": the tail may ingest the burst in parts.
            wait_for(lambda: p.query('honesty_score{agent="zoe",window="24h"}') == {"zoe": pytest.approx(12 / 42)},
                     STEP, "zoe's 24h score to fall in Prometheus")
            assert p.query('honesty_score{agent="zoe",window="24h"}')["zoe"] < 0.70
            assert p.query('honesty_score{agent="zoe",window="7d"}') == {"zoe": pytest.approx(32 / 62)}

            def zoe_alerts() -> dict[str, str] | None:
                active = {name: state for (name, agent), state in _agent_alerts(p).items() if agent == "zoe"}
                return active if set(active) >= SCORE_ALERTS else None

            # Low, and Drop against her 7d score; her interval's upper bound (~0.44) is under 0.70 too.
            active = wait_for(zoe_alerts, STEP, "HonestyScoreLow, HonestyScoreDrop and HonestyConfidentlyBad for zoe")
            assert set(active) == SCORE_ALERTS and set(active.values()) <= {"pending", "firing"}, active
            low = next(a for a in p.alerts() if a["labels"]["alertname"] == "HonestyScoreLow")
            assert low["labels"]["window"] == "24h" and low["labels"]["severity"] == "warning"
            assert low["annotations"]["description"].endswith(f"http://127.0.0.1:{d.port}/agents/zoe?window=24h")
            wait_for(lambda: p.query('ALERTS{alertname="HonestyScoreLow",alertstate="firing"}').get("zoe"), STEP,
                     "HonestyScoreLow firing once its (shortened) for: has passed")

            # Nobody else: the honest agents and the INSUFFICIENT one stay quiet, and so does the daemon.
            assert {agent for _, agent in _agent_alerts(p)} == {"zoe"}
            assert {a["labels"]["alertname"] for a in p.alerts()} == SCORE_ALERTS
            assert "ivy" not in p.query("honesty_score")
            assert stop(d)[0] == 0
        except BaseException:
            print(f"--- prometheus log ---\n{p.logs()}\n--- honestyd log ---\n{d.logs()[-4000:]}")
            raise
    print(f"prometheus end to end: {time.monotonic() - started:.1f}s")
