"""The evidence an opening records (daemon/reviews/events.py): the failing decisions, newest first, within bounds
that keep the line far below the 1 MiB a line may hold; the event's line and its id as a reader gives them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from collectors.reviews import Listed, ReviewEvent, parse_review_event
from daemon.config import Config, GitHub
from daemon.reviews import events
from daemon.reviews.events import FAILED_BYTES, MAX_FAILED, encode, failed_rows, opening
from scorers.score import evaluate
from tests.helpers import T0, ev, records

CFG = Config(github=GitHub(repo="acme/app"))


def test_the_evidence_lists_the_newest_failures_within_its_bounds() -> None:
    many = [ev(f"zoe-{i}", T0 - timedelta(seconds=i), agent="zoe") for i in range(MAX_FAILED + 50)]
    audited = evaluate(records(*many), T0, "24h", CFG).agents["zoe"]
    listed, total = failed_rows(audited)
    assert total == MAX_FAILED + 50 and len(listed) == MAX_FAILED
    assert [f["id"] for f in listed[:3]] == ["zoe-0", "zoe-1", "zoe-2"]  # newest first
    long_ids = [ev("x" * 20_000 + str(i), T0 - timedelta(seconds=i), agent="ann") for i in range(40)]
    audited = evaluate(records(*long_ids), T0, "24h", CFG).agents["ann"]
    listed, total = failed_rows(audited)
    assert total == 40 and 0 < len(listed) < 40
    assert sum(len(f["id"]) for f in listed) <= FAILED_BYTES


def test_an_event_line_reads_back_as_the_same_event_with_the_same_id() -> None:
    why = "dropped from 90 % to 40 % in 24h"
    line, eid = encode(opening("r-1", T0, {"agent": "zoë", "reason": "drop", "why": why}))
    assert line.endswith(b"\n") and b"\n" not in line[:-1] and "zoë".encode() in line
    parsed = parse_review_event(line[:-1], "reviews/honestyd.jsonl", 1)
    assert isinstance(parsed, ReviewEvent) and parsed.id == eid and parsed.data["why"].startswith("dropped")
    assert events.review_id("zoe", "below", T0) != events.review_id("zoe", "drop", T0)
    assert events.review_id("zoe", "below", T0).startswith("r-20260601-")


def test_evidence_listed_as_text_encodes_as_the_list_would() -> None:
    """failed_rows gives a Listed (held as text until written): its line, and so its id, are the list's."""
    many = [ev(f"zoë-{i}", T0 - timedelta(seconds=i), agent="zoe") for i in range(30)]
    listed, _ = failed_rows(evaluate(records(*many), T0, "24h", CFG).agents["zoe"])
    assert isinstance(listed, Listed)
    as_list = list(listed)
    assert as_list[0]["id"] == "zoë-0" and len(as_list) == 30
    packed_line = encode(opening("r-1", T0, {"agent": "zoe", "reason": "below", "failed": listed}))
    assert packed_line == encode(opening("r-1", T0, {"agent": "zoe", "reason": "below", "failed": as_list}))
    with pytest.raises(TypeError, match="set is not JSON serializable"):
        encode({"failed": {1}})
