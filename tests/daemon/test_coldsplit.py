"""daemon/coldsplit.py: a rebuild's outcomes worked out in a forked child keep what one pass in the daemon keeps."""

from __future__ import annotations

import functools
import logging
import os
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.records import Event
from daemon import coldsplit
from daemon.config import Config, GitHub
from daemon.modelkeeper import LiveFeed
from scorers.live import LiveModel
from scorers.live.base import NEVER
from scorers.live.sums import Outcomes
from scorers.score import to_json
from tests.helpers import T0, ev, label

CFG = Config(github=GitHub(repo="acme/app"))

times = st.none() | st.integers(0, 10**6).map(lambda m: T0 + timedelta(microseconds=m))
anchors = st.none() | st.tuples(times, st.tuples(*(st.integers(0, 3),) * 4))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2).flatmap(lambda width: st.lists(st.lists(st.tuples(
    st.tuples(*(st.integers(0, 2),) * 4), st.just(NEVER) | times.filter(lambda t: t is not None),
    st.tuples(*(anchors,) * width)), max_size=6), max_size=4)))
def test_the_columns_give_back_the_outcomes_written(outcomes: list[list[Outcomes]]) -> None:
    names = [f"agent-{i}" for i in range(len(outcomes))]
    decoded = coldsplit.decode(coldsplit.encode(names, outcomes))
    assert list(decoded) == names
    assert [list(decoded[n]) for n in names] == outcomes
    assert [[decoded[n][k] for k in range(len(decoded[n]))] for n in names] == outcomes


def _events() -> list[Event]:
    """Three agents' decisions: prompts answered again (outcomes reaching back), citations, a refusal waiting for
    its follow-up (pending: an expiry), labels."""
    out: list[Event] = []
    for a, agent in enumerate(["ada", "bo", "cy"]):
        for i in range(40):
            ts = T0 - timedelta(hours=3 * i + a)
            kind = "refusal" if i % 7 == 0 else "dm"
            out.append(ev(f"{agent}-{i}", ts, agent=agent, kind=kind, prompt=f"merge PR {i % 5}?",
                          text=f"Done, because tests pass. See https://example.com/{i % 3}" if i % 2 else "ok",
                          path=f"heartbeats/{agent}.jsonl"))
        out.append(ev(f"{agent}-last", T0 - timedelta(minutes=1), agent=agent, kind="refusal", reason="tests fail",
                      alternatives=("re-run the suite",), path=f"heartbeats/{agent}.jsonl"))
    return out


EVENTS = _events()  # made once: their line numbers come from a counter
LABELS = [label("ada-3", T0 - timedelta(hours=1)), label("bo-4", T0 - timedelta(hours=2), value="up")]


def _model() -> LiveModel:
    model = LiveModel(CFG)
    model.add_events(EVENTS)
    model.add_labels(LABELS)
    return model


def _state(model: LiveModel) -> dict[str, Any]:
    return {"agents": {n: (a.counts, [(an.times, an.contributions) for an in a.anchored])
                       for n, a in model._agents.items()},
            "expiry": sorted((until, e.order) for until, _, e in model._expiry), "evaluated": model.evaluated}


def test_a_forked_child_works_out_half_the_outcomes_and_the_model_keeps_what_one_pass_keeps() -> None:
    one_pass = _model()
    expected = {n: to_json(w) for n, w in one_pass.evaluate(T0).items()}
    split = functools.partial(coldsplit.forked, split_from=0, cores=lambda: 2)
    apart = _model()
    assert {n: to_json(w) for n, w in apart.evaluate(T0, split=split).items()} == expected
    assert _state(apart) == _state(one_pass)
    assert one_pass._expiry  # the columns carried expiries and anchors both
    assert any(an.decisions for a in one_pass._agents.values() for an in a.anchored)


