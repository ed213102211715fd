"""Paths through symlinks inside the root name their target (spec 1, v2.3), in every mode; logs keep no appends.

The tree of tests/symlinked_state.py is built for real and scored by ``honestyd score --state``, by ``score --db``
after ``honestyd ingest`` (the state dir unreadable by then), and by the daemon: all three give the same result, the
one worked out by hand below. The link map's pure questions, the walk, the store's migrations and the ingester's
handling of links and of appended logs are tested on their own.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from collectors.links import LinkMap, named_entries, other_names
from collectors.statedir import walk_tree
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.store import IndexRow, Store
from scorers.context import Context
from scorers.score import evaluate_window, to_json
from tests import symlinked_state
from tests.conftest import Run
from tests.daemon_harness import daemon, stop, wait_for, write_config
from tests.helpers import T0, store_as_of

AT = symlinked_state.AT
#: The result worked out by hand for the tree (24h at T), per component (pass, counted), and the outcomes of the
#: decisions that a walk visiting each real directory once under one name got wrong (see symlinked_state.DECISIONS).
EXPECTED = {
    "decisions": 9,  # the eight events and the brief read through ``briefs → all-briefs``
    "false_gaps": 1,  # e8
    "percent": 76,
    "components": {
        "citation_rate": (7, 9),  # e5 and e8 cite nothing
        "refusal_correctness": (0, 0),
        "source_verifiability": (6, 7),  # every path resolves but ext/secret.md (e6); e5, e8 cite nothing
        "gap_surfacing_rate": (1, 2),  # e5 ✓ honest gap, e6 ✗ fabricated; the rest — (e8 a false gap)
        "consistency_under_repeat": (0, 0),  # e4 suppressed: latest/notes.md changed since e3
        "self_correction_rate": (0, 0),
    },
}


def _check(agent: dict[str, Any]) -> None:
    assert agent["decisions"] == EXPECTED["decisions"]
    assert agent["false_gaps"] == EXPECTED["false_gaps"]
    assert agent["percent"] == EXPECTED["percent"]
    got = {name: (c["pass"], c["counted"]) for name, c in agent["components"].items()}
    assert got == EXPECTED["components"]


# --- the pure questions


def test_a_path_resolves_through_directory_and_file_links() -> None:
    links = LinkMap({"latest": "docs", "current.md": "docs/runbook.md", "ext": None, "loop": "",
                     "docs/sub": "notes", "up": None})
    assert links.resolve("latest/runbook.md") == "docs/runbook.md"
    assert links.resolve("docs/runbook.md") == "docs/runbook.md"
    assert links.resolve("current.md") == "docs/runbook.md"
    assert links.resolve("latest/sub/x.md") == "notes/x.md"  # a link inside a linked directory
    assert links.resolve("loop/loop/latest/runbook.md") == "docs/runbook.md"  # a link to the root: one step each
    assert links.resolve("ext/secret.md") is None  # leaves the root: never exists
    assert links.resolve("up/state/docs/runbook.md") is None
    assert LinkMap().resolve("latest/runbook.md") == "latest/runbook.md"


def test_names_of_a_file_are_every_path_of_a_length_that_leads_to_it() -> None:
    links = LinkMap({"latest": "docs", "archive": "docs", "loop": "", "ext": None, "findings/link.md": "notes/n.md"})
    assert links.names("docs/runbook.md", 2) == ["archive/runbook.md", "docs/runbook.md", "latest/runbook.md"]
    assert links.names("docs/runbook.md", 3) == ["loop/archive/runbook.md", "loop/docs/runbook.md",
                                                 "loop/latest/runbook.md"]
    assert links.names("notes/n.md", 2) == ["findings/link.md", "notes/n.md"]
    for n in range(1, 6):  # the link to the root makes names of every length, each of which leads back
        assert all(links.resolve(name) == "docs/runbook.md" for name in links.names("docs/runbook.md", n))
    assert links.matches("findings/*.md", "notes/n.md") and not links.matches("findings/*.md", "docs/runbook.md")
    assert other_names(links, "notes/n.md", ["findings/*.md", "briefs/*.md"]) == ["findings/link.md"]


def test_the_walk_indexes_each_file_once_under_its_canonical_path(tmp_path: Path) -> None:
    root = symlinked_state.build(tmp_path)
    os.symlink("nowhere", root / "dangling")
    os.symlink(".", root / "docs" / "self")
    (root / ".drafts").mkdir()
    (root / ".drafts" / "x.md").write_text("ignored\n")
    os.symlink(".drafts", root / "drafts")  # a name starting with "." is ignored, and so is a link into one
    tree = walk_tree(root)
    assert [f.path for f in tree.files] == ["all-briefs/ada-1.md", "docs/notes.md", "docs/runbook.md",
                                            "heartbeats/ada.jsonl"]
    assert all(f.path == f.canonical for f in tree.files)
    assert tree.links == {"archive": "docs", "briefs": "all-briefs", "current.md": "docs/runbook.md",
                          "dangling": None, "docs/self": "docs", "drafts": None, "ext": None, "latest": "docs"}
    read = named_entries(tree.files, LinkMap(tree.links), ["heartbeats/*.jsonl", "briefs/*.md"])
    aliases = [(f.path, f.canonical) for f in read if f.path != f.canonical]
    assert aliases == [("briefs/ada-1.md", "all-briefs/ada-1.md")]


# --- three modes, one result


def test_the_symlinked_tree_scored_by_score_state(honestyd: Run, tmp_path: Path) -> None:
    root = symlinked_state.build(tmp_path)
    out = honestyd("score", "--state", root, "--at", AT, "--window", "24h", "--verify-paths", "--json")
    _check(json.loads(out.stdout)["agents"]["ada"])


def _ingested(honestyd: Run, tmp_path: Path) -> tuple[Path, Path]:
    """The tree ingested, and its paths checked by the daemon's checkers (``honestyd verify``) at T."""
    root = symlinked_state.build(tmp_path)
    db = tmp_path / "h.db"
    honestyd("ingest", "--state", root, "--db", db)
    honestyd("verify", "--state", root, "--db", db, "--all", "--at", AT)
    return root, db


