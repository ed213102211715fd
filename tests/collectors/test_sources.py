"""One routing of files to sources (collectors/sources.py): batch mode and the daemon read a file as the same source.

A path goes to the first source, in the order heartbeats, labels, briefs, findings, evals, whose glob matches it; with
globs that overlap, batch mode used to read a file both globs match as labels while the daemon read it as heartbeats.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.batch import scan_state
from collectors.sources import LOGS, SOURCES, Globs, routes, source_of
from collectors.statedir import glob_match
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.store import Store

AT = datetime(2026, 5, 4, tzinfo=UTC)


def test_a_path_goes_to_the_first_source_whose_glob_matches() -> None:
    globs = Globs(heartbeats="logs/*.jsonl", labels="logs/*.jsonl", briefs="notes/*.md", findings="notes/*.md")
    assert SOURCES[0] == "reviews" and SOURCES[1:3] == LOGS[:2]
    assert [source_of(globs, p) for p in ("logs/a.jsonl", "notes/b.md", "evals/c.json", "other/d.txt")] == [
        "heartbeats", "briefs", "evals", None]
    assert [source_of(Globs(), p) for p in ("labels/r.jsonl", "findings/f.md", "heartbeats/x.json")] == [
        "labels", "findings", None]
    # honestyd's own review files first: a heartbeats glob that covers them does not read them as heartbeats.
    wide = Globs(heartbeats="*/*.jsonl")
    assert [source_of(wide, p) for p in ("reviews/honestyd.jsonl", "other/x.jsonl")] == ["reviews", "heartbeats"]


def test_routing_many_paths_at_once_routes_each_as_one_at_a_time() -> None:
    paths = ["logs/a.jsonl", "notes/b.md", "evals/c.json", "other/d.txt", "reviews/honestyd.jsonl", "x/y.jsonl"]
    for globs in (Globs(), Globs(heartbeats="*/*.jsonl"), Globs(briefs="notes/*.md", findings="notes/*.md")):
        assert routes(globs, iter(paths)) == [source_of(globs, p) for p in paths]
        assert None in routes(globs, paths) and len({*routes(globs, paths)}) > 2


def test_batch_mode_and_the_daemon_read_a_file_two_globs_match_as_the_same_source(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "logs").mkdir(parents=True)
    line = {"id": "e1", "ts": "2026-05-03T10:00:00Z", "agent": "ada", "kind": "dm", "text": "see Issue #4"}
    (root / "logs" / "ada.jsonl").write_text(json.dumps(line) + "\n")
    config = replace(Config(), globs=Globs(heartbeats="logs/*.jsonl", labels="logs/*.jsonl"))
    batch = scan_state(root, config)
    with Store.open(tmp_path / "db.sqlite") as store:
        Ingester(store, root, config, clock=lambda: AT).scan()
        stored = store.load_records()
    assert [e.id for e in batch.events] == [e.id for e in stored.events] == ["e1"]
    assert batch.labels == [] and batch.rejects == [] and list(stored.labels) == []


_PART = st.text(alphabet="ab*?.", min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(globs=st.lists(st.lists(_PART, min_size=1, max_size=3).map("/".join), min_size=6, max_size=6),
       path=st.lists(st.text(alphabet="ab.*?", min_size=1, max_size=4), min_size=1, max_size=3).map("/".join))
def test_one_match_routes_a_path_as_the_globs_one_after_another_do(globs: list[str], path: str) -> None:
    """source_of matches every glob at once (one pattern, an alternative per source): the same source as trying each
    glob in turn and taking the first that matches, whatever the globs overlap in."""
    routed = Globs(**dict(zip(SOURCES, globs, strict=True)))
    first = next((name for name, glob in zip(SOURCES, globs, strict=True) if glob_match(glob, path)), None)
    assert source_of(routed, path) == first
