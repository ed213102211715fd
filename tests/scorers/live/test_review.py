"""scorers/live/review.py: what the reviewer's pages ask of the live model agrees with the pure evaluation.

The same random programs as tests/scorers/live/test_model.py (records arriving in any order, labels, records let go and
recalled, the clock stepping back); after every evaluation, per window, the count of unlabelled failing decisions
per agent equals the count over the pure evaluation's audit rows, and the label tally equals the pure tally of the
current labels on the decisions the model holds.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings

from collectors.records import Label
from scorers.context import Context
from scorers.live import LiveModel
from scorers.lookups import current_labels
from scorers.progress import LabelTally, tally
from scorers.score import evaluate_window
from tests.helpers import T0, ev
from tests.scorers.live.test_model import CFG, EVICTION_OPS, EVICTION_STEPS, _at, _small_blocks, run_steps, steps

__all__ = ["_small_blocks"]  # the autouse fixture of test_live, so the same blocks and eviction apply here


def check_review(model: LiveModel, ctx: Context) -> None:
    for name, width in ctx.config.scoring.windows:
        pure = evaluate_window(ctx, name)
        want = {agent: sum(1 for r in a.rows if r.decision.id not in ctx.labels
                           and any(o.counted > o.passed for o in r.outcomes.values()))
                for agent, a in pure.agents.items()}
        got = model.unlabelled_failures(width)
        assert {a: n for a, n in got.items() if n} == {a: n for a, n in want.items() if n}, name
    t = model._table
    held = {t.id(w) for w in model._winner.values() if t.is_decision(w)}
    assert model.label_tally() == tally((d.agent, ctx.labels[d.id]) for d in ctx.decisions
                                        if d.id in ctx.labels and d.id in held)
    for d in ctx.decisions:
        if d.id in held:
            assert current_labels(model.visible_labels(d.id)) == ctx.labels.get(d.id, [])


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps())
def test_review_answers_equal_the_pure_evaluation(program: list[tuple[Any, ...]]) -> None:
    run_steps(program, check=check_review)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(steps(EVICTION_OPS, EVICTION_STEPS, tied=1))
def test_review_answers_hold_while_records_are_let_go(program: list[tuple[Any, ...]]) -> None:
    run_steps(program, check=check_review)


def test_the_label_tally_follows_labels_and_the_records_they_name() -> None:
    """The tally is kept between evaluations: it changes when a label comes, when the record a label names arrives
    after it, and when that record goes (a brief deleted)."""
    model = LiveModel(CFG)
    model.add_events([ev("a", _at(-50), agent="ada", line=1)])
    model.evaluate(T0)
    assert model.label_tally() == {}
    model.add_labels([Label(_at(-40), "a", "up", "rev1", "labels/r.jsonl", 1),
                      Label(_at(-40), "briefs/b.md", "down", "rev1", "labels/r.jsonl", 2)])
    model.evaluate(_at(1))
    assert model.label_tally() == {"ada": LabelTally(1, 1, 0)}
    model.add_events([ev("briefs/b.md", _at(-45), agent="bo", kind="brief", path="briefs/b.md", markdown=True)])
    model.evaluate(_at(2))  # the label on b waited for its record
    assert model.label_tally() == {"ada": LabelTally(1, 1, 0), "bo": LabelTally(1, 0, 1)}
    model.replace_document("briefs/b.md", [])
    model.evaluate(_at(3))
    assert model.label_tally() == {"ada": LabelTally(1, 1, 0)}
