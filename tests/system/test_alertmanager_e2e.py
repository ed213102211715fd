"""End to end with real Prometheus and real Alertmanager (Debian's ``prometheus`` and ``prometheus-alertmanager``):
an agent slips in the real ``honestyd run``, her reviews open, Prometheus evaluates the shipped rules and fires,
Alertmanager posts to the daemon's webhook with the shipped routing, and the alerts are recorded on the reviews; the
daemon restarts in the middle and keeps the queue exactly; a reviewer closes the reviews, ``honesty_reviews_open``
goes back to 0, and the closes are in ``reviews/*.jsonl`` and the changelog.

Prometheus loads ops/prometheus/alerts.yml with its ``for:`` durations shortened to 1s (the shipped ones wait 5-15
minutes), and Alertmanager ops/alertmanager/alertmanager.yml with the webhook's address and token file set for the
test and its group waits shortened to 1s (the shipped 30 s and 5 min); everything else is the shipped text.

Prints the time from zoe's failing decisions being written to her open reviews, and to Alertmanager's alerts on
them.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.rfc3339 import parse_ts
from tests.conftest import ROOT
from tests.daemon_harness import Running, daemon, end, free_port, stop, wait_for, write_config
from tests.system.test_prometheus_e2e import GHOST, STEP, UNCITED, _decision, _state, prometheus
from tests.tools import require

SHIPPED = ROOT / "ops" / "alertmanager" / "alertmanager.yml"
TOKEN = "am-e2e-token-3b7d"
REVIEWER = "rev-e2e-token-8c1f"
ENV = {"HONESTYD_ALERTS_TOKEN": TOKEN, "HONESTYD_REVIEWERS": f"andrew:{REVIEWER}"}
AUTH = {"Authorization": f"Bearer {REVIEWER}", "Content-Type": "application/json"}


def adapted_config(text: str, webhook: str, token_file: Path) -> str:
    """The shipped config with the webhook's URL and token file replaced and the group waits cut to 1s."""
    replacements = [
        (r"(?m)^(      - url: )http://127\.0\.0\.1:9478(/v1/alerts/alertmanager)$", rf"\g<1>{webhook}\g<2>", 1),
        (r"(?m)^(            credentials_file: )\S+$", rf"\g<1>{token_file}", 1),
        (r"(?m)^(\s+group_wait: )30s$", r"\g<1>1s", 2),
        (r"(?m)^(\s+group_interval: )5m$", r"\g<1>1s", 2),
    ]
    for pattern, replacement, count in replacements:
        text, made = re.subn(pattern, replacement, text)
        assert made == count, (pattern, made)
    return text


