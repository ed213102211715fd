"""Review files ingested like any source (daemon/store/reviews.py, migration 012): exactly once across restarts,
malformed lines rejected and counted, read back in rowid order; batch mode reads no scoring input from them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from collectors.batch import scan_state
from collectors.reviews import Listed
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.reviews.events import closing, encode
from daemon.reviews.queue import Queue
from daemon.store import Store

AT = datetime(2026, 6, 1, 12, tzinfo=UTC)
OPENED = {"ts": "2026-06-01T11:00:00Z", "review": "r-1", "event": "opened", "agent": "zoe", "reason": "below",
          "failed": [{"id": "zoe-1"}]}


def _write(root: Path, *lines: bytes) -> Path:
    path = root / "reviews" / "honestyd.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        f.writelines(lines)
    return path


def test_review_lines_are_ingested_once_across_restarts_and_bad_ones_counted(tmp_path: Path) -> None:
    root, db = tmp_path / "state", tmp_path / "db.sqlite"
    _write(root, encode(OPENED)[0], b'{"review": "r-1"}\n', b"not json\n")
    with Store.open(db) as store:
        stats = Ingester(store, root, Config(), clock=lambda: AT).scan()
        assert stats.records == {"reviews": 1}
        assert stats.rejects == {("reviews", "missing_ts"): 1, ("reviews", "not_json"): 1}
        [(first, opened)] = store.review_events_after(0)
        assert (opened.event, opened.review, opened.line, opened.data["failed"]) == ("opened", "r-1", 1,
                                                                                   [{"id": "zoe-1"}])
    _write(root, encode(closing("r-1", AT, "andrew", "done"))[0])
    for _ in range(2):  # restarts: only the new line, once
        with Store.open(db) as store:
            stats = Ingester(store, root, Config(), clock=lambda: AT).scan()
            rows = store.review_events_after(0)
        assert [e.event for _, e in rows] == ["opened", "closed"] and rows[0][0] == first
        assert sum(stats.rejects.values()) == 0
    assert stats.records == {}
    with Store.open(db) as store:
        assert [e.event for _, e in store.review_events_after(first)] == ["closed"]
        queue = Queue.fold(e for _, e in store.review_events_after(0))
    [review] = queue.reviews.values()
    assert (review.state, review.closed_by, review.note) == ("closed", "andrew", "done")


def test_a_rewritten_review_file_is_read_again_but_folds_into_the_same_queue(tmp_path: Path) -> None:
    root, db = tmp_path / "state", tmp_path / "db.sqlite"
    path = _write(root, encode(OPENED)[0])
    with Store.open(db) as store:
        ingester = Ingester(store, root, Config(), clock=lambda: AT)
        ingester.scan()
        # Rewritten (not appended to): the close first, then the opening again.
        path.write_bytes(encode(closing("r-1", AT, "andrew", "ok"))[0] + encode(OPENED)[0])
        ingester.scan()
        events = [e for _, e in store.review_events_after(0)]
    assert [(e.event, e.generation) for e in events] == [("opened", 0), ("closed", 1), ("opened", 1)]
    [review] = Queue.fold(events).reviews.values()
    assert [e.event for e in review.history] == ["opened", "closed"]  # the opening read twice is one event


def test_a_long_evidence_list_is_read_back_as_text_equal_to_it(tmp_path: Path) -> None:
    """What the daemon keeps of each stored opening (the queue folds them all): its failing decisions as text."""
    root, db = tmp_path / "state", tmp_path / "db.sqlite"
    failed = [{"id": f"zoe-{k}", "ts": "2026-06-01T10:00:00Z", "kind": "dm", "components": ["citation_rate"],
               "source": f"heartbeats/zoe.jsonl:{k}"} for k in range(50)]
    _write(root, encode({**OPENED, "failed": failed})[0])
    with Store.open(db) as store:
        Ingester(store, root, Config(), clock=lambda: AT).scan()
        [(_, opened)] = store.review_events_after(0)
    assert isinstance(opened.data["failed"], Listed) and opened.data["failed"] == failed
    assert Queue.fold([opened]).reviews["r-1"].failed_ids() == [f"zoe-{k}" for k in range(50)]


def test_batch_mode_reads_nothing_from_review_files(tmp_path: Path) -> None:
    root = tmp_path / "state"
    line = {"id": "e1", "ts": "2026-06-01T10:00:00Z", "agent": "ada", "kind": "dm", "text": "x"}
    _write(root, (json.dumps(line) + "\n").encode(), encode(OPENED)[0])
    scan = scan_state(root, Config())
    assert scan.events == [] and scan.labels == [] and scan.rejects == []
    assert "reviews/honestyd.jsonl" in scan.files  # indexed like every file