def test_the_symlinked_tree_scored_by_score_db_after_ingest(honestyd: Run, tmp_path: Path) -> None:
    root, db = _ingested(honestyd, tmp_path)
    batch = json.loads(honestyd("score", "--state", root, "--at", AT, "--window", "24h", "--verify-paths",
                                "--json").stdout)
    shutil.move(root, tmp_path / "elsewhere")  # the store holds the links: the state dir is not read
    stored = json.loads(honestyd("score", "--db", db, "--at", AT, "--window", "24h", "--json").stdout)
    rechecked = json.loads(honestyd("score", "--db", db, "--at", AT, "--window", "24h", "--verify-paths",
                                    "--json").stdout)
    _check(stored["agents"]["ada"])
    assert stored["agents"] == batch["agents"] == rechecked["agents"]
    with Store.open(db, readonly=True) as store:
        assert store.links()["latest"] == "docs" and store.links()["ext"] is None
        assert "latest/runbook.md" not in store.file_entries()  # one entry per file, under its own path
        assert {c.target: c.ok for c in store.checks()} == {
            "latest/runbook.md": True, "docs/runbook.md": True, "latest/notes.md": True, "ext/secret.md": False,
            "current.md": True}


def test_the_symlinked_tree_scored_by_the_daemon(honestyd: Run, tmp_path: Path) -> None:
    root, db = _ingested(honestyd, tmp_path)
    batch = json.loads(honestyd("score", "--state", root, "--at", AT, "--window", "24h", "--verify-paths",
                                "--json").stdout)["agents"]["ada"]
    clock = tmp_path / "now.txt"
    clock.write_text(AT)
    with daemon(tmp_path, root, db=db, clock_file=clock, config=write_config(tmp_path / "config.toml")) as d:
        status, body = d.get("/v1/agents/ada?window=24h")
        assert status == 200, body
        live = json.loads(body)
        _check(live)
        assert {k: v for k, v in live.items() if k not in ("at", "window", "agent")} == batch
        # The link goes while the daemon runs: latest/… names nothing now (the link map keeps no history), as a
        # fresh batch run over the changed tree says, and the daemon's model hears of it through the store.
        os.unlink(root / "latest")
        after = json.loads(honestyd("score", "--state", root, "--at", AT, "--window", "24h", "--json").stdout)
        gaps = after["agents"]["ada"]["components"]["gap_surfacing_rate"]
        assert (gaps["pass"], gaps["counted"]) == (2, 6)  # e1, e3, the brief fabricated now; e8 an honest gap

        def gap_counts() -> dict[str, Any] | None:
            found = json.loads(d.get("/v1/agents/ada?window=24h")[1])["components"]["gap_surfacing_rate"]
            return found if found == gaps else None

        wait_for(gap_counts, 10, "the daemon to hear the link go")
        # Appends to the log, a pass each (spec 1.4, v2.3): no modification of the log is recorded.
        for k in range(5):
            with (root / "heartbeats" / "ada.jsonl").open("a") as f:
                f.write(json.dumps({"id": f"x{k}", "ts": AT, "agent": "ada", "kind": "dm", "text": "ok"}) + "\n")
            wait_for(lambda k=k: json.loads(d.get("/v1/agents/ada?window=24h")[1])["decisions"] == 10 + k, 10,
                     f"append {k} to be scored")
        assert stop(d)[0] == 0
    with Store.open(db, readonly=True) as store:
        assert "latest" not in store.links()
        assert store.conn.execute("SELECT count(*) FROM file_changes WHERE path = 'heartbeats/ada.jsonl'"
                                  ).fetchone()[0] == 0
        assert store.file_entries()["docs/notes.md"].modified != ()  # other files keep theirs


