"""A new component is one module and an entry in RULES: the live model and the pure evaluation know no rule by name.

Two components that are not in the spec (tests/toy_answered_rate.py: later decisions in a thread, pending until a
window closes; tests/toy_kind_repeat.py: a second window-dependent rule beside consistency_under_repeat) are handed,
beside the six, to the live model and to the pure evaluation; over the random programs of tests/test_live.py
(arrivals in any order, late records, labels, checks, files, links, restarts through the model cache, records let go
and recalled, the clock stepping back) both must give the same ``score --json`` objects and audit rows.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from daemon.config import Config, GitHub
from scorers.context import Context
from scorers.live import HistoryEvicted, LiveModel, eviction, sums
from scorers.rules import RULES
from scorers.score import evaluate_window, to_json
from tests import toy_answered_rate, toy_kind_repeat
from tests.helpers import ev
from tests.test_live import EVICTION_STEPS, _apply, _at, _Stored, _through_the_cache, steps

TOY_RULES = {**RULES, toy_answered_rate.NAME: toy_answered_rate.RULE, toy_kind_repeat.NAME: toy_kind_repeat.RULE}
#: Weights for the eight components: the toy ones count towards the score too.
CFG = replace(Config(github=GitHub(repo="acme/app")), weights_active="toy",
              weights_versions={"toy": (0.3, 0.2, 0.15, 0.1, 0.05, 0.05, 0.1, 0.05)})
OPS = ["events", "events", "events", "labels", "checks", "file", "times", "doc", "eval", "eval", "restart", "links"]


@pytest.fixture(autouse=True)
def _small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in tests/test_live.py: blocks of 3 decisions, records let go 10 minutes behind the longest window."""
    monkeypatch.setattr(sums, "BLOCK", 3)
    monkeypatch.setattr(eviction, "EVICT_SLACK", timedelta(minutes=10))
    monkeypatch.setattr(eviction, "EVICT_EVERY", timedelta(minutes=1))


def _rows(result: Any) -> list[tuple[str, list[tuple[str, str]]]]:
    return [(r.decision.id, [(r.outcomes[n].mark, r.outcomes[n].why) for n in TOY_RULES]) for r in result.rows]


def _model(stored: _Stored) -> LiveModel:
    model = LiveModel(CFG, evict=True, rules=TOY_RULES)
    model.add_events(stored.events)
    model.add_labels(stored.labels)
    model.add_checks(stored.checks)
    model.put_links(stored.links)
    for path, entry in stored.files.items():
        model.put_file(path, entry)
    return model


def run(program: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Apply ``program`` to a model with the toy rules and to a record list; compare after every evaluation."""
    model = LiveModel(CFG, evict=True, rules=TOY_RULES)
    stored = _Stored()
    outputs = []
    for step in program:
        if step[0] == "restart":
            model = _through_the_cache(model)
            continue
        if step[0] != "eval":
            _apply(model, stored, step)
            continue
        at = _at(step[1])
        try:
            live = model.evaluate(at)
        except HistoryEvicted:  # the clock went back past what was let go: built again from the store
            model = _model(stored)
            live = model.evaluate(at)
        ctx = Context(stored.records(), at, CFG)
        for name, _ in CFG.scoring.windows:
            pure = evaluate_window(ctx, name, rules=TOY_RULES)
            assert to_json(live[name]) == to_json(pure), (name, at)
            for agent, expected in pure.agents.items():
                audit = model.agent_result(agent, name)
                assert audit is not None and _rows(audit) == _rows(expected), (name, agent)
        outputs.append(to_json(live["24h"])["agents"])
    return outputs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps(OPS))
def test_rules_added_to_the_six_score_alike_live_and_pure(program: list[tuple[Any, ...]]) -> None:
    assert len(run(program)) == sum(1 for s in program if s[0] == "eval")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps(OPS, EVICTION_STEPS, tied=1))
def test_rules_added_to_the_six_score_alike_as_records_are_let_go(program: list[tuple[Any, ...]]) -> None:
    assert len(run(program)) == sum(1 for s in program if s[0] == "eval")


def _counts(agents: dict[str, Any], name: str) -> tuple[int, int, int]:
    c = agents["ada"]["components"][name]
    return c["pass"], c["counted"], c["pending"]


def test_a_late_answer_and_a_late_repeat_change_the_new_components() -> None:
    """The model follows what the toy rules declared: a late answer in the thread turns ✗ into ✓, the window
    closing decides a pending dm, and a repeat counts only while its previous answer is in the window."""
    dm = ev("q", _at(0), kind="dm", thread="t1", line=1, path="heartbeats/h.jsonl")
    first = ev("p1", _at(-60 * 23), kind="ack", prompt="where?", line=2, path="heartbeats/h.jsonl")
    again = ev("p2", _at(-30), kind="ack", prompt="where?", line=3, path="heartbeats/h.jsonl")
    answer = ev("a", _at(2), kind="ack", thread="t1", line=4, path="heartbeats/h.jsonl")
    outputs = run([("events", [dm, first, again]), ("eval", 1), ("eval", 10), ("events", [answer]), ("eval", 11),
                   ("eval", 60 * 2)])
    assert [_counts(o, toy_answered_rate.NAME) for o in outputs] == [(0, 0, 1), (0, 1, 0), (1, 1, 0), (1, 1, 0)]
    # p2 repeats p1 (same kind): counted while p1 is in the 24h window, which it leaves by T0 + 1 h + 1 min.
    assert [_counts(o, toy_kind_repeat.NAME) for o in outputs] == [(1, 1, 0)] * 3 + [(0, 0, 0)]
