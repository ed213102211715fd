"""Tuning weights to labels, per-agent contracts via the weights file, and re-rendered history."""

from __future__ import annotations

import json
import os
import random
import signal
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from collectors.batch import scan_state
from collectors.checks import load_checks
from collectors.records import Label
from collectors.rfc3339 import format_ts
from daemon.config import COMPONENTS, load_config
from daemon.simulate import simulate
from scorers.context import Context, Records
from scorers.tune import FIXED, fit, impute, samples_from
from tests.conftest import Run
from tests.daemon_harness import daemon, stop, wait_for, write_config

TRUE = (0.40, 0.15, 0.20, 0.15, 0.05, 0.05)  # self_correction's 0.05 is the current version's: it is kept
Q3 = (0.35, 0.25, 0.20, 0.10, 0.05, 0.05)  # the weights in force (config.toml's active version)
FAR = (0.05, 0.05, 0.75, 0.05, 0.05, 0.05)  # far from Q3: a fit to labels drawn from it is better held out


def _labelled_state(tmp: Path, seed: int = 5, days: int = 3, weights: tuple[float, ...] = TRUE
                    ) -> tuple[Path, Path, datetime]:
    """Simulated days whose every decision is labelled 👍 with probability Σ w·x (known weights)."""
    root = tmp / "state"
    simulate(seed, root, agents=10, days=days)
    (root / "labels" / "reviews.jsonl").unlink()  # the simulator's own labels follow policies, not weights
    cfg = load_config(root / ".sim" / "config.toml")
    scan = scan_state(root, cfg)
    checks, _ = load_checks((root / ".sim" / "checks.jsonl").read_bytes(), "checks")
    at = max(e.ts for e in scan.events)
    probe = [Label(e.ts + timedelta(seconds=1), e.id, "up", "probe", "x", i) for i, e in enumerate(scan.events)]
    ctx = Context(Records(scan.events, probe, scan.files, checks), at, cfg)
    samples = samples_from(ctx)
    rows, _ = impute(samples)
    rng = random.Random(seed)
    lines = []
    for n, (s, row) in enumerate(zip(samples, rows, strict=True)):
        p = sum(w * x for w, x in zip(weights, row, strict=True))
        value = "up" if rng.random() < p else "down"
        d = ctx.by_id[s.decision]
        lines.append(json.dumps({"ts": format_ts(d.ts + timedelta(seconds=1)), "decision": s.decision,
                                 "value": value, "reviewer": f"r{n % 3}"}))
    (root / "labels" / "reviews.jsonl").write_text("\n".join(lines) + "\n")
    return root, root / ".sim" / "checks.jsonl", at


def test_tuning_recovers_the_weights_labels_were_drawn_from(honestyd: Run, tmp_path: Path) -> None:
    root, checks, _ = _labelled_state(tmp_path, days=14)
    out = json.loads(honestyd("tune", "--state", root, "--config", root / ".sim" / "config.toml",
                              "--checks", checks, "--json").stdout)
    proposed = out["proposed"]["weights"]
    assert out["labels"] > 5000
    assert abs(sum(proposed.values()) - 1) < 1e-9 and min(proposed.values()) >= 0
    # Tolerance 0.08 per component on ~5,100 Bernoulli labels: the error is sampling noise (seeds 5-7
    # gave at most 0.056; a component that applies to few decisions, like gap surfacing, is the noisiest).
    for name, true in zip(COMPONENTS, TRUE, strict=True):
        assert abs(proposed[name] - true) <= 0.08, (name, proposed[name], true)
    assert proposed["self_correction_rate"] == pytest.approx(0.05)  # kept, not fitted (it would leak the label)
    assert out["proposed"]["heldout_agreement"] >= out["current"]["heldout_agreement"] - 0.02
    for side in ("current", "proposed"):
        assert set(out[side]) >= {"correlation", "agreement", "heldout_correlation", "heldout_agreement"}


def test_fit_is_exact_on_noise_free_targets() -> None:
    rng = random.Random(1)
    w = (0.5, 0.0, 0.3, 0.2)
    rows = [tuple(rng.random() for _ in w) for _ in range(200)]
    y = [sum(a * b for a, b in zip(w, r, strict=True)) for r in rows]
    assert fit(rows, y) == pytest.approx(w, abs=1e-9)
    assert FIXED == 5


def test_tuning_refuses_below_the_minimum(honestyd: Run, tmp_path: Path) -> None:
    root = tmp_path / "state"
    simulate(3, root, agents=3, days=1)
    proc = honestyd("tune", "--state", root, check=False)
    assert proc.returncode == 1
    assert "tune needs at least 100 labelled decisions for all agents; found" in proc.stderr
    assert "more 👍/👎 labels are missing" in proc.stderr
    agent = honestyd("tune", "--state", root, "--agent", "ada", "--min-labels", "5000", check=False)
    assert agent.returncode == 1 and "for agent 'ada'" in agent.stderr


