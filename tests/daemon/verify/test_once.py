"""One verification flow (daemon/verify/once.py) for ``honestyd verify`` and the daemon's daily job.

A simulated state whose links live on a local web server and a fake GitHub API (those of
tests/system/test_verify_e2e.py), sampled at a rate of one half per type: the CLI, as a subprocess, and the real
daemon's job, in this process on a store of its own, must pick the same targets, check them the same way and store
the same rows; a second job at the same time skips every one of them as fresh and counts it as cached, as the CLI does.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from daemon.app import Daemon
from daemon.config import load_config
from daemon.store import Store
from daemon.verify.once import verify_once
from tests.conftest import Run
from tests.daemon_harness import in_process
from tests.system.test_verify_e2e import planted_state

END = "2026-05-02T00:00:00Z"
AT = datetime(2026, 5, 2, tzinfo=UTC)

Row = tuple[str, str, str, bool | None, int | None, str]


def _rows(store: Store) -> set[Row]:
    return {(c.type, c.target, c.checked_at.isoformat(), c.ok, c.status, c.detail) for c in store.checks()}


def test_the_daemons_job_stores_what_honestyd_verify_stores(honestyd: Run, tmp_path: Path) -> None:
    with planted_state(tmp_path, 7, config="[verify.rates]\nurl = 0.5\npath = 0.5\nrun = 0.5\nissue = 0.5\n") \
            as (root, cfg, planted):
        by_cli = tmp_path / "cli.db"
        out = honestyd("verify", "--sample", AT.date().isoformat(), "--state", root, "--db", by_cli, "--config", cfg,
                       "--at", END, "--json")
        cli_summary = json.loads(out.stdout)["types"]

        by_daemon = tmp_path / "daemon.db"
        config = load_config(cfg)
        config = replace(config, state_root=root, db_path=by_daemon,
                         daemon=replace(config.daemon, listen="127.0.0.1:0", drain_timeout=5.0))

        async def scenario() -> tuple[set[Row], dict[str, int], dict[str, int]]:
            async with in_process(Daemon(config, environ={}, clock=lambda: AT)) as d:
                store = d.store
                assert store is not None
                await d._verify_sample()
                rows = await d._locked(lambda: _rows(store))
                # The same day again: each target has a fresh conclusive result now (none was inconclusive).
                again = await verify_once(store, d.config, root, AT, lambda: AT, sample_day=AT.date(),
                                          access=d._locked)
                return rows, dict(d.checks), dict(again.cached) if not again.checked.total() else {}

        daemon_rows, daemon_checked, cached = asyncio.run(scenario())

    with Store.open(by_cli, readonly=True) as store:
        cli_rows = _rows(store)
    assert cli_rows == daemon_rows
    assert {kind for kind, *_ in daemon_rows} == {"url", "path", "run", "issue"}
    every = {(c["type"], c["target"]) for c in planted}
    assert 0 < len(daemon_rows) < len(every), "a sample of one half is neither nothing nor everything"
    assert daemon_checked == {k: c["checked"] for k, c in cli_summary.items() if c["checked"]}
    assert all(ok is not None for _, _, _, ok, _, _ in daemon_rows)
    assert cached == daemon_checked, "the second pass checks nothing and counts every target as cached"