@contextmanager
def alertmanager(tmp: Path, webhook: str) -> Iterator[str]:
    """Run Alertmanager with the (adapted) shipped config; yields its host:port."""
    binary = require("prometheus-alertmanager")
    tmp.mkdir()
    (tmp / "token").write_text(TOKEN + "\n")
    (tmp / "alertmanager.yml").write_text(adapted_config(SHIPPED.read_text(encoding="utf-8"), webhook, tmp / "token"))
    port = free_port()
    log = tmp / "alertmanager.log"
    args = [binary, f"--config.file={tmp / 'alertmanager.yml'}", f"--storage.path={tmp / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]
    with log.open("wb") as fh:
        proc = subprocess.Popen(args, cwd=tmp, stdout=fh, stderr=subprocess.STDOUT)
    try:
        def ready() -> bool:
            assert proc.poll() is None, f"alertmanager exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as resp:
                    return resp.status == 200
            except OSError:
                return False

        wait_for(ready, STEP, "alertmanager to be ready")
        yield f"127.0.0.1:{port}"
    finally:
        end(proc)  # whatever happened: nothing outlives the test
        print(f"--- alertmanager log (tail) ---\n{log.read_text(errors='replace')[-1500:]}")


def _reviews(d: Running, state: str = "") -> list[dict[str, Any]]:
    status, text = d.get("/v1/reviews" + (f"?state={state}" if state else ""))
    assert status == 200, text
    found: list[dict[str, Any]] = json.loads(text)["reviews"]
    return found


def _detail(d: Running, rid: str) -> dict[str, Any]:
    status, text = d.get(f"/v1/reviews/{rid}")
    assert status == 200, text
    found: dict[str, Any] = json.loads(text)
    return found


def _queue(d: Running) -> list[dict[str, Any]]:
    """Every review in full, without what the clock changes (its age)."""
    return [{k: v for k, v in _detail(d, r["id"]).items() if k != "age_seconds"} for r in _reviews(d)]


@pytest.mark.timeout(150)
def test_an_alert_from_real_alertmanager_lands_on_the_review_and_a_restart_keeps_the_queue(tmp_path: Path) -> None:
    require("prometheus")
    require("prometheus-alertmanager")
    port = free_port()
    root = _state(tmp_path, datetime.now(UTC))
    config = write_config(tmp_path / "config.toml", rescore="1s")
    webhook = f"http://127.0.0.1:{port}"
    with alertmanager(tmp_path / "am", webhook) as am, \
            prometheus(tmp_path / "prom", f"127.0.0.1:{port}", alertmanager=am) as p:
        with daemon(tmp_path, root, config=config, env=ENV, port=port) as d:
            wait_for(lambda: p.query('honesty_score{window="24h"}').get("zoe") == 1.0, STEP, "the first scrape")
            assert _reviews(d) == []
            # zoe slips: 30 uncited decisions and 6 citing files that do not exist (as test_prometheus_e2e.py).
            slip_at = datetime.now(UTC)
            lines = [_decision("zoe", 1000 + i, slip_at - timedelta(seconds=i), GHOST if i % 6 == 0 else UNCITED)
                     for i in range(36)]
            with (root / "heartbeats" / "zoe.jsonl").open("a", encoding="utf-8") as f:
                f.write("".join(lines))
            written = datetime.now(UTC)  # the failing decisions (dated up to 35 s back) exist from now on
            opened = wait_for(lambda: len(_reviews(d, "open")) == 2 and _reviews(d, "open"), STEP, "zoe's reviews")
            assert {(r["agent"], r["reason"], r["by"]) for r in opened} == {("zoe", "below", "honestyd"),
                                                                          ("zoe", "drop", "honestyd")}
            below = next(r for r in opened if r["reason"] == "below")
            drop = next(r for r in opened if r["reason"] == "drop")
            assert drop["why"].startswith("dropped from ") and drop["why"].endswith(" in 24h")
            to_open = (min(parse_ts(r["opened_at"]) for r in opened) - written).total_seconds()

            def alerted() -> bool:
                # The shipped inhibit rule folds HonestyScoreLow into HonestyConfidentlyBad (zoe's upper bound is
                # under 0.70 too): either one is the below review's.
                lows = {a["alertname"] for a in _detail(d, below["id"])["alerts"]}
                drops = {a["alertname"] for a in _detail(d, drop["id"])["alerts"]}
                return bool(lows & {"HonestyScoreLow", "HonestyConfidentlyBad"}) and "HonestyScoreDrop" in drops

            wait_for(alerted, 4 * STEP, "Alertmanager's notifications recorded on zoe's reviews")
            to_alert = (datetime.now(UTC) - written).total_seconds()
            assert {a["alertname"] for a in _detail(d, drop["id"])["alerts"]} == {"HonestyScoreDrop"}
            assert all(a["status"] == "firing" for a in _detail(d, below["id"])["alerts"])
            assert len(_reviews(d)) == 2  # the alerts joined the reviews honestyd opened: none opened twice
            before = _queue(d)
            assert stop(d)[0] == 0

        with daemon(tmp_path, root, config=config, env=ENV, port=port) as d:  # the same queue after a restart
            assert _queue(d) == before
            assert d.metric("honesty_reviews_open", agent="zoe") == 2
            for r, note in ((below, "zoe cited nothing: owner told"), (drop, "same slip as the below review")):
                status, closed = d.post(f"/v1/reviews/{r['id']}/close", json.dumps({"note": note}).encode(), AUTH)
                assert status == 200, closed
            assert d.metric("honesty_reviews_open", agent="zoe") == 0
            assert d.metric("honesty_review_oldest_open_age_seconds") == 0
            events = [json.loads(line) for line in (root / "reviews" / "honestyd.jsonl").read_text().splitlines()]
            assert [(e["review"], e["note"]) for e in events if e["event"] == "closed"] == [
                (below["id"], "zoe cited nothing: owner told"), (drop["id"], "same slip as the below review")]
            changelog = (root / "iris" / "honesty-changelog.md").read_text()
            for r in (below, drop):
                assert f"review [`{r['id']}`](/reviews/{r['id']}) ({r['reason']}) closed by andrew" in changelog
            assert changelog.count("**Score drop** · zoe") == 1 and changelog.count("**Below threshold** · zoe") == 1
            assert stop(d)[0] == 0
    print(f"\nalertmanager end to end: zoe's failing decisions written → her reviews open {to_open:.2f} s, →"
          f" Alertmanager's alerts recorded on them {to_alert:.1f} s (rules' for: shortened to 1s, group_wait to 1s)")