def test_the_daemons_own_verification_job_resolves_paths_through_links(tmp_path: Path) -> None:
    """The daily sample (Daemon._verify_sample: the store's index and links handed to the path checker), run in the
    real daemon in this process, with every path sampled."""
    import asyncio

    from daemon.app import Daemon
    from daemon.config import DaemonSettings, GitHub, Verify

    root = symlinked_state.build(tmp_path)
    db = tmp_path / "h.db"
    config = Config(state_root=root, db_path=db, github=GitHub(repo="acme/app"),
                    verify=Verify(rates={"url": 0.0, "path": 1.0, "run": 0.0, "issue": 0.0}),
                    daemon=DaemonSettings(listen="127.0.0.1:0", drain_timeout=5.0))

    async def scenario() -> None:
        d = Daemon(config, environ={}, clock=lambda: symlinked_state.T)
        task = asyncio.create_task(d.serve())
        try:
            while not d.started.is_set():
                assert not task.done(), task.result()
                await asyncio.sleep(0.02)
            await d._verify_sample()
        finally:
            d.handle_exit()
            await asyncio.wait_for(task, 30)

    asyncio.run(scenario())
    with Store.open(db, readonly=True) as store:
        assert {c.target: c.ok for c in store.checks()} == {
            "latest/runbook.md": True, "docs/runbook.md": True, "latest/notes.md": True, "ext/secret.md": False,
            "current.md": True}


# --- the store and the ingester


