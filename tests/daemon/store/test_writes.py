"""The store's writes of events: rows of many statements' worth land in read order, once each, with their citations,
in a few statements per batch. A real SQLite file."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

from collectors.citations import Citation
from collectors.records import Event
from daemon.store import Store, event_rows
from tests.helpers import T0

#: More than two statements' worth of event rows (14 values each, 999 a statement) and of citation rows (6 each).
COUNT = 200


def _events(lines: range, path: str = "heartbeats/a.jsonl") -> list[Event]:
    return [Event(f"e{n}", T0 + timedelta(seconds=n), "ada", "dm", path, n, text=f"line {n}",
                  citations=(Citation("run", f"run:{100000 + n}"), Citation("path", f"docs/{n}.md")),
                  alternatives=(f"alt {n}",) if n % 3 == 0 else ())
            for n in lines]


def test_event_rows_land_in_read_order_once_each_with_their_citations(tmp_path: Path) -> None:
    with Store.open(tmp_path / "h.db") as store:
        with store.transaction():
            assert store.add_events(_events(range(1, COUNT + 1))) == COUNT
        with store.transaction():
            # A replay of lines 100..COUNT + 50: only the 50 new ones are added, after the others.
            assert store.add_events(_events(range(100, COUNT + 51))) == 50
        with store.transaction():
            assert store.add_events([]) == 0
        stored = store.events()
    assert [e.id for e in stored] == [f"e{n}" for n in range(1, COUNT + 51)]
    assert stored == _events(range(1, COUNT + 51))  # every column and citation, as written


def test_a_batch_of_events_is_a_few_statements_not_one_a_row(tmp_path: Path) -> None:
    rows, cites = event_rows(_events(range(1, COUNT + 1)))
    with Store.open(tmp_path / "h.db") as store:
        statements: list[str] = []
        store.conn.set_trace_callback(statements.append)
        with store.transaction():
            assert store.add_event_rows(rows, cites) == COUNT
        store.conn.set_trace_callback(None)
    inserts = [s for s in statements if s.startswith("INSERT")]
    # 200 events in chunks of 71, 400 citations in chunks of 166: three statements each (one per row was 600).
    assert len(inserts) == 6, [s[:40] for s in inserts]


def test_rows_sharing_a_key_inside_one_statement_keep_the_first(tmp_path: Path) -> None:
    first, again = _events(range(1, 3)), [e._replace(id=f"r{e.id}") for e in _events(range(2, 4))]
    rows, cites = event_rows([*first, *again])  # line 2 twice in one statement
    with Store.open(tmp_path / "h.db") as store:
        with store.transaction():
            assert store.add_event_rows(rows, cites) == 3
        assert [e.id for e in store.events()] == ["e1", "e2", "re3"]
        conn = sqlite3.connect(tmp_path / "h.db")
        try:
            assert conn.execute("SELECT count(*) FROM citations").fetchone() == (6,)
        finally:
            conn.close()
