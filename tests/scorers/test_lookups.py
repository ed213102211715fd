"""The lookups both evaluation paths answer the rules with (scorers/lookups.py), against their plain readings."""

from __future__ import annotations

import bisect
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from hypothesis import given
from hypothesis import strategies as st

from collectors.records import CheckResult, Order
from scorers.lookups import CurrentChecks, current_check, previous_in, sort_key

T0 = datetime(2026, 5, 1, tzinfo=UTC)


class Rec(NamedTuple):
    ts: datetime
    order: Order


# Few distinct times and read orders: many records share a time, the case the fast path searches within.
_recs = st.builds(lambda s, line: Rec(T0 + timedelta(seconds=s), ("a.jsonl", 0, line)),
                  st.integers(0, 3), st.integers(0, 5))


@given(st.lists(_recs, max_size=12), _recs, st.booleans())
def test_previous_in_is_the_last_record_before(group: list[Rec], d: Rec, member: bool) -> None:
    group = sorted(set([*group, d] if member else group), key=sort_key)
    i = bisect.bisect_left(group, sort_key(d), key=sort_key)  # the plain reading: by (ts, order) throughout
    assert previous_in(group, d) == (group[i - 1] if i else None)


def test_previous_in_reads_the_order_among_records_of_one_time() -> None:
    a, b, c = (Rec(T0, ("a.jsonl", 0, line)) for line in (1, 2, 3))
    early = Rec(T0 - timedelta(seconds=1), ("a.jsonl", 0, 9))
    assert previous_in([early, a, b, c], c) == b
    assert previous_in([early, a, b, c], a) == early
    assert previous_in([a, b, c], a) is None


def test_current_check_ages_out_at_max_age() -> None:
    check = CheckResult("https://x", "url", T0, True)
    latest = {("url", "https://x"): check}
    age = timedelta(hours=1)
    assert current_check(latest, ("url", "https://x"), T0 + age - timedelta(microseconds=1), age) == check
    assert current_check(latest, ("url", "https://x"), T0 + age, age) is None
    assert current_check(latest, ("url", "https://y"), T0, age) is None
    assert CurrentChecks(latest, T0 + age, age).get(("url", "https://x")) is None
