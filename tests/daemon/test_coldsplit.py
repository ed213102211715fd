"""daemon/coldsplit.py: a rebuild's outcomes worked out in a forked child keep what one pass in the daemon keeps."""

from __future__ import annotations

import functools
import logging
import os
import time
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.records import Event
from collectors.rfc3339 import to_us
from daemon import coldsplit
from daemon.config import Config, GitHub
from daemon.modelkeeper import LiveFeed
from scorers.live import LiveModel
from scorers.live.agents import NONE
from scorers.live.base import NEVER
from scorers.live.sums import Outcomes, Packed
from scorers.score import to_json
from tests.helpers import T0, ev, label

CFG = Config(github=GitHub(repo="acme/app"))

times = st.none() | st.integers(0, 10**6).map(lambda m: T0 + timedelta(microseconds=m))
anchors = st.none() | st.tuples(times, st.tuples(*(st.integers(0, 3),) * 4))


filings = st.lists(st.tuples(st.integers(0, 5), st.tuples(st.lists(st.text(max_size=3), max_size=2).map(tuple),
                                                             st.booleans(),
                                                             st.lists(st.integers(0, 1), max_size=2).map(tuple))),
                   max_size=3)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2).flatmap(lambda width: st.lists(st.tuples(st.lists(st.tuples(
    st.tuples(*(st.integers(0, 2),) * 4), st.just(NEVER) | times.filter(lambda t: t is not None),
    st.tuples(*(anchors,) * width)), max_size=6), filings), max_size=4)))
def test_the_columns_give_back_the_outcomes_written(worked: list[tuple[list[Outcomes], Any]]) -> None:
    names = [f"agent-{i}" for i in range(len(worked))]
    decoded = coldsplit.decode(coldsplit.encode(names, worked))  # type: ignore[arg-type]
    assert list(decoded) == names
    assert [(list(decoded[n][0]), list(decoded[n][1])) for n in names] == worked
    assert [[decoded[n][0][k] for k in range(len(decoded[n][0]))] for n in names] == [o for o, _ in worked]
    for name, (outcomes, _) in zip(names, worked, strict=True):  # read as columns, as the model keeps them
        packed = decoded[name][0]
        assert isinstance(packed, Packed)
        table, positions = packed.counts()
        assert [table[k] for k in positions] == [counts for counts, _, _ in outcomes]
        assert list(packed.expiries()) == [(k, to_us(until)) for k, (_, until, _) in enumerate(outcomes)
                                           if until != NEVER]
        assert list(packed.anchors()) == [(k, j, NONE if t is None else to_us(t), added)
                                          for k, (_, _, held) in enumerate(outcomes)
                                          for j, anchor in enumerate(held) if anchor is not None
                                          for t, added in [anchor]]


