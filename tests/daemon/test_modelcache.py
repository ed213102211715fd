"""The model cache (daemon/modelcache.py): a model written at one point and loaded later, after more was ingested,
scores exactly what a model built from the store scores; a cache the store cannot catch up from, or written for
another store, code or scoring configuration, is refused with its reason, and the start builds from the store.

Real files, a real store ingested by the real Ingester from a simulated state; the daemon-level round trip is in
``test_the_daemon_writes_the_cache_at_shutdown_and_starts_from_it``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.records import CheckResult, Event
from collectors.rfc3339 import format_ts
from daemon import modelcache
from daemon.config import Config, DaemonSettings, Phrases, Verify
from daemon.ingest import Ingester
from daemon.modelkeeper import LiveFeed
from daemon.simulate import simulate
from daemon.store import Store
from scorers.live import LiveModel
from tests.daemon_harness import daemon, stop, wait_for, write_config
from tests.scorers.live.test_table import _reachable

CONFIG = Config()


class World:
    """A simulated state, its store and ingester, and a clock the test moves."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "state"
        summary = simulate(7, self.root, agents=4, days=3)
        self.now = summary.end
        self.store = Store.open(tmp / "honestyd.db")
        self.ingester = Ingester(self.store, self.root, CONFIG, clock=lambda: self.now)
        self.ingester.scan()
        self.cache = modelcache.path_for(tmp / "honestyd.db")
        self.tmp = tmp

    def fed(self, feed: LiveFeed | None = None) -> LiveFeed:
        """``feed`` (a model built from the store when None) synced with the store and evaluated now."""
        if feed is None:
            feed = LiveFeed(CONFIG)
            feed.load(self.store)
        feed.sync(self.store)
        feed.evaluate(self.now)
        return feed

    def change_everything(self) -> None:
        """What happens while the daemon is down: appends, a rewritten brief (its rowid freed and handed out
        again), a deleted finding, new labels and checks, and time passing."""
        self.now += timedelta(hours=5)
        log = sorted((self.root / "heartbeats").glob("*.jsonl"))[0]
        last = json.loads(log.read_text().splitlines()[-1])
        with log.open("a") as f:
            for i in range(6):
                f.write(json.dumps({**last, "id": f"late-{i}", "ts": format_ts(self.now - timedelta(minutes=i)),
                                    "text": f"late update {i}: no source yet"}) + "\n")
        brief = sorted((self.root / "briefs").glob("*.md"))[-1]
        brief.write_text(brief.read_text() + "\nEdited: see https://docs.example.org/late\n")
        sorted((self.root / "findings").glob("*.md"))[0].unlink()
        labels = self.root / "labels" / "reviews.jsonl"
        first = json.loads(labels.read_text().splitlines()[0])
        with labels.open("a") as f:
            f.write(json.dumps({**first, "ts": format_ts(self.now - timedelta(minutes=1)), "value": "down"}) + "\n")
        cited = self.store.conn.execute("SELECT DISTINCT type, target FROM citations LIMIT 6").fetchall()
        with self.store.atomic():
            self.store.add_checks([CheckResult(target, kind, self.now - timedelta(minutes=3), i % 2 == 0, 200)
                                   for i, (kind, target) in enumerate(cited)])
        self.ingester.scan()

    def prune(self, feed: LiveFeed) -> None:
        """What the running daemon does once a minute: drop the change feed its model applied."""
        feed.sync(self.store)
        with self.store.atomic():
            self.store.prune_changes(feed.marks[3])


def _same_scores(a: LiveFeed, b: LiveFeed, at: datetime) -> None:
    assert a.evaluate(at) == b.evaluate(at)
    agents = {agent for w in a.evaluate(at).values() for agent in w.agents}
    assert agents
    for agent in sorted(agents):
        for window, _ in a.config.scoring.windows:
            assert a.agent_result(agent, window) == b.agent_result(agent, window), (agent, window)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(tmp_path)
    yield w
    w.store.close()


def test_a_cached_model_catches_up_to_what_a_cold_load_builds(world: World) -> None:
    running = world.fed()
    size = modelcache.save(running, world.cache, world.store.store_id())
    assert size > 0 and world.cache.stat().st_mode & 0o777 == 0o600
    world.change_everything()
    loaded = modelcache.load(world.cache, CONFIG, world.store)
    assert loaded is not None
    assert not world.cache.exists(), "a cache is read once"
    cold = world.fed()
    world.fed(loaded)
    assert loaded.marks == cold.marks
    _same_scores(loaded, cold, world.now)
    _same_scores(loaded, cold, world.now + timedelta(days=2))  # and as time goes on (expiring outcomes)