def test_the_child_is_another_process_given_about_half_the_decisions() -> None:
    parent = os.getpid()

    def work(names: Any) -> list[list[Outcomes]]:
        return [[((os.getpid(),), NEVER, ())] * 2 for _ in names]

    taken, collect = coldsplit.forked(["a", "b", "c", "d"], [10, 10, 10, 10], work, split_from=0, cores=lambda: 2)
    assert taken == {"a", "b"}
    done = collect()
    assert set(done) == {"a", "b"}
    (pid,), _, _ = done["a"][0]
    assert pid != parent


def test_a_child_that_fails_leaves_its_agents_to_the_model(caplog: pytest.LogCaptureFixture) -> None:
    def work(names: Any) -> list[list[Outcomes]]:
        raise RuntimeError("no")

    one_pass = _model()
    expected = {n: to_json(w) for n, w in one_pass.evaluate(T0).items()}
    apart = _model()
    with caplog.at_level(logging.WARNING, logger="honestyd"):
        taken, collect = coldsplit.forked(["ada", "bo", "cy"], [41, 41, 41], work, split_from=0, cores=lambda: 2)
        assert taken and collect() == {}
    assert "second core failed (exit status 1)" in caplog.text
    failing = functools.partial(coldsplit.forked, split_from=0, cores=lambda: 2)

    def broken(names: list[str], sizes: list[int], _: Any) -> Any:
        return failing(names, sizes, work)

    assert {n: to_json(w) for n, w in apart.evaluate(T0, split=broken).items()} == expected
    assert _state(apart) == _state(one_pass)


def test_nothing_is_forked_on_one_core_or_for_a_small_rebuild() -> None:
    def work(names: Any) -> list[list[Outcomes]]:
        raise AssertionError("not to be called")

    assert coldsplit.forked(["a", "b"], [10, 10], work, split_from=0, cores=lambda: 1) == (frozenset(), dict)
    assert coldsplit.forked(["a", "b"], [10, 10], work, split_from=21, cores=lambda: 2) == (frozenset(), dict)


def test_the_feed_s_first_evaluation_splits_its_rules() -> None:
    """LiveFeed.evaluate hands the model coldsplit.forked by default: a feed made to fork scores as one that does
    not."""
    plain, forking = LiveFeed(CFG), LiveFeed(CFG)
    for feed in (plain, forking):
        feed.model.add_events(EVENTS)
    expected = {n: to_json(w) for n, w in plain.evaluate(T0, split=None).items()}
    got = forking.evaluate(T0, split=functools.partial(coldsplit.forked, split_from=0, cores=lambda: 2))
    assert {n: to_json(w) for n, w in got.items()} == expected
    assert _state(forking.model) == _state(plain.model)


def test_a_rule_failing_in_the_parent_still_waits_for_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error is raised, and the child is reaped first (no process left writing into a pipe no one reads)."""
    model = _model()
    reaped: list[bool] = []
    split = functools.partial(coldsplit.forked, split_from=0, cores=lambda: 2)

    def watched(names: list[str], sizes: list[int], work: Any) -> Any:
        taken, collect = split(names, sizes, work)

        def collected() -> Any:
            done = collect()
            reaped.append(bool(done))
            return done

        return taken, collected

    calls = 0
    outcomes = model._outcomes

    def failing(e: Any, a: Any, i: int) -> Any:
        nonlocal calls
        calls += 1
        if calls > 5:  # the child's copy fails too (it exits 1): what matters is that the parent waits for it
            raise RuntimeError("a rule failed")
        return outcomes(e, a, i)

    monkeypatch.setattr(model, "_outcomes", failing)
    with pytest.raises(RuntimeError, match="a rule failed"):
        model.evaluate(T0, split=watched)
    assert len(reaped) == 1


def test_a_process_that_cannot_ask_its_cores_runs_on_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A seccomp filter that refuses sched_getaffinity (EPERM) must not fail the first evaluation."""
    assert coldsplit.cores() >= 1

    def refused(pid: int) -> set[int]:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_getaffinity", refused)
    assert coldsplit.cores() == 1
