"""A new component is one module and an entry in RULES: the live model and the pure evaluation know no rule by name.

Two components that are not in the spec (tests/toy_answered_rate.py: later decisions in a thread, pending until a
window closes; tests/toy_kind_repeat.py: a second window-dependent rule beside consistency_under_repeat) are handed,
beside the six, to the live model and to the pure evaluation; over the random programs of
tests/scorers/live/test_model.py (arrivals in any order, late records, labels, checks, files, links, restarts through
the model cache, records let go and recalled, the clock stepping back) both must give the same ``score --json``
objects and audit rows, and the model's indexes must hold what they would hold if built afresh (run_steps in
tests/scorers/live/test_model.py checks all of it).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings

from daemon.config import Config, GitHub
from scorers.rules import RULES
from tests import toy_answered_rate, toy_kind_repeat
from tests.helpers import ev
from tests.scorers.live.test_model import (
    DAY_M,
    EVICTION_STEPS,
    _at,
    _small_blocks,  # noqa: F401  (its autouse fixture: small blocks, records let go early)
    run_steps,
    steps,
)

TOY_RULES = {**RULES, toy_answered_rate.NAME: toy_answered_rate.RULE, toy_kind_repeat.NAME: toy_kind_repeat.RULE}
#: Weights for the eight components: the new ones count towards the score too.
CFG = replace(Config(github=GitHub(repo="acme/app")), weights_active="toy",
              weights_versions={"toy": (0.3, 0.2, 0.15, 0.1, 0.05, 0.05, 0.1, 0.05)})
#: tests/scorers/live/test_model.py's operations but a reload (its variants weigh six components).
OPS = ["events", "events", "events", "labels", "checks", "file", "times", "doc", "eval", "eval", "restart", "links"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps(OPS))
def test_rules_added_to_the_six_score_alike_live_and_pure(program: list[tuple[Any, ...]]) -> None:
    assert len(run_steps(program, CFG, TOY_RULES)) == sum(1 for s in program if s[0] == "eval")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps(OPS, EVICTION_STEPS, tied=1))
def test_rules_added_to_the_six_score_alike_as_records_are_let_go(program: list[tuple[Any, ...]]) -> None:
    assert len(run_steps(program, CFG, TOY_RULES)) == sum(1 for s in program if s[0] == "eval")


def _counts(agents: dict[str, Any], name: str) -> tuple[int, int, int]:
    c = agents["ada"]["components"][name]
    return c["pass"], c["counted"], c["pending"]


def test_a_late_answer_and_a_repeat_leaving_the_window_change_the_new_components() -> None:
    """The model follows what the new rules declared: a late answer in the thread turns ✗ into ✓, the window
    closing decides a pending dm, and a repeat counts only while its previous answer is in the (7d) window."""
    dm = ev("q", _at(0), kind="dm", thread="t1", line=1, path="heartbeats/h.jsonl")
    first = ev("p1", _at(-7 * DAY_M + 60), kind="ack", prompt="where?", line=2, path="heartbeats/h.jsonl")
    again = ev("p2", _at(-30), kind="ack", prompt="where?", line=3, path="heartbeats/h.jsonl")
    answer = ev("a", _at(2), kind="ack", thread="t1", line=4, path="heartbeats/h.jsonl")
    outputs = run_steps([("events", [dm, first, again]), ("eval", 1), ("eval", 10), ("events", [answer]),
                         ("eval", 11), ("eval", 120)], CFG, TOY_RULES)
    assert [_counts(o, toy_answered_rate.NAME) for o in outputs] == [(0, 0, 1), (0, 1, 0), (1, 1, 0), (1, 1, 0)]
    assert [_counts(o, toy_kind_repeat.NAME) for o in outputs] == [(1, 1, 0)] * 3 + [(0, 0, 0)]