def _columns(model: LiveModel) -> dict[str, Any]:
    """What a model holds, column by column (its table, its ids' index, each agent's columns, the days)."""
    t = model._table
    table = {name: getattr(t, name) for name in ("ts", "source", "line", "thread", "cited", "shape", "free")}
    table.update(ids=(t.ids.at, t.ids.stem, t.ids.blob, t.ids.stems))
    tables = {name: getattr(t, name).values for name in ("sources", "threads", "citations", "shapes")}
    agents = {name: (a.events, a.counts, a.awaiting, a.labelled, a.label_slots,
                     [(an.held, an.decisions, an.needs, an.contributions) for an in a.anchored])
              for name, a in model._agents.items()}
    return {"table": table, "tables": tables, "ids": model._winner.slots, "agents": agents,
            "prompts": model._prompts, "by_path": model._by_path, "counts": model._counts}


def test_a_loaded_model_is_the_columns_it_was_written_as(world: World) -> None:
    """The cache writes the model's columns and reads them back as they were (slots keep their numbers, the ids'
    index its table), and the loaded model holds no object per record: a start reads arrays, not a million objects."""
    running = world.fed()
    modelcache.save(running, world.cache, world.store.store_id())
    loaded = modelcache.load(world.cache, CONFIG, world.store)
    assert loaded is not None
    assert _columns(loaded.model) == _columns(running.model)
    assert len(loaded.model._winner) == len(running.model._winner) > 100
    assert loaded.model._winner.ids is loaded.model._table.ids  # the index reads the loaded table, not a copy
    loaded.model._table.forget_made()
    held = _reachable(vars(loaded.model))
    assert not [o for o in held if isinstance(o, Event)]
    times = [o for o in held if isinstance(o, datetime)]  # the file index's and the checks' alone
    model = loaded.model
    assert len(times) <= 2 * len(model._files.files) + len(model._all_checks) + 4 < len(model._winner)


def test_a_cache_the_change_feed_was_pruned_past_is_refused(world: World, caplog: pytest.LogCaptureFixture) -> None:
    running = world.fed()
    modelcache.save(running, world.cache, world.store.store_id())
    stale = world.tmp / "stale.model"
    shutil.copyfile(world.cache, stale)
    world.change_everything()
    world.prune(running)  # the daemon ran on after writing the cache, then died without writing another
    found = modelcache.read(world.cache, CONFIG)
    assert found is not None and found.feed is not None and found.refused is None
    with caplog.at_level(logging.INFO, "honestyd"):
        assert modelcache.accept(found, world.store) is None
    assert "pruned past its marks" in caplog.text
    assert found.feed is None  # a refused model is let go at once: the load from the store would hold both
    assert not world.cache.exists()
    # The refusal is needed: the same model, unpickled without the check, misses the removals the pruned feed held.
    with stale.open("rb") as f:
        f.readline(), f.readline()  # the header
        with_check_skipped = modelcache.read_feed(f)
    assert world.fed(with_check_skipped).evaluate(world.now) != world.fed().evaluate(world.now)


#: Changes only summing reads: other weights (one agent its own), another floor and z, other windows.
SUMMED_DIFFERENTLY = replace(
    CONFIG, weights_versions={**CONFIG.weights_versions, "alt": (0.1, 0.3, 0.1, 0.2, 0.2, 0.1)},
    weights_active="alt", weights_agents={"ada": CONFIG.weights_active},
    scoring=replace(CONFIG.scoring, min_decisions=2, z=1.0,
                    windows=(("6h", timedelta(hours=6)), ("7d", timedelta(days=7)), ("30d", timedelta(days=30)))))


def test_a_cache_written_under_other_weights_and_windows_scores_with_the_new_ones(world: World) -> None:
    """Weights, windows and the floor are read only when counts are summed: the cache is used, and summed anew."""
    running = world.fed()
    modelcache.save(running, world.cache, world.store.store_id())
    world.change_everything()
    loaded = modelcache.load(world.cache, SUMMED_DIFFERENTLY, world.store)
    assert loaded is not None and loaded.config is SUMMED_DIFFERENTLY
    cold = LiveFeed(SUMMED_DIFFERENTLY)
    cold.load(world.store)
    world.fed(loaded), world.fed(cold)
    _same_scores(loaded, cold, world.now)
    assert set(loaded.evaluate(world.now)) == {"6h", "7d", "30d"}
    assert loaded.evaluate(world.now) != running.evaluate(world.now)  # the change shows


def _refused(world: World, caplog: pytest.LogCaptureFixture, config: Config = CONFIG,
             store: Store | None = None) -> str | None:
    """Load the cache; the reason it was not used (None: it was)."""
    caplog.clear()
    with caplog.at_level(logging.INFO, "honestyd"):
        loaded = modelcache.load(world.cache, config, store or world.store)
    if loaded is not None:
        return None
    return caplog.records[-1].getMessage() if caplog.records else "no cache"