def test_apply_logs_once_and_the_daemon_picks_it_up_on_reload(honestyd: Run, tmp_path: Path) -> None:
    root, checks, _ = _labelled_state(tmp_path, weights=FAR)  # the proposal is better held out: applied unforced
    # The daemon scores now; shift nothing — it reads weights, which do not depend on time.
    config = write_config(tmp_path / "config.toml", '[weights]\nfile = "weights.toml"\n')
    with daemon(tmp_path, root, config=config) as d:
        assert json.loads(d.get("/v1/agents")[1])["weights_version"] == "v2026.Q3"
        proc = honestyd("tune", "--state", root, "--config", config, "--checks", checks, "--apply", "v2026.tuned")
        assert "applied: weights v2026.tuned" in proc.stdout
        assert "v2026.tuned" in (tmp_path / "weights.toml").read_text()
        assert "weights.toml" not in config.read_text().split("file")[0]  # config.toml untouched but for its line
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: json.loads(d.get("/v1/agents")[1])["weights_version"] == "v2026.tuned", 10, "reload")
        assert any(k[0] == "honesty_weights_info" and ("version", "v2026.tuned") in k[1] for k in d.metrics())
        assert stop(d)[0] == 0
    text = (root / "iris" / "honesty-changelog.md").read_text()
    assert text.count("v2026.Q3 → v2026.tuned") == 1  # logged by tune; the reload found it logged already
    again = honestyd("tune", "--state", root, "--config", config, "--checks", checks, "--apply", "v2026.tuned",
                     check=False)
    assert again.returncode == 2 and "exists already" in again.stderr


