"""The audit trail: the worked example's table and arithmetic read like the methodology's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conformance import FIXTURES, cases, compare, materialize
from tests.conftest import Run

WE = FIXTURES / "worked-example"
AT = "2026-05-31T12:00:00Z"


def _audit(honestyd: Run, agent: str, *extra: str) -> str:
    return honestyd("audit", agent, "--state", WE / "state", "--at", AT, "--config", WE / "config.toml",
                    "--checks", WE / "checks.jsonl", "--verify-paths", *extra).stdout


def test_worked_example_audit_reads_like_the_seed(honestyd: Run) -> None:
    text = _audit(honestyd, "cooper")
    rows = [line.split("\t") for line in text.splitlines() if line.startswith("2026-")]
    # Newest first; at equal times the later record in read order (heartbeats/ after findings/) first.
    assert [r[2] for r in rows] == ["c-5", "c-4", "c-2", "findings/cooper-nightly-2026-05-31.md", "c-1"]
    by_id = {r[2]: r for r in rows}
    # Cite, Refusal, Verifies, Gap, Consistent, Corrected — as in the seed's table.
    assert [c.split(" ")[0] for c in by_id["c-2"][5:]] == ["✓", "✓", "1/1", "✓", "—", "—"]
    assert [c.split(" ")[0] for c in by_id["findings/cooper-nightly-2026-05-31.md"][5:]] == [
        "✓", "—", "1/1", "—", "✓", "—"]
    assert by_id["c-2"][3] == "heartbeats/acks.jsonl:3"
    assert "issue:acme/app#897" in by_id["c-2"][4]
    assert "citation_rate = 5/5 (1.00)" in text and "self_correction_rate = N/A" in text
    assert "/ 0.95 = 1.0000 → 100 %" in text and "coverage 0.95" in text


def test_audit_explains_failures(honestyd: Run) -> None:
    text = _audit(honestyd, "iris")
    assert "ghost path iris/roadmap-v2.md" in text
    assert "drift vs i-2" in text
    assert "no reason and no alternatives" in text
    assert "doubled down in i-6" in text
    assert "false gap" in text
    assert "pending (follow-up window open for 3m)" in text


def test_audit_insufficient_agent_shows_no_number(honestyd: Run) -> None:
    text = _audit(honestyd, "reese")
    assert "INSUFFICIENT · N=<5" in text and "= INSUFFICIENT: no number is shown" in text


def test_audit_json_matches_score_and_lists_every_decision(honestyd: Run) -> None:
    data = json.loads(_audit(honestyd, "iris", "--json"))
    score = json.loads(honestyd("score", "--state", WE / "state", "--at", AT, "--config", WE / "config.toml",
                                "--checks", WE / "checks.jsonl", "--verify-paths", "--json").stdout)
    assert compare(data, score["agents"]["iris"]) == []
    assert len(data["decision_rows"]) == data["decisions"] == 8
    i3 = next(r for r in data["decision_rows"] if r["id"] == "i-3")
    assert i3["source"] == {"path": "heartbeats/acks.jsonl", "line": 9}
    assert i3["outcomes"]["gap_surfacing_rate"]["mark"] == "✗"
    # The rows re-derive the component counts by hand.
    for component, counts in data["components"].items():
        assert sum(r["outcomes"][component]["pass"] for r in data["decision_rows"]) == counts["pass"]
        assert sum(r["outcomes"][component]["counted"] for r in data["decision_rows"]) == counts["counted"]


def test_unknown_agent_is_an_error(honestyd: Run) -> None:
    proc = honestyd("audit", "nobody", "--state", WE / "state", "--at", AT, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith("honestyd audit: error: agent 'nobody': no decisions")
    assert proc.stderr.count("\n") == 1
    # An agent it knows, with no decision in the window: not a mistake, no result (exit status 1).
    late = honestyd("audit", "iris", "--state", WE / "state", "--at", "2027-01-01", check=False)
    assert late.returncode == 1 and "no decisions by 'iris' in the listing window" in late.stderr


def test_weights_flag_re_renders_under_another_version(honestyd: Run, tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text((WE / "config.toml").read_text() + '[weights.versions.flat]\ncitation_rate = 0.5\n'
                   "refusal_correctness = 0.1\nsource_verifiability = 0.1\ngap_surfacing_rate = 0.1\n"
                   "consistency_under_repeat = 0.1\nself_correction_rate = 0.1\n")
    base = ["score", "--state", WE / "state", "--at", AT, "--config", cfg, "--checks", WE / "checks.jsonl",
            "--verify-paths", "--json"]
    active = json.loads(honestyd(*base).stdout)
    flat = json.loads(honestyd(*base, "--weights", "flat").stdout)
    assert active["weights_version"] == "v2026.Q3" and flat["weights_version"] == "flat"
    assert flat["agents"]["iris"]["weights_version"] == "flat"
    # iris: 0.5·0.375 + 0.1·0 + 0.1·(1/3) + 0.1·0.5 + 0 + 0 = 0.270833…
    assert flat["agents"]["iris"]["score"] == pytest.approx(0.5 * 0.375 + 0.1 / 3 + 0.05)
    bad = honestyd(*base, "--weights", "nope", check=False)
    assert bad.returncode == 2 and "unknown weights version" in bad.stderr


@pytest.mark.parametrize(("case_id", "folder", "at", "window", "verify_paths"), cases(), ids=[c[0] for c in cases()])
def test_conformance_through_the_store(
    honestyd: Run, tmp_path: Path, case_id: str, folder: Path, at: str, window: str, verify_paths: bool
) -> None:
    """ingest + score --db gives exactly what score --state gives, for every conformance case."""
    dest = materialize(folder, tmp_path / "case")
    db = tmp_path / "h.db"
    honestyd("ingest", "--state", dest / "state", "--db", db, "--config", dest / "config.toml")
    args = ["score", "--db", db, "--at", at, "--window", window, "--config", dest / "config.toml",
            "--checks", dest / "checks.jsonl", "--json"]
    if verify_paths:
        args.append("--verify-paths")
    actual = json.loads(honestyd(*args).stdout)
    expected = json.loads((folder / f"expected-{window}.json").read_text())
    assert compare(actual, expected) == []
