"""Review event lines (collectors/reviews.py): each kind parsed, every malformed line refused with its reason."""

from __future__ import annotations

import json

import pytest

from collectors.records import Reject
from collectors.reviews import (
    PACK_FROM,
    Listed,
    ReviewEvent,
    event_id,
    listed,
    packed,
    parse_review_event,
    valid_review_id,
)

TS = "2026-05-03T14:02:11Z"
GOOD = {
    "opened": {"agent": "zoe", "reason": "below", "why": "below the 70 % threshold since 2026-05-03"},
    "reopened": {"agent": "zoe", "reason": "drop"},
    "labelled": {"decision": "zoe-12", "value": "down", "reviewer": "andrew"},
    "closed": {"reviewer": "andrew", "note": "fixed in PR #12"},
    "alert": {"status": "firing", "alertname": "HonestyScoreLow", "fingerprint": "abc"},
}


def line(kind: str, **fields: object) -> bytes:
    return json.dumps({"ts": TS, "review": "r-20260503-3f9a1c0b", "event": kind, **GOOD.get(kind, {}),
                       **fields}).encode()


@pytest.mark.parametrize("event", sorted(GOOD))
def test_every_kind_parses_with_its_fields_and_an_id_from_its_bytes(event: str) -> None:
    raw = line(event)
    parsed = parse_review_event(raw, "reviews/honestyd.jsonl", 7, 2)
    assert isinstance(parsed, ReviewEvent)
    assert (parsed.event, parsed.review, parsed.path, parsed.line, parsed.generation) == (
        event, "r-20260503-3f9a1c0b", "reviews/honestyd.jsonl", 7, 2)
    assert parsed.id == event_id(raw) and len(parsed.id) == 16
    assert parsed.ts.isoformat() == "2026-05-03T14:02:11+00:00"
    assert all(parsed.data[k] == v for k, v in GOOD[event].items())
    assert parse_review_event(line(event, id="given"), "r", 1).id == "given"  # type: ignore[union-attr]


@pytest.mark.parametrize(("raw", "reason"), [
    (b"not json", "not_json"),
    (b"[1, 2]", "not_object"),
    (b"\xff\xfe", "not_utf8"),
    (line("opened", ts=None), "missing_ts"),
    (line("opened", ts="yesterday"), "bad_ts"),
    (line("opened", review=""), "missing_review"),
    (line("opened", review="../../etc"), "bad_review"),
    (line("opened", review="a--b"), "bad_review"),
    (line("opened", event=""), "missing_event"),
    (line("deleted"), "bad_event"),
    (line("opened", agent=""), "missing_agent"),
    (line("opened", reason="sad"), "bad_reason"),
    (line("labelled", value="meh"), "bad_value"),
    (line("labelled", decision=3), "missing_decision"),
    (line("closed", reviewer=None), "missing_reviewer"),
    (line("closed", note=["x"]), "bad_note"),
    (line("alert", status="pending"), "bad_status"),
    (line("alert", alertname=""), "missing_alertname"),
])
def test_a_malformed_line_is_refused_with_its_reason(raw: bytes, reason: str) -> None:
    parsed = parse_review_event(raw, "reviews/x.jsonl", 3)
    assert isinstance(parsed, Reject) and (parsed.path, parsed.line, parsed.reason) == ("reviews/x.jsonl", 3, reason)


def test_review_ids_are_safe_in_paths_keys_and_shells() -> None:
    assert valid_review_id("r-20260503-3f9a1c0b") and valid_review_id("manual.1")
    for bad in ("", "-x", "a/b", "a b", "a--b", "x" * 81, "é", None, 3):
        assert not valid_review_id(bad), bad


def _entries(n: int) -> list[object]:
    rows: list[object] = [{"id": f"zoe-{k}", "ts": TS, "kind": "dm", "components": ["citation_rate"],
                           "source": f"heartbeats/zoe.jsonl:{k}"} for k in range(n)]
    return [*rows, "not an object", {"id": 7}]  # a hand-written line may list anything: kept, and no id of its own


def test_packed_holds_a_long_failed_list_as_text_equal_to_the_list() -> None:
    entries = _entries(40)
    data = packed({"agent": "zoe", "failed": json.loads(json.dumps(entries)), "why": ["a"] * 40})
    failed = data["failed"]
    assert isinstance(failed, Listed)
    assert failed == entries and entries == failed and len(failed) == 42
    assert list(failed) == entries and failed[3] == entries[3] and failed[-1] == {"id": 7}
    assert failed.ids == tuple(f"zoe-{k}" for k in range(40))
    assert json.loads(failed.text) == entries and ", " not in failed.text  # compact
    assert data["why"] == ["a"] * 40 and type(data["why"]) is list  # only the failing decisions are packed
    assert listed(failed) == entries and listed(entries) == entries and listed("text") == [] and listed(None) == []
    assert failed != entries[:-1] and failed != "text"


def test_packed_leaves_a_short_failed_list_as_it_is() -> None:
    short = _entries(PACK_FROM - 2)
    data = packed({"failed": list(short)})
    assert type(data["failed"]) is list and data["failed"] == short