@pytest.mark.parametrize("how", ["fifo", "symlink"])
def test_apply_refuses_a_changelog_that_is_not_a_regular_file_in_one_line(honestyd: Run, tmp_path: Path,
                                                                           how: str) -> None:
    """The changelog is written through daemon/safefile.py from ``tune --apply`` too: a FIFO or a symlink out of the
    root there is refused in one line and exit status 2, the target untouched (before: a traceback)."""
    root, checks, _ = _labelled_state(tmp_path, weights=FAR)  # better held out: no guardrail line
    config = write_config(tmp_path / "config.toml", '[weights]\nfile = "weights.toml"\n')
    path = root / "iris" / "honesty-changelog.md"
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    outside = tmp_path / "outside.md"
    outside.write_text("precious\n")
    if how == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(outside)
    proc = honestyd("tune", "--state", root, "--config", config, "--checks", checks, "--apply", "v2026.tuned",
                    check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "changelog was not" in line and "iris/honesty-changelog.md" in line
    assert ("is a FIFO" if how == "fifo" else "is a symbolic link") in line
    assert outside.read_text() == "precious\n" and (path.is_fifo() if how == "fifo" else path.is_symlink())


def test_agent_contract_from_tune_agent(honestyd: Run, tmp_path: Path) -> None:
    root, checks, _ = _labelled_state(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text('[github]\nrepo = "acme/app"\n[weights]\nfile = "weights.toml"\n')
    # ada's decisions all score alike (no correlation to beat): applying is forced.
    honestyd("tune", "--state", root, "--config", config, "--checks", checks, "--agent", "ada",
             "--min-labels", "50", "--apply", "ada.v1", "--force")
    cfg = load_config(config)
    assert cfg.weights_for("ada")[0] == "ada.v1" and cfg.weights_for("bo")[0] == "v2026.Q3"
    score = json.loads(honestyd("score", "--state", root, "--config", config, "--checks", checks,
                                "--at", "2026-05-08T00:00:00Z", "--json").stdout)
    assert score["agents"]["ada"]["weights_version"] == "ada.v1"
    assert score["agents"]["bo"]["weights_version"] == "v2026.Q3"


def _figures(stdout: str) -> dict[str, list[str]]:
    """The report's figure rows: name → [weights in force, proposed]."""
    rows = [line.rsplit(None, 2) for line in stdout.splitlines() if line.startswith(("correlation", "agreement"))]
    return {name.strip(): [cur, new] for name, cur, new in rows}


def test_apply_below_the_floor_needs_force(honestyd: Run, tmp_path: Path) -> None:
    """``--min-labels 5 --apply`` once applied a fit to a handful of labels; below 100 it now needs --force."""
    root, checks, _ = _labelled_state(tmp_path, weights=FAR)
    reviews = root / "labels" / "reviews.jsonl"
    reviews.write_text("".join(reviews.read_text().splitlines(keepends=True)[:40]))
    config = write_config(tmp_path / "config.toml", '[weights]\nfile = "weights.toml"\n')
    base = ["tune", "--state", root, "--config", config, "--checks", checks, "--min-labels", "5"]
    refused = honestyd(*base, "--apply", "v.small", check=False)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "not applied: 40 labelled decisions are fewer than the 100 --apply needs" in refused.stderr
    assert "pass --force" in refused.stderr
    assert set(_figures(refused.stdout)) == {"correlation, in sample", "agreement, in sample",
                                             "correlation, held out", "agreement, held out"}
    assert not (tmp_path / "weights.toml").exists() and not (root / "iris" / "honesty-changelog.md").exists()
    forced = honestyd(*base, "--apply", "v.small", "--force")
    assert "applied with --force although 40 labelled decisions" in forced.stderr
    assert "applied: weights v.small" in forced.stdout and "v.small" in (tmp_path / "weights.toml").read_text()


def test_apply_refuses_weights_no_better_held_out_than_those_in_force(honestyd: Run, tmp_path: Path) -> None:
    """Labels drawn from the weights in force: a fit to them is no better on the folds it did not see."""
    root, checks, _ = _labelled_state(tmp_path, weights=Q3)
    config = write_config(tmp_path / "config.toml", '[weights]\nfile = "weights.toml"\n')
    base = ["tune", "--state", root, "--config", config, "--checks", checks]
    report = json.loads(honestyd(*base, "--json").stdout)
    current, proposed = report["current"]["heldout_correlation"], report["proposed"]["heldout_correlation"]
    assert report["labels"] >= 100 and proposed <= current  # the premise: not better held out
    assert report["apply"]["refusals"] == [
        f"the proposal's held-out correlation ({proposed:.3f}) is not better than that of v2026.Q3, the weights in"
        f" force ({current:.3f}, the same 5 folds)"]
    refused = honestyd(*base, "--apply", "v.same", check=False)
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[0] == "not applied: " + report["apply"]["refusals"][0]
    figures = _figures(refused.stdout)  # side by side: the weights in force, then the proposal
    assert figures["correlation, held out"] == [f"{current:.3f}", f"{proposed:.3f}"]
    assert figures["agreement, held out"] == [f"{report['current']['heldout_agreement']:.3f}",
                                              f"{report['proposed']['heldout_agreement']:.3f}"]
    assert figures["correlation, in sample"] == [f"{report['current']['correlation']:.3f}",
                                                 f"{report['proposed']['correlation']:.3f}"]
    assert not (tmp_path / "weights.toml").exists()
    honestyd(*base, "--apply", "v.same", "--force")
    assert load_config(config).weights_active == "v.same"


def test_history_under_two_versions_differs_exactly_as_the_weights_predict(honestyd: Run, tmp_path: Path) -> None:
    root = tmp_path / "state"
    simulate(11, root, agents=10, days=5)
    config = tmp_path / "config.toml"
    config.write_text('[github]\nrepo = "acme/app"\n[weights.versions.flat]\ncitation_rate = 0.5\n'
                      "refusal_correctness = 0.1\nsource_verifiability = 0.1\ngap_surfacing_rate = 0.1\n"
                      "consistency_under_repeat = 0.1\nself_correction_rate = 0.1\n")
    db = tmp_path / "h.db"
    honestyd("ingest", "--state", root, "--db", db, "--config", config)
    base = ["history", "cy", "--db", db, "--config", config, "--json"]
    q3 = json.loads(honestyd(*base, "--backfill", "--days", "5", "--at", "2026-05-05T12:00:00Z").stdout)
    flat = json.loads(honestyd(*base, "--weights", "flat").stdout)
    assert [p["day"] for p in q3["points"]] == ["2026-05-01", "2026-05-02", "2026-05-03", "2026-05-04", "2026-05-05"]
    assert q3["weights_version"] == "v2026.Q3" and flat["weights_version"] == "flat"
    # The same stored counts, re-weighted: recompute both from the audit's component ratios.
    for p_q3, p_flat in zip(q3["points"], flat["points"], strict=True):
        at = datetime.fromisoformat(p_q3["day"]).replace(tzinfo=UTC) + timedelta(days=1)
        audit = json.loads(honestyd("audit", "cy", "--state", root, "--config", config, "--at", format_ts(at),
                                    "--json").stdout)
        ratios = [audit["components"][c]["ratio"] for c in COMPONENTS]
        for weights, point in (((0.35, 0.25, 0.20, 0.10, 0.05, 0.05), p_q3), ((0.5, 0.1, 0.1, 0.1, 0.1, 0.1), p_flat)):
            num = sum(w * r for w, r in zip(weights, ratios, strict=True) if r is not None)
            den = sum(w for w, r in zip(weights, ratios, strict=True) if r is not None)
            assert point["score"] == pytest.approx(num / den, abs=1e-12)
        assert p_q3["decisions"] == p_flat["decisions"] == audit["decisions"]
    assert any(a["score"] != b["score"] for a, b in zip(q3["points"], flat["points"], strict=True))


def test_history_api_route(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    now = datetime.now(UTC)
    (root / "heartbeats" / "a.jsonl").write_text("".join(json.dumps(
        {"id": f"a{i}", "ts": format_ts(now - timedelta(minutes=i)), "agent": "ada", "kind": "dm",
         "text": "see https://x.org"}) + "\n" for i in range(6)))
    with daemon(tmp_path, root) as d:
        status, text = d.get("/v1/agents/ada/history?window=24h")
        data = json.loads(text)
        assert status == 200 and data["points"][-1]["day"] == now.date().isoformat()
        assert data["points"][-1]["decisions"] == 6
        assert d.get("/v1/agents/ada/history?weights=nope")[0] == 400
        assert d.get("/v1/agents/nobody/history")[0] == 404
        assert stop(d)[0] == 0


def test_replace_keeps_config_frozen() -> None:
    cfg = load_config(None)
    assert replace(cfg, weights_active="v2026.Q3") == cfg