def _events() -> list[Event]:
    """Three agents' decisions: prompts answered again (outcomes reaching back), citations, a refusal waiting for
    its follow-up (pending: an expiry), labels."""
    out: list[Event] = []
    for a, agent in enumerate(["ada", "bo", "cy"]):
        for i in range(40):
            ts = T0 - timedelta(hours=3 * i + a)
            kind = "refusal" if i % 7 == 0 else "dm"
            text = f"Done, because tests pass. See https://example.com/{i % 3}" if i % 2 else "ok"
            if i % 5 == 1:  # filed by path (and by signal: a gap claim naming none)
                text += " See [source:docs/a.md]." if i % 10 == 1 else " No recent findings."
            out.append(ev(f"{agent}-{i}", ts, agent=agent, kind=kind, prompt=f"merge PR {i % 5}?", text=text,
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
    def contributions(an: Any) -> list[Any]:
        return [model._contributions[c] for c in an.contributions]

    return {"agents": {n: ([model._counts[c] for c in a.counts],
                           [(an.held, an.needs, contributions(an)) for an in a.anchored],
                           [[model._table.order(s) for s in waiting] for waiting in a.awaiting])
                       for n, a in model._agents.items()},
            "expiry": sorted((until, model._table.order(s)) for until, _, s in model._expiry),
            "by_path": {k: sorted(model._table.order(s) for s in b) for k, b in model._by_path.items()},
            "signals": sorted(model._table.order(s) for s in model._signal_claims),
            "evaluated": model.evaluated}


def test_a_forked_child_works_out_half_the_outcomes_and_the_model_keeps_what_one_pass_keeps() -> None:
    one_pass = _model()
    expected = {n: to_json(w) for n, w in one_pass.evaluate(T0).items()}
    split = functools.partial(coldsplit.forked, split_from=0, cores=lambda: 2)
    apart = _model()
    assert {n: to_json(w) for n, w in apart.evaluate(T0, split=split).items()} == expected
    assert _state(apart) == _state(one_pass)
    assert one_pass._expiry  # the columns carried expiries and anchors both, and the filings follow-up waits
    assert any(an.decisions for a in one_pass._agents.values() for an in a.anchored)
    assert any(w for a in one_pass._agents.values() for w in a.awaiting)


def _all_sent(child: coldsplit.Child | None) -> list[Any]:
    """Everything the child sends, up to its end (it is not stopped)."""
    assert child is not None
    got: list[Any] = []
    deadline = time.monotonic() + 60
    while not child.ended:
        assert time.monotonic() < deadline, "the child did not end"
        got += child.poll(timeout=1.0)
    return got


def test_the_child_is_another_process_sending_every_agent_in_order_until_stopped() -> None:
    """Agents larger than the pipe's buffer come through whole (read in parts), in the order given."""
    parent = os.getpid()

    def work(names: Any) -> list[Any]:
        (name,) = names
        return [([((os.getpid(), k), NEVER, ()) for k in range(300_000 if name == "b" else 3)], [(1, (("p",), True))])]

    child = coldsplit.forked(["a", "b", "c"], [3, 300_000, 3], work, split_from=0, cores=lambda: 2)
    worked = _all_sent(child)
    assert all(list(f) == [(1, (("p",), True))] for _, f in worked)
    got = [o for o, _ in worked]
    assert [len(o) for o in got] == [3, 300_000, 3]
    assert {c[0] for outcomes in got for c, _, _ in outcomes} - {parent} == {c[0] for c, _, _ in got[0]}
    assert [c[1] for c, _, _ in got[1]] == list(range(300_000))
    assert child is not None and child.poll() == []


def test_a_child_stopped_half_way_is_reaped_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    def work(names: Any) -> list[Any]:
        if names == ["b"]:
            time.sleep(60)  # the child's own work, stopped by close()
        return [([((1,), NEVER, ())], [])]

    child = coldsplit.forked(["a", "b"], [1, 1], work, split_from=0, cores=lambda: 2)
    assert child is not None
    with caplog.at_level(logging.WARNING, logger="honestyd"):
        while not (first := child.poll(timeout=1.0)):
            pass
        child.close()
    assert [list(o) for o, _ in first] == [[((1,), NEVER, ())]] and child.ended and child.poll() == []
    assert "second core" not in caplog.text
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)


class _Patient:
    """A child the model must wait for, ``ahead`` agents at a time: its outcomes are kept for certain."""

    def __init__(self, child: coldsplit.Child | None, ahead: int) -> None:
        assert child is not None
        self.child, self.ahead, self.given = child, ahead, 0

    def poll(self, timeout: float = 0.0) -> list[Any]:
        got: list[Any] = []
        while len(got) < self.ahead and not self.child.ended:
            got += self.child.poll(timeout=1.0)
        self.given += len(got)
        return got

    def close(self) -> None:
        self.child.close()


@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_the_model_keeps_the_child_s_agents_until_the_two_meet(ahead: int) -> None:
    """The child's first agents and the model's last ones, each kept once, whichever side reaches the middle."""
    one_pass = _model()
    expected = {n: to_json(w) for n, w in one_pass.evaluate(T0).items()}
    patient: list[_Patient] = []

    def split(names: list[str], sizes: list[int], work: Any) -> _Patient:
        patient.append(_Patient(coldsplit.forked(names, sizes, work, split_from=0, cores=lambda: 2), ahead))
        return patient[0]

    apart = _model()
    assert {n: to_json(w) for n, w in apart.evaluate(T0, split=split).items()} == expected
    assert _state(apart) == _state(one_pass)
    assert patient[0].given >= 1 and patient[0].child.ended


def test_a_child_that_fails_leaves_its_agents_to_the_model(caplog: pytest.LogCaptureFixture) -> None:
    def work(names: Any) -> list[Any]:
        raise RuntimeError("no")

    one_pass = _model()
    expected = {n: to_json(w) for n, w in one_pass.evaluate(T0).items()}
    apart = _model()
    with caplog.at_level(logging.WARNING, logger="honestyd"):
        assert _all_sent(coldsplit.forked(["ada", "bo", "cy"], [41, 41, 41], work, split_from=0,
                                          cores=lambda: 2)) == []
    assert "second core failed (exit status 1)" in caplog.text

    def broken(names: list[str], sizes: list[int], _: Any) -> Any:
        return _Patient(coldsplit.forked(names, sizes, work, split_from=0, cores=lambda: 2), 1)

    assert {n: to_json(w) for n, w in apart.evaluate(T0, split=broken).items()} == expected
    assert _state(apart) == _state(one_pass)


def test_nothing_is_forked_on_one_core_or_for_a_small_rebuild() -> None:
    def work(names: Any) -> list[Any]:
        raise AssertionError("not to be called")

    assert coldsplit.forked(["a", "b"], [10, 10], work, split_from=0, cores=lambda: 1) is None
    assert coldsplit.forked(["a", "b"], [10, 10], work, split_from=21, cores=lambda: 2) is None


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


def test_a_rule_failing_in_the_parent_stops_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error is raised, and the child is stopped and reaped first (no process left writing into a pipe no one
    reads)."""
    model = _model()
    children: list[coldsplit.Child] = []

    def watched(names: list[str], sizes: list[int], work: Any) -> Any:
        child = coldsplit.forked(names, sizes, work, split_from=0, cores=lambda: 2)
        assert child is not None
        children.append(child)
        return child

    calls = 0
    outcomes = model._outcomes

    def failing(s: int, a: Any, i: int, e: Any = None) -> Any:
        nonlocal calls
        calls += 1
        if calls > 5:  # the child's copy may fail too (it exits 1): what matters is that the parent reaps it
            raise RuntimeError("a rule failed")
        return outcomes(s, a, i, e)

    monkeypatch.setattr(model, "_outcomes", failing)
    with pytest.raises(RuntimeError, match="a rule failed"):
        model.evaluate(T0, split=watched)
    assert len(children) == 1 and children[0].ended
    with pytest.raises(ChildProcessError):
        os.waitpid(children[0].pid, os.WNOHANG)


def test_a_process_that_cannot_ask_its_cores_runs_on_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A seccomp filter that refuses sched_getaffinity (EPERM) must not fail the first evaluation."""
    assert coldsplit.cores() >= 1

    def refused(pid: int) -> set[int]:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_getaffinity", refused)
    assert coldsplit.cores() == 1