def test_refusals_name_their_reason(world: World, tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    running = world.fed()
    store_id = world.store.store_id()
    cases: list[tuple[str, str]] = []

    def check(expected: str | None, code: str | None = None, **kwargs: object) -> None:
        modelcache.save(running, world.cache, store_id)
        if code is not None:  # the code changed between the shutdown and the start
            monkeypatch.setattr(modelcache, "code_hash", lambda: code)
        why = _refused(world, caplog, **kwargs)  # type: ignore[arg-type]
        monkeypatch.undo()
        cases.append((expected or "used", why or "used"))
        if expected is None:
            assert why is None
        else:
            assert why is not None and expected in why, why
            assert not world.cache.exists()

    # What the model never reads may change; anything it reads may not.
    check(None, config=replace(CONFIG, daemon=DaemonSettings(listen="127.0.0.1:1"), verify=Verify(per_host=1)))
    check("configuration the model reads has changed",
          config=replace(CONFIG, phrases=replace(CONFIG.phrases, gap=(*Phrases().gap, "unknown so far"))))
    check(None, config=SUMMED_DIFFERENTLY)
    longer = replace(CONFIG, scoring=replace(CONFIG.scoring, windows=(("24h", timedelta(days=1)),
                                                                      ("45d", timedelta(days=45)))))
    check("a longer window reaches records it let go", config=longer)
    check("configuration the model reads has changed",
          config=replace(CONFIG, scoring=replace(CONFIG.scoring, follow_up=timedelta(minutes=9))))
    with Store.open(tmp_path / "other.db") as other:
        check("written for another store", store=other)
    check("written by another version of the code", code="0" * 16)

    # A store restored from a copy older than the cache.
    older = tmp_path / "older.db"
    copy = sqlite3.connect(older)
    world.store.conn.backup(copy)
    copy.close()
    world.change_everything()
    running = world.fed(running)
    with Store.open(older, readonly=True) as restored:
        check("ahead of the store", store=restored)

    # Damaged files.
    modelcache.save(running, world.cache, store_id)
    data = world.cache.read_bytes()
    world.cache.write_bytes(data[: len(data) // 2])
    assert "unreadable" in (_refused(world, caplog) or "")
    world.cache.write_bytes(b"not a cache at all")
    assert "not a model cache" in (_refused(world, caplog) or "")
    # One byte changed inside a string (the stem of decision ids): it would unpickle without complaint.
    modelcache.save(running, world.cache, store_id)
    data = world.cache.read_bytes()
    at = data.index(b"ada-", data.index(b"\n", len(modelcache.MAGIC)))
    world.cache.write_bytes(data[:at] + b"adz-" + data[at + 4:])
    assert "checksum does not match" in (_refused(world, caplog) or "")
    assert _refused(world, caplog) == "no cache"  # both were removed

    # A file others could have written is not trusted, and is left for its owner to look at.
    modelcache.save(running, world.cache, store_id)
    os.chmod(world.cache, 0o620)
    assert "writable only by it" in (_refused(world, caplog) or "")
    assert world.cache.exists()
    print("\n".join(f"{want:45s} -> {got}" for want, got in cases))


def test_the_daemon_writes_the_cache_at_shutdown_and_starts_from_it(tmp_path: Path) -> None:
    root = tmp_path / "state"
    summary = simulate(7, root, agents=4, days=3)
    clock = tmp_path / "now.txt"
    clock.write_text(format_ts(summary.end))
    cache = modelcache.path_for(tmp_path / "honestyd.db")

    def scores(d: object) -> dict[object, float]:
        return {k: v for k, v in d.metrics().items()  # type: ignore[attr-defined]
                if k[0] in ("honesty_score", "honesty_component_ratio", "honesty_window_decisions")}

    with daemon(tmp_path, root, clock_file=clock) as d:
        first = scores(d)
        assert stop(d)[0] == 0
    assert "model cache" in d.logs() and " written: " in d.logs() and cache.exists(), d.logs()
    log = sorted((root / "heartbeats").glob("*.jsonl"))[0]
    last = json.loads(log.read_text().splitlines()[-1])
    with log.open("a") as f:  # written while the daemon is down
        f.write(json.dumps({**last, "id": "while-down", "kind": "dm", "text": "while down: no source"}) + "\n")
    with daemon(tmp_path, root, clock_file=clock) as d2:
        wait_for(lambda: scores(d2) != first, 10, "the line written while down")
        cached = scores(d2)
        assert stop(d2)[0] == 0
    assert "model cache" in d2.logs() and "loaded" in d2.logs(), d2.logs()
    cache.unlink()
    config = write_config(tmp_path / "cold.toml")
    config.write_text(config.read_text().replace("[daemon]\n", "[daemon]\nmodel_cache = false\n"))
    with daemon(tmp_path, root, clock_file=clock, config=config) as d3:
        assert scores(d3) == cached
        assert stop(d3)[0] == 0
    assert not cache.exists() and "model cache" not in d3.logs()


def test_a_loaded_model_answers_for_the_labels_as_the_running_one(world: World) -> None:
    """The labels (their columns, the map of their slots, each agent's labelled decisions) come back as they were."""
    running = world.fed()
    modelcache.save(running, world.cache, world.store.store_id())
    loaded = modelcache.load(world.cache, CONFIG, world.store)
    assert loaded is not None
    model = loaded.model
    visible = dict(model._label_columns.visible_items())
    assert visible and visible == dict(running.model._label_columns.visible_items())
    assert {k: model.visible_labels(k) for k in visible} == {k: running.model.visible_labels(k) for k in visible}
    assert model.label_tally() == running.model.label_tally()
