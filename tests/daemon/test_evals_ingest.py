"""benchmark-honesty reports: 0.2.0 and 0.1.0 reports ingested and exported beside the live score, broken
ones rejected with path and field while the rest still load."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from daemon.config import Config
from daemon.ingest import Ingester
from daemon.metrics import SnapshotRenderer
from daemon.snapshot import Counters, build_snapshot
from daemon.store import Store
from scorers.context import Records

REPORT_020 = {"model": "claude-x", "mean": 0.61, "confidenceInterval95": {"low": 0.55, "high": 0.67},
              "totals": {"tasks": 200, "passed": 122, "failed": 78},
              "honesty": {"fabricationRate": 0.05, "abstainRate": 0.2, "overAbstainRate": 0.03, "brier": 0.12,
                          "answerableAccuracy": 0.8, "unanswerableHonesty": 0.7, "balanced": 0.61, "taskMean": 0.74}}
REPORT_010 = {"model": "old-model", "mean": 0.74, "confidenceInterval95": {"low": 0.7, "high": 0.78},
              "totals": {"tasks": 50, "passed": 37, "failed": 13}}


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples}


def test_reports_load_export_and_reject(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "evals").mkdir(parents=True)
    (root / "evals" / "2026-05-01-claude.json").write_text(json.dumps({**REPORT_020, "honesty": {
        **REPORT_020["honesty"], "balanced": 0.5}}))  # an older report of the same model: the later path wins
    (root / "evals" / "2026-05-02-claude.json").write_text(json.dumps(REPORT_020))
    (root / "evals" / "old.json").write_text(json.dumps(REPORT_010))
    (root / "evals" / "broken.json").write_text('{"model": "m", "honesty": {"brier": "bad"}}')
    (root / "evals" / "not-json.json").write_text("{")
    (root / "evals" / "no-model.json").write_text('{"mean": 0.5}')
    config = Config(benchmark_models={"ada": "claude-x", "bo": "claude-x"})
    with Store.open(tmp_path / "h.db") as store:
        stats = Ingester(store, root, config).scan()
        assert stats.records["evals"] == 3
        rejects = {(r["path"], r["reason"]) for r in store.rejects()}
        assert rejects == {("evals/broken.json", "bad_field:honesty.brier"), ("evals/not-json.json", "not_json"),
                           ("evals/no-model.json", "bad_field:model")}
        evals = tuple(store.evals())
        again = Ingester(store, root, config).scan()
        assert again.records["evals"] == 0 and len(store.evals()) == 3
    snap = build_snapshot(Records([]), datetime(2026, 5, 3, tzinfo=UTC), config, Counters(), evals)
    body = SnapshotRenderer().exposition(snap)
    m = _samples(body.decode())
    for agent in ("ada", "bo"):
        key = (("agent", agent), ("model", "claude-x"))
        assert m[("honesty_benchmark_balanced", key)] == 0.61
        assert m[("honesty_benchmark_task_mean", key)] == 0.74
        assert m[("honesty_benchmark_fabrication_rate", key)] == 0.05
        assert m[("honesty_benchmark_ci_low", key)] == 0.55 and m[("honesty_benchmark_ci_high", key)] == 0.67
        assert m[("honesty_benchmark_tasks", key)] == 200
    old = (("agent", ""), ("model", "old-model"))
    assert m[("honesty_benchmark_tasks", old)] == 50 and m[("honesty_benchmark_ci_low", old)] == 0.7
    assert ("honesty_benchmark_balanced", old) not in m  # a 0.1.0 report exports only what it has
    assert not any(name == "honesty_benchmark_mean" for name, _ in m)  # `mean` changed meaning: never read


def test_a_fixed_report_replaces_its_reject(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "evals").mkdir(parents=True)
    bad = root / "evals" / "r.json"
    bad.write_text('{"model": 3}')
    with Store.open(tmp_path / "h.db") as store:
        ingester = Ingester(store, root, Config())
        ingester.scan()
        assert [r["reason"] for r in store.rejects()] == ["bad_field:model"]
        bad.write_text(json.dumps(REPORT_010))
        ingester.scan()
        assert [e.model for e in store.evals()] == ["old-model"]
        assert store.rejects() == []
        bad.unlink()
        ingester.scan()
        assert store.evals() == []
