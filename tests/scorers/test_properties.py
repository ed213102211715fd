"""Property tests: scores stay in [0, 1]; a ✓ never lowers a component; order and re-ingest change nothing."""

from __future__ import annotations

import json
import random
import tempfile
from datetime import UTC, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.records import Event
from collectors.rfc3339 import exact_from_us, from_us, from_us_many
from daemon.config import COMPONENTS, Config, GitHub
from daemon.ingest import Ingester
from daemon.store import Store
from scorers.context import Records
from scorers.score import evaluate, to_json
from tests.helpers import T0, check, ev, file, label

CFG = Config(github=GitHub(repo="acme/app"))
TEXTS = ["All good.", "No data yet.", "No, because red; instead wait.", "You're right.", "No recent findings.",
         "See Issue #4", "see [source:docs/a.md]", "see [source:docs/ghost.md]", "https://x.org/ok",
         "https://x.org/dead", "run #1234567", "The report hasn't been generated yet.", "see [source:latest/a.md]",
         "No data: [source:ext/a.md]"]
KINDS = ["dm", "refusal", "ack", "finding", "commit", "resolution"]

event_st = st.builds(
    lambda i, minutes, agent, kind, thread, text, prompt: ev(
        f"e{i}", T0 - timedelta(minutes=minutes), agent=agent, kind=kind, thread=thread, text=text, prompt=prompt,
        path=f"heartbeats/{agent}.jsonl", line=i + 1,
    ),
    st.integers(0, 10**6),
    st.integers(-10, 60 * 24 * 8),
    st.sampled_from(["ada", "bo"]),
    st.sampled_from(KINDS),
    st.sampled_from([None, "t1", "t2"]),
    st.sampled_from(TEXTS),
    st.sampled_from([None, "where?", "WHERE? "]),
)
events_st = st.lists(event_st, max_size=40, unique_by=lambda e: e.id)
FILES = (file("docs/a.md", T0 - timedelta(days=20)),)
#: Paths through symlinks name their target's entry (spec 1, v2.3); ext leaves the root.
LINKS = {"latest": "docs", "ext": None}
CHECKS = (check("https://x.org/ok", "url", T0 - timedelta(days=1), True),
          check("https://x.org/dead", "url", T0 - timedelta(days=1), False),
          check("run:1234567", "run", T0 - timedelta(days=1), True))


def _records(events: list[Event], downs: list[int]) -> Records:
    labels = [label(events[i % len(events)].id, events[i % len(events)].ts + timedelta(minutes=1), line=n)
              for n, i in enumerate(downs)] if events else []
    return Records(events, labels, {f.path: f for f in FILES}, list(CHECKS), LINKS)


@settings(max_examples=60, deadline=None)
@given(events_st, st.lists(st.integers(0, 100), max_size=5), st.sampled_from(["24h", "7d", "30d"]))
def test_scores_and_ratios_stay_in_unit_interval(events: list[Event], downs: list[int], window: str) -> None:
    result = evaluate(_records(events, downs), T0, window, CFG)
    for a in result.agents.values():
        for c in a.components.values():
            assert c.ratio is None or 0.0 <= c.ratio <= 1.0
            assert 0 <= c.passed <= c.counted
        assert 0.0 <= a.coverage <= 1.0 + 1e-12
        if a.score is not None:
            assert 0.0 <= a.score <= 1.0
            assert a.interval is not None
            assert a.interval[0] - 1e-12 <= a.score <= a.interval[1] + 1e-12


def _good(component: str, n: int) -> Event:
    """A decision in a fresh thread that is ✓ on ``component`` and cannot turn another decision's ✓ into ✗."""
    ts = T0 - timedelta(minutes=30)
    if component == "citation_rate":
        return ev(f"g{n}", ts, agent="ada", thread=f"fresh{n}", text="https://x.org/ok", line=10**7 + n)
    if component == "refusal_correctness":
        return ev(f"g{n}", ts, agent="ada", kind="refusal", thread=f"fresh{n}", line=10**7 + n,
                  text="No, because of the freeze; instead ship Monday. Issue #9")
    return ev(f"g{n}", ts, agent="ada", thread=f"fresh{n}", text="run #1234567", line=10**7 + n)