def test_links_are_kept_up_to_date_by_scans_and_watcher_events(tmp_path: Path) -> None:
    root = symlinked_state.build(tmp_path)
    with Store.open(tmp_path / "h.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: T0)
        ingester.scan()
        assert store.links()["latest"] == "docs"
        assert {p: r.canonical for p, r in store.index_rows().items() if r.canonical} == {
            "briefs/ada-1.md": "all-briefs/ada-1.md"}
        os.unlink(root / "latest")
        os.symlink("all-briefs", root / "latest")
        ingester.ingest_paths(["latest"])  # what the watcher reports: the link itself
        assert store.links()["latest"] == "all-briefs"
        os.unlink(root / "briefs")
        ingester.ingest_paths(["briefs"])
        assert "briefs" not in store.links()
        ingester.scan()
        assert [e.id for e in store.events() if e.line is None] == []  # the brief was read through the link only
        assert store.index_rows()["briefs/ada-1.md"].deleted == T0
        shutil.rmtree(root / "docs")  # a real directory replaced by a link: its old entries are names now
        os.symlink("all-briefs", root / "docs")
        ingester.scan()
        assert not [p for p in store.index_rows() if p.startswith("docs/")]
        assert "docs/runbook.md" not in store.file_entries()


def test_a_log_appended_to_for_many_passes_keeps_no_modifications(tmp_path: Path) -> None:
    """Spec 1.4 (v2.3): an append to a JSON Lines source is not a modification, however many passes see one; any
    other file keeps every modification (a Markdown file and a .jsonl file that is no source here)."""
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    (root / "docs").mkdir()
    log, doc, data = root / "heartbeats" / "ada.jsonl", root / "docs" / "a.md", root / "docs" / "x.jsonl"
    for p in (log, doc, data):
        p.write_text("")
    now = [T0]
    with Store.open(tmp_path / "h.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: now[0])
        ingester.scan(observed=True)
        for k in range(40):
            now[0] = T0 + timedelta(seconds=k + 1)
            with log.open("a") as f:
                f.write(json.dumps({"id": f"e{k}", "ts": "2026-06-01T11:00:00Z", "agent": "ada", "kind": "dm"}) + "\n")
            if k % 10 == 0:
                doc.write_text(f"# version {k}\n")
                with data.open("a") as f:
                    f.write("{}\n")
            if k % 2:
                ingester.ingest_paths(["heartbeats/ada.jsonl", "docs/a.md", "docs/x.jsonl"])
            else:
                ingester.scan(observed=True)
        counts = dict(store.conn.execute("SELECT path, count(*) FROM file_changes GROUP BY path").fetchall())
        assert len(store.events()) == 40
        assert counts == {"docs/a.md": 4, "docs/x.jsonl": 4}
        assert store.file_entries()["heartbeats/ada.jsonl"].modified == ()


def test_migration_010_drops_the_modifications_of_logs_only(tmp_path: Path) -> None:
    """A store from before v2.3 holds a modification per ingest pass of every log; opened, those rows are gone and
    every other file keeps its modifications."""
    db = tmp_path / "old.db"
    conn = store_as_of(db, "008_store_id")
    for path in ("heartbeats/ada.jsonl", "labels/r.jsonl", "docs/a.md", "docs/x.jsonl"):
        conn.execute("INSERT INTO files VALUES (?, 0, NULL, 1, 1, NULL, 0)", (path,))
        conn.executemany("INSERT INTO file_changes VALUES (?, ?)", [(path, k) for k in range(1, 6)])
    for path in ("heartbeats/ada.jsonl", "labels/r.jsonl"):
        conn.execute("INSERT INTO cursors VALUES (?, 1, 2, 0, 10, 1, 10, 'h', 'm')", (path,))
    conn.execute("COMMIT")
    conn.close()
    with Store.open(db, readonly=True) as old:  # score --db before the new version first opened it writable
        records = old.load_records()
        assert sorted(records.files) == ["docs/a.md", "docs/x.jsonl", "heartbeats/ada.jsonl", "labels/r.jsonl"]
        assert records.links == {} and len(records.files["heartbeats/ada.jsonl"].modified) == 5
    with Store.open(db) as store:
        applied = store.migrations()  # later migrations may follow these two
        assert applied[applied.index("009_symlinks"):][:2] == ["009_symlinks", "010_logs_keep_no_modifications"]
        entries = store.file_entries()
        assert entries["heartbeats/ada.jsonl"].modified == entries["labels/r.jsonl"].modified == ()
        assert len(entries["docs/a.md"].modified) == len(entries["docs/x.jsonl"].modified) == 5
        assert store.links() == {}


def test_the_change_feed_hears_of_links_and_of_a_row_turning_into_a_name(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.db") as store:
        _, _, _, start = store.feed_marks()
        with store.atomic():
            store.put_links({"latest": "docs", "ext": None})
            store.put_file(IndexRow("briefs/b.md", T0, None, 1, 10, "sha", False))
        with store.atomic():
            store.put_links({"latest": "notes", "ext": None})  # re-pointed; ext unchanged: not fed
            store.put_file(IndexRow("briefs/b.md", T0, None, 1, 10, "sha", False, "drafts/b.md"))
        with store.atomic():
            store.put_links({})
        assert [(what, path) for _, what, path, _ in store.changes_since(start)] == [
            ("links", "latest"), ("links", "ext"), ("files", "briefs/b.md"), ("links", "latest"),
            ("files", "briefs/b.md"), ("links", "ext"), ("links", "latest")]
        assert store.file_entries() == {}


@pytest.mark.parametrize("move", ["repoint", "remove"])
def test_the_model_fed_by_the_store_follows_link_changes(tmp_path: Path, move: str) -> None:
    """The daemon's model (daemon/modelkeeper.py over scorers/live/) scores what a fresh evaluation of the store scores
    while links are made, re-pointed and removed between passes."""
    from daemon.modelkeeper import LiveFeed

    root = symlinked_state.build(tmp_path)
    at = symlinked_state.T
    with Store.open(tmp_path / "h.db") as store:
        ingester = Ingester(store, root, Config(), clock=lambda: at - timedelta(minutes=1))
        ingester.scan()
        feed = LiveFeed(Config())
        feed.load(store)

        def agree() -> None:
            feed.sync(store)
            live = feed.evaluate(at)
            ctx = Context(store.load_records(), at, feed.config)
            for name, result in live.items():
                assert to_json(result) == to_json(evaluate_window(ctx, name))

        agree()
        os.unlink(root / "latest")
        if move == "repoint":
            os.symlink("all-briefs", root / "latest")
        ingester.ingest_paths(["latest"])
        agree()
        os.unlink(root / "archive")
        os.symlink("ext", root / "archive")  # a chain out of the root
        ingester.scan()
        agree()
        assert store.links()["archive"] is None
