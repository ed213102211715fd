"""daemon/store/pagereads.py: what the reviewer's pages read from a real store, filled by a real ingest pass."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from collectors.jsonl import MAX_NOTE, parse_label
from collectors.records import ComponentResult, DayCounts, Label
from collectors.rfc3339 import format_ts
from daemon.config import COMPONENTS, Config
from daemon.ingest import Ingester
from daemon.store import Store
from tests.helpers import T0


def _state(root: Path) -> None:
    (root / "heartbeats").mkdir(parents=True)
    (root / "labels").mkdir()
    events = [{"id": f"e-{i}", "ts": format_ts(T0 + timedelta(minutes=i)), "agent": "ada", "kind": "dm",
               "text": f"said <b>{i}</b> {{{{ 7*7 }}}} " + "x" * (i * 300)} for i in range(1, 4)]
    (root / "heartbeats" / "ada.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (root / "briefs").mkdir()
    (root / "briefs" / "b.md").write_text(f"---\nagent: ada\nts: {format_ts(T0)}\n---\nA brief, whole.\n")
    labels = [
        {"ts": format_ts(T0 + timedelta(hours=1)), "decision": "e-1", "value": "down", "reviewer": "alice",
         "note": "no source <script>"},
        {"ts": format_ts(T0 + timedelta(hours=2)), "decision": "e-1", "value": "up", "reviewer": "maya"},
        {"ts": format_ts(T0 + timedelta(hours=2)), "decision": "e-2", "value": "up", "reviewer": "alice",
         "note": ""},
    ]
    (root / "labels" / "api.jsonl").write_text("".join(json.dumps(lb) + "\n" for lb in labels))


def test_texts_and_labels_with_notes_come_back_as_written(tmp_path: Path) -> None:
    root = tmp_path / "state"
    _state(root)
    with Store.open(tmp_path / "db.sqlite") as store:
        Ingester(store, root, Config(), clock=lambda: T0 + timedelta(hours=3)).scan()
        texts = store.texts_of([("heartbeats/ada.jsonl", 0, 2), ("heartbeats/ada.jsonl", 0, 3),
                                ("briefs/b.md", 0, 0), ("heartbeats/ada.jsonl", 0, 99)])
        labels = store.labels_with_notes(["e-1", "e-2", "e-404"])
    assert texts[("heartbeats/ada.jsonl", 0, 2)] == "said <b>2</b> {{ 7*7 }} " + "x" * 600
    assert texts[("heartbeats/ada.jsonl", 0, 3)].endswith("x" * 900)
    assert texts[("briefs/b.md", 0, 0)].strip() == "A brief, whole."
    assert ("heartbeats/ada.jsonl", 0, 99) not in texts  # no such record: nothing, not an error
    assert [(lb.decision, lb.reviewer, lb.value, lb.note, lb.line) for lb in labels] == [
        ("e-1", "alice", "down", "no source <script>", 1), ("e-1", "maya", "up", None, 2),
        ("e-2", "alice", "up", None, 3)]


def test_a_labels_note_is_optional_and_bounded() -> None:
    base = {"ts": format_ts(T0), "decision": "e-1", "value": "down", "reviewer": "alice"}
    for note, kept in ((None, None), ("", None), (7, None), ("why", "why"), ("n" * 5000, "n" * MAX_NOTE)):
        line = json.dumps({**base, **({} if note is None else {"note": note})}).encode()
        label = parse_label(line, "labels/api.jsonl", 1)
        assert isinstance(label, Label) and label.note == kept


def test_history_since_gives_every_agent_from_that_day(tmp_path: Path) -> None:
    zero = tuple(ComponentResult(1, 2, 0) for _ in COMPONENTS)
    days = [T0.date() + timedelta(days=n) for n in range(4)]
    with Store.open(tmp_path / "db.sqlite") as store, store.transaction():
        store.put_history([DayCounts(d, agent, "24h", 5, zero) for d in days for agent in ("ada", "bob")])
    with Store.open(tmp_path / "db.sqlite") as store:
        since = store.history_since(days[2])
        assert [(c.agent, c.day) for c in since] == [("ada", days[2]), ("ada", days[3]), ("bob", days[2]),
                                                     ("bob", days[3])]
        assert since[0].components == zero
        assert store.history("bob") == [c for c in store.history_since(days[0]) if c.agent == "bob"]