@settings(max_examples=60, deadline=None)
@given(events_st, st.sampled_from(["citation_rate", "refusal_correctness", "source_verifiability"]))
def test_adding_a_passing_decision_never_lowers_its_component(events: list[Event], component: str) -> None:
    before = evaluate(_records(events, []), T0, "24h", CFG).agents.get("ada")
    after = evaluate(_records([*events, _good(component, 1)], []), T0, "24h", CFG).agents["ada"]
    old = before.components[component].ratio if before else None
    new = after.components[component].ratio
    assert new is not None
    assert old is None or new >= old - 1e-12


@settings(max_examples=60, deadline=None)
@given(events_st, st.lists(st.integers(0, 100), max_size=5), st.randoms(use_true_random=False))
def test_permuting_input_order_changes_nothing(events: list[Event], downs: list[int], rnd: random.Random) -> None:
    recs = _records(events, downs)
    shuffled_events = list(recs.events)
    shuffled_labels = list(recs.labels)
    rnd.shuffle(shuffled_events)
    rnd.shuffle(shuffled_labels)
    shuffled = Records(shuffled_events, shuffled_labels, recs.files, list(reversed(recs.checks)), recs.links)
    for window in ("24h", "7d"):
        assert to_json(evaluate(recs, T0, window, CFG)) == to_json(evaluate(shuffled, T0, window, CFG))


def _jsonl(e: Event) -> str:
    obj = {"id": e.id, "ts": e.ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "agent": e.agent, "kind": e.kind, "text": e.text}
    if e.thread is not None:
        obj["thread"] = e.thread
    if e.prompt is not None:
        obj["prompt"] = e.prompt
    return json.dumps(obj)


@settings(max_examples=15, deadline=None)
@given(events_st)
def test_reingesting_changes_nothing(events: list[Event]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "state"
        (root / "heartbeats").mkdir(parents=True)
        for agent in ("ada", "bo"):
            lines = [_jsonl(e) for e in sorted(events, key=lambda e: e.line or 0) if e.agent == agent]
            (root / "heartbeats" / f"{agent}.jsonl").write_text("".join(x + "\n" for x in lines))
        (root / "docs").mkdir()
        (root / "docs" / "a.md").write_text("---\nts: 2026-05-01T00:00:00Z\n---\nA\n")
        (root / "latest").symlink_to("docs")  # latest/a.md names docs/a.md (spec 1, v2.3)
        with Store.open(Path(tmp) / "db.sqlite") as store:
            ingester = Ingester(store, root, CFG)
            ingester.scan()
            first = to_json(evaluate(store.load_records(), T0, "7d", CFG))
            again = ingester.scan()
            assert sum(again.records.values()) == 0
            second = to_json(evaluate(store.load_records(), T0, "7d", CFG))
            store_links = store.links()
        assert first == second
        assert store_links == {"latest": "docs"}
        assert set(first["agents"]) <= {"ada", "bo"}
        for a in first["agents"].values():
            assert set(a["components"]) == set(COMPONENTS)


_EDGE_US = 2**32 * 1_000_000  # where from_us_many's float path ends


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.integers(-_EDGE_US + 1, _EDGE_US - 1),  # the float path
    st.sampled_from([_EDGE_US - 1, -_EDGE_US + 1, _EDGE_US - 500_001, _EDGE_US - 499_999, 0, -1, 499_999, 500_001]),
    st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999),  # any time a record can hold (years 1-9999)
), max_size=40))
def test_times_from_microseconds_in_bulk_are_exact(us: list[int]) -> None:
    """The batch conversion the model cache loads through, and the one by one, equal the exact one, on either side of
    their float paths."""
    exact = [exact_from_us(u) for u in us]
    assert from_us_many(us) == exact and [from_us(u) for u in us] == exact
    assert all(t.tzinfo is UTC for t in [*from_us_many(us), *map(from_us, us)])
