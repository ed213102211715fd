"""The shipped ops/alertmanager/alertmanager.yml: the real amtool (Debian's ``prometheus-alertmanager``) accepts it,
and its commented e-mail and Slack receivers once uncommented; the honesty score alerts route to honestyd's webhook
(and on to people), every other honestyd alert to people; the webhook is the daemon's route, with its token."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from daemon.http.app import make_app
from daemon.reviews.alertmanager import REVIEW_ALERTS
from tests.conftest import ROOT
from tests.system.test_prometheus_rules import ALERTS, alert_blocks
from tests.tools import require

CONFIG = ROOT / "ops" / "alertmanager" / "alertmanager.yml"


def _amtool(*args: str | Path) -> tuple[int, str, str]:
    proc = subprocess.run([require("amtool"), *map(str, args)], capture_output=True, text=True, timeout=60,
                          check=False)
    return proc.returncode, proc.stdout, proc.stderr


def uncommented(text: str) -> str:
    """The config with its commented receivers (``# email_configs:`` … under ``people``) uncommented."""
    out = re.sub(r"(?m)^    # (email_configs|slack_configs):", r"    \1:", text)
    return re.sub(r"(?m)^    # ( +)", r"    \1", out)


def test_amtool_accepts_the_config_and_its_commented_receivers(tmp_path: Path) -> None:
    code, out, err = _amtool("check-config", CONFIG)
    assert code == 0 and "SUCCESS" in out and "2 receivers" in out, out + err
    full = tmp_path / "alertmanager.yml"
    full.write_text(uncommented(CONFIG.read_text(encoding="utf-8")))
    assert "email_configs:\n      - to:" in full.read_text() and "slack_configs:\n      - api_url_file:" in \
        full.read_text()
    code, out, err = _amtool("check-config", full)
    assert code == 0 and "SUCCESS" in out, out + err


def _receivers(*labels: str) -> str:
    code, out, err = _amtool("config", "routes", "test", f"--config.file={CONFIG}", *labels)
    assert code == 0, out + err
    return out.strip()


def test_the_score_alerts_route_to_honestyd_grouped_by_agent_and_the_rest_to_people() -> None:
    shipped = set(alert_blocks(ALERTS.read_text(encoding="utf-8")))
    assert set(REVIEW_ALERTS) <= shipped
    for name in sorted(shipped):
        expected = "honestyd,people" if name in REVIEW_ALERTS else "people"
        assert _receivers(f"alertname={name}", "agent=zoe", "instance=127.0.0.1:9478") == expected, name
    text = CONFIG.read_text(encoding="utf-8")
    assert re.search(r"(?m)^      group_by: \[agent, instance\]$", text)
    assert re.search(r"(?m)^      repeat_interval: 4h$", text) and "send_resolved: true" in text


def test_the_webhook_url_is_the_daemons_route_with_a_bearer_token_file() -> None:
    text = CONFIG.read_text(encoding="utf-8")
    url = re.search(r"(?m)^      - url: http://127\.0\.0\.1:9478(/\S+)$", text)
    assert url is not None

    class _Backend:
        from daemon.config import Config

        config = Config()

    routes = {(r.method, r.resource.canonical) for r in make_app(_Backend()).router.routes()  # type: ignore[arg-type]
              if r.resource is not None}
    assert ("POST", url.group(1)) in routes
    assert re.search(r"(?m)^            type: Bearer\n            credentials_file: \S+$", text)
