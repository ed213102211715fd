"""The shipped Prometheus rules and example config: the real promtool accepts them, the rules' unit tests pass,
and every alert has both a firing and a non-firing case there. Runs Debian's promtool (package ``prometheus``).

PyYAML is not a project dependency, so the two YAML files are read with small line-based parsers that rely on
their fixed layout and fail loudly when it changes, rather than guessing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from daemon.config import Scoring
from tests.conftest import ROOT
from tests.tools import require

OPS = ROOT / "ops" / "prometheus"
ALERTS = OPS / "alerts.yml"
ALERTS_TEST = OPS / "alerts_test.yml"
CONFIG = OPS / "prometheus.yml"
RUNBOOK = OPS / "RUNBOOK.md"

#: The alerts the rules promise; a rename or a removal must be deliberate.
EXPECTED_ALERTS = {
    "HonestyScoreLow", "HonestyScoreDrop", "HonestyConfidentlyBad", "HonestyAgentSilent", "HonestydDown",
    "HonestydAbsent", "HonestyEvaluationStale", "HonestyRejectRateRising", "HonestyVerificationFailuresRising",
    "HonestyReviewStale",
}
#: Alerts about one agent: their description must link that agent's audit page.
AGENT_ALERTS = {"HonestyScoreLow", "HonestyScoreDrop", "HonestyConfidentlyBad", "HonestyAgentSilent"}
AUDIT_LINK = "/agents/{{ reReplaceAll"

_ALERT = re.compile(r"^\s*- alert:\s*(\S+)\s*$")
_CASE = re.compile(r"^\s*(?:- )?alertname:\s*(\S+)\s*$")
_EXP_ALERTS = re.compile(r"^\s*exp_alerts:\s*(.*?)\s*$")


def _run(*args: str | Path, cwd: Path = ROOT) -> tuple[int, str]:
    proc = subprocess.run([require("promtool"), *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd,
                          check=False)
    return proc.returncode, proc.stdout + proc.stderr


def alert_blocks(text: str) -> dict[str, str]:
    """Alert name → the text of its rule (from its ``- alert:`` line up to the next one)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = _ALERT.match(line)
        if m:
            assert m.group(1) not in blocks, f"alert {m.group(1)} is defined twice"
            current = blocks[m.group(1)] = []
        if current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in blocks.items()}


def rule_test_cases(text: str) -> list[tuple[str, bool]]:
    """(alertname, fires) of every alert_rule_test case; fires is False for ``exp_alerts: []``.

    Each ``alertname:`` must be followed within two lines by ``exp_alerts:``, which is either ``[]`` or
    ends the line with a ``- exp_labels:`` item next; anything else fails instead of being misread.
    """
    lines = text.splitlines()
    cases = []
    for i, line in enumerate(lines):
        m = _CASE.match(line)
        if not m:
            continue
        found = next(((k, e) for k in range(i + 1, min(i + 3, len(lines))) if (e := _EXP_ALERTS.match(lines[k]))),
                     None)
        assert found is not None, f"line {i + 1}: alertname {m.group(1)} has no exp_alerts right after it"
        j, value = found[0], found[1].group(1)
        if value == "[]":
            cases.append((m.group(1), False))
            continue
        following = next((x.strip() for x in lines[j + 1:] if x.strip()), "")
        assert value == "" and following.startswith("- exp_labels:"), (
            f"line {j + 1}: exp_alerts must be [] or a list of '- exp_labels:' items, not {lines[j].strip()!r}")
        cases.append((m.group(1), True))
    return cases


def test_promtool_check_rules_accepts_the_alerts() -> None:
    code, out = _run("check", "rules", ALERTS)
    assert code == 0, out
    names = alert_blocks(ALERTS.read_text(encoding="utf-8"))
    # promtool counts every rule of the file: only alerts, so the parser missed none.
    assert f"SUCCESS: {len(names)} rules found" in out, out
    assert set(names) == EXPECTED_ALERTS


def test_promtool_check_config_accepts_the_example(tmp_path: Path) -> None:
    # A copy in a directory of its own, as installed: rule_files is relative to the config's directory.
    shutil.copy(CONFIG, tmp_path / "prometheus.yml")
    shutil.copy(ALERTS, tmp_path / "alerts.yml")
    code, out = _run("check", "config", tmp_path / "prometheus.yml", cwd=tmp_path)
    assert code == 0, out
    assert "SUCCESS: 1 rule files found" in out, out
    assert f"SUCCESS: {len(EXPECTED_ALERTS)} rules found" in out, out
    text = CONFIG.read_text(encoding="utf-8")
    assert re.search(r"(?m)^\s*- job_name: honestyd$", text)
    assert re.search(r"(?m)^\s*- 127\.0\.0\.1:9478$", text)
    assert re.search(r"(?m)^\s*scrape_interval: 30s$", text)
    assert re.search(r"(?m)^# alerting:$", text), "the Alertmanager placeholder is commented out"


def test_promtool_unit_tests_of_the_alerts_pass() -> None:
    code, out = _run("test", "rules", ALERTS_TEST, cwd=OPS)
    assert code == 0, out
    assert "SUCCESS" in out, out


def test_every_alert_has_a_firing_and_a_non_firing_case() -> None:
    names = set(alert_blocks(ALERTS.read_text(encoding="utf-8")))
    cases = rule_test_cases(ALERTS_TEST.read_text(encoding="utf-8"))
    tested = {name for name, _ in cases}
    # A case for a misspelt alert passes vacuously when it expects nothing: catch it here.
    assert tested <= names, f"cases for unknown alerts: {sorted(tested - names)}"
    firing = {name for name, fires in cases if fires}
    quiet = {name for name, fires in cases if not fires}
    assert not names - firing, f"no firing case: {sorted(names - firing)}"
    assert not names - quiet, f"no non-firing case: {sorted(names - quiet)}"


def test_every_alert_has_for_severity_summary_and_description() -> None:
    blocks = alert_blocks(ALERTS.read_text(encoding="utf-8"))
    for name, block in blocks.items():
        assert re.search(r"(?m)^\s+for: \d+[smh]$", block), f"{name}: no for:"
        assert re.search(r"(?m)^\s+severity: (warning|critical)$", block), f"{name}: no severity label"
        assert re.search(r"(?m)^\s+summary: \S", block), f"{name}: no summary"
        assert re.search(r"(?m)^\s+description: \S", block), f"{name}: no description"
        if name in AGENT_ALERTS:
            assert AUDIT_LINK in block and "$externalLabels.honestyd_url" in block, f"{name}: no audit link"
    runbook = RUNBOOK.read_text(encoding="utf-8")
    for name in blocks:
        assert f"## {name}" in runbook, f"{name} has no section in {RUNBOOK.name}"


def test_score_thresholds_match_the_daemon_defaults() -> None:
    # Prometheus cannot read config.toml: the constants in the rules must follow [scoring]'s defaults.
    blocks = alert_blocks(ALERTS.read_text(encoding="utf-8"))
    scoring = Scoring()

    def constant(name: str, pattern: str) -> float:
        m = re.search(pattern, blocks[name])
        assert m, f"{name}: threshold not found by {pattern!r}"
        return float(m.group(1))

    assert constant("HonestyScoreLow", r'honesty_score\{window="24h"\} < ([0-9.]+) - 1e-9') == scoring.alert_below
    assert constant("HonestyConfidentlyBad", r"honesty_score_upper\{window=\"24h\"\} < ([0-9.]+) - 1e-9") == (
        scoring.alert_below)
    assert constant("HonestyScoreDrop", r"> ([0-9.]+) \+ 1e-9") == scoring.drop_alert
