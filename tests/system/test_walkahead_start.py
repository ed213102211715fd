"""A start whose catch-up walk ran in another process (collectors/walkahead.py), as ``honestyd run`` starts one
before it imports the daemon: the real Daemon.serve() in this process catches up what was written while it was down
through that walk, and reads what changed after the walk once its watcher runs."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from datetime import timedelta
from pathlib import Path

from collectors import walkahead
from daemon.app import Daemon
from daemon.config import Config, DaemonSettings, GitHub
from daemon.ingest import Ingester
from daemon.simulate import simulate
from daemon.store import Store
from tests.daemon_harness import in_process

#: Long enough for a loaded 2-core machine: a miss is a file never read, not a slow run.
DEADLINE = 60.0


def _config(root: Path, db: Path) -> Config:
    # Rescans every 5 minutes: within the test, only the start's own passes can read a file the watcher missed.
    settings = DaemonSettings(listen="127.0.0.1:0", debounce=0.05, rescan_interval=timedelta(minutes=5),
                              rescore_interval=timedelta(minutes=1), drain_timeout=5.0, model_cache=False)
    return Config(state_root=root, db_path=db, github=GitHub(repo="acme/app"), daemon=settings)


def _ids(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT id FROM events")}
    finally:
        conn.close()


def _brief(root: Path, name: str, agent: str, ts: str) -> str:
    (root / "briefs" / name).write_text(f"---\nagent: {agent}\nts: {ts}\n---\n\nDecided to wait for the review.\n")
    return f"briefs/{name}"


def test_a_start_catches_up_through_the_early_walk_and_reads_what_changed_after_it(tmp_path: Path) -> None:
    root, db = tmp_path / "state", tmp_path / "honestyd.db"
    simulate(5, root, agents=2, days=1)
    config = _config(root, db)
    with Store.open(db) as store:
        Ingester(store, root, config).scan()
    stored = _ids(db)
    # Written while no daemon ran: one line appended to a log, one brief added; both before the walk.
    log = sorted((root / "heartbeats").glob("*.jsonl"))[0]
    last = json.loads(log.read_text().splitlines()[-1])
    with log.open("a") as f:
        f.write(json.dumps({**last, "id": "while-down"}) + "\n")
    before_walk = _brief(root, "before-walk.md", last["agent"], last["ts"])
    cache = tmp_path / "honestyd.db.model"
    cache.write_bytes(b"")  # a start with a cache to read is one that walks ahead (this daemon does not read it)
    walk = walkahead.start(root, db, cache=cache, walk_from=0, cores=2)
    assert walk is not None
    # One brief written after the walk and before the watcher: the walk cannot have seen it.
    deadline = time.monotonic() + DEADLINE
    while not walk._walked.done() and time.monotonic() < deadline:
        walk.prepare()
        time.sleep(0.01)  # the walk is in once its answer is decoded
    after_walk = _brief(root, "after-walk.md", last["agent"], last["ts"])

    async def scenario() -> None:
        async with in_process(Daemon(config, environ={}, walk_ahead=walk)):
            assert {"while-down", before_walk} <= _ids(db)
            waited = time.monotonic()
            while after_walk not in _ids(db):
                assert time.monotonic() - waited < DEADLINE, f"{after_walk} never read"
                await asyncio.sleep(0.02)
            assert _ids(db) == stored | {"while-down", before_walk, after_walk}

    asyncio.run(scenario())
