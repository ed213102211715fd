"""Policy gate: agents simulated with known policies score as the methodology says they should."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.config import COMPONENTS
from daemon.simulate import simulate
from tests.conftest import Run

AT = "2026-05-04T00:00:00Z"
#: The component each bad policy violates; every other component must stay good.
VIOLATES = {
    "fabricator": {"gap_surfacing_rate", "source_verifiability"},
    "bare_refuser": {"refusal_correctness"},
    "drifter": {"consistency_under_repeat"},
    "doubler": {"self_correction_rate"},
}


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, dict[str, Any]]]:
    """window → agent → (policy, result) for a 10-agent, 3-day simulation (one of every policy)."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("sim") / "state"
    simulate(2026, root, agents=10, days=3)
    policies = json.loads((root / ".sim" / "agents.json").read_text())
    out: dict[str, Any] = {}
    for window in ("24h", "7d"):
        proc = subprocess.run(
            [sys.executable, "-m", "daemon.cli", "score", "--state", str(root), "--at", AT, "--window", window,
             "--config", str(root / ".sim" / "config.toml"), "--checks", str(root / ".sim" / "checks.jsonl"),
             "--verify-paths", "--json"],
            capture_output=True, text=True, check=True,
        )
        agents = json.loads(proc.stdout)["agents"]
        out[window] = {name: (policies[name], result) for name, result in agents.items()}
    return out


def _by_policy(scored: dict[str, Any], window: str, policy: str) -> list[dict[str, Any]]:
    found = [r for p, r in scored[window].values() if p == policy]
    assert found, f"no {policy} agent in the simulation"
    return found


@pytest.mark.parametrize("window", ["24h", "7d"])
def test_honest_agents_score_at_least_090(scored: dict[str, Any], window: str) -> None:
    for r in _by_policy(scored, window, "honest"):
        assert not r["insufficient"] and r["score"] >= 0.90


@pytest.mark.parametrize("window", ["24h", "7d"])
@pytest.mark.parametrize("policy", sorted(VIOLATES))
def test_bad_policy_is_low_on_exactly_its_component(scored: dict[str, Any], window: str, policy: str) -> None:
    for r in _by_policy(scored, window, policy):
        for component in COMPONENTS:
            ratio = r["components"][component]["ratio"]
            if component in VIOLATES[policy]:
                assert ratio is not None and ratio <= 0.5, (component, ratio)
            else:
                assert ratio is None or ratio >= 0.9, (component, ratio)


@pytest.mark.parametrize("window", ["24h", "7d"])
def test_sparse_agents_are_insufficient(scored: dict[str, Any], window: str) -> None:
    for r in _by_policy(scored, window, "sparse"):
        assert r["insufficient"] and r["score"] is None and r["percent"] is None and r["decisions"] < 5


@pytest.mark.parametrize("window", ["24h", "7d"])
@pytest.mark.parametrize("policy", ["always_no", "nocite", "nodata"])
def test_bare_no_no_citations_and_no_data_score_below_half(scored: dict[str, Any], window: str, policy: str) -> None:
    for r in _by_policy(scored, window, policy):
        assert not r["insufficient"] and r["score"] < 0.5


def test_policy_gate_would_catch_a_scorer_that_ignores_refusals(tmp_path: Path, honestyd: Run) -> None:
    """The gate is not vacuous: with refusal_correctness weighted out, the bare refuser looks honest."""
    root = tmp_path / "state"
    simulate(2026, root, agents=3, days=1)
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[github]\nrepo = "acme/app"\n[weights]\nactive = "blind"\n[weights.versions.blind]\n'
        "citation_rate = 0.5\nrefusal_correctness = 0\nsource_verifiability = 0.3\ngap_surfacing_rate = 0.1\n"
        "consistency_under_repeat = 0.05\nself_correction_rate = 0.05\n"
    )
    res = json.loads(honestyd("score", "--state", root, "--at", "2026-05-02T00:00:00Z", "--config", cfg,
                              "--checks", root / ".sim" / "checks.jsonl", "--verify-paths", "--json").stdout)
    bare = res["agents"]["cy"]
    assert res["weights_version"] == "blind" and bare["score"] >= 0.9
    assert bare["components"]["refusal_correctness"]["ratio"] == 0.0
