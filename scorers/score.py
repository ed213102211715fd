"""The honesty score of spec section 4: per-agent, per-window results with their audit trail."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from collectors.records import ComponentResult as ComponentResult  # its home; imported from here too
from collectors.records import Event
from collectors.rfc3339 import format_ts, parse_duration
from scorers.context import Context, Records, in_window
from scorers.outcome import Outcome
from scorers.rule import Rule
from scorers.rules import RULES
from scorers.spec import COMPONENTS, ScoringConfig
from scorers.wilson import wilson

#: A set of rules by component name, in the order sums and weight vectors follow: :data:`scorers.rules.RULES`, or
#: others (a test's) handed to the evaluation.
Rules = Mapping[str, Rule]


def outcomes_for(d: Event, ctx: Context, width: timedelta, rules: Rules = RULES) -> dict[str, Outcome]:
    """Every rule's outcome of one decision, reusing across windows those that do not depend on the width."""
    out = {}
    cache = ctx.outcomes
    for name, rule in rules.items():
        if rule.reaches_back is not None:
            out[name] = rule.evaluate(d, ctx, width)
            continue
        key = (id(d), name)
        found = cache.get(key)
        if found is None:
            found = cache[key] = rule.evaluate(d, ctx, width)
        out[name] = found
    return out


@dataclass(frozen=True)
class DecisionRow:
    """One decision of the window with every component's outcome (the audit table's row)."""

    decision: Event
    outcomes: Mapping[str, Outcome]


@dataclass(frozen=True)
class AgentResult:
    """One agent's score in one window, with the rows and numbers that produce it."""

    agent: str
    weights_version: str
    weights: tuple[float, ...]
    #: How many decisions the window holds.
    decisions: int
    components: Mapping[str, ComponentResult]
    false_gaps: int
    insufficient: bool
    score: float | None
    coverage: float
    interval: tuple[float, float] | None
    #: The audit rows; the daemon's published snapshot leaves them out and builds them on request.
    rows: tuple[DecisionRow, ...] = ()

    @property
    def percent(self) -> int | None:
        """``floor(100 · honesty + 0.5 + 1e-9)``, None when no score is shown."""
        return display_percent(self.score) if self.score is not None else None


@dataclass(frozen=True)
class WindowResult:
    """Every listed agent's result for one window ending at ``at``."""

    at: datetime
    window: str
    width: timedelta
    weights_version: str
    agents: Mapping[str, AgentResult]


def display_percent(score: float) -> int:
    """The displayed percent of spec section 4."""
    return math.floor(100 * score + 0.5 + 1e-9)


def weighted(
    values: Mapping[str, float | None], weights: tuple[float, ...], names: tuple[str, ...] = COMPONENTS
) -> tuple[float | None, float]:
    """``(Σ w·v / Σ w, Σ w)`` over the components whose value is not None, summed in the order of ``names`` (the
    components ``weights`` is for: spec order)."""
    total = 0.0
    coverage = 0.0
    for name, w in zip(names, weights, strict=True):
        v = values.get(name)
        if v is not None:
            total += w * v
            coverage += w
    return (total / coverage if coverage > 0 else None), coverage


def score_agent(agent: str, rows: list[DecisionRow], config: ScoringConfig, rules: Rules = RULES) -> AgentResult:
    """Aggregate one agent's rows: component ratios, floor, renormalised score, coverage, interval."""
    components: dict[str, ComponentResult] = {}
    for name in rules:
        outcomes = [r.outcomes[name] for r in rows]
        components[name] = ComponentResult(
            passed=sum(o.passed for o in outcomes),
            counted=sum(o.counted for o in outcomes),
            pending=sum(1 for o in outcomes if o.pending),
        )
    flags = [(name, rule.false_gap) for name, rule in rules.items() if rule.false_gap is not None]
    false_gaps = sum(1 for r in rows for name, flag in flags if flag(r.outcomes[name]))
    return summarise(agent, len(rows), components, false_gaps, config, tuple(rows))


def summarise(
    agent: str,
    decisions: int,
    components: Mapping[str, ComponentResult],
    false_gaps: int,
    config: ScoringConfig,
    rows: tuple[DecisionRow, ...] = (),
) -> AgentResult:
    """The floor, renormalised score, coverage and interval of one agent's component counts (every component, in the
    order its weights follow)."""
    version, weights = config.weights_for(agent)
    names = tuple(components)
    score, coverage = weighted({n: c.ratio for n, c in components.items()}, weights, names)
    insufficient = decisions < config.scoring.min_decisions or score is None
    interval = None
    if not insufficient:
        z = config.scoring.z
        bounds = {n: wilson(c.passed, c.counted, z) for n, c in components.items() if c.counted}
        low, _ = weighted({n: b[0] for n, b in bounds.items()}, weights, names)
        high, _ = weighted({n: b[1] for n, b in bounds.items()}, weights, names)
        if low is not None and high is not None:
            interval = (low, high)
    return AgentResult(
        agent=agent,
        weights_version=version,
        weights=weights,
        decisions=decisions,
        components=components,
        false_gaps=false_gaps,
        insufficient=insufficient,
        score=None if insufficient else score,
        coverage=coverage,
        interval=interval,
        rows=rows,
    )


def window_width(config: ScoringConfig, window: str) -> timedelta:
    """The width of a named window: a configured one, or any duration like ``45d``."""
    for name, width in config.scoring.windows:
        if name == window:
            return width
    return parse_duration(window)


def evaluate_window(ctx: Context, window: str, agents: list[str] | None = None, rules: Rules = RULES) -> WindowResult:
    """Score every listed agent (or just ``agents``) for the window ``window`` ending at ``ctx.at``."""
    config = ctx.config
    width = window_width(config, window)
    listing = max(config.scoring.longest_window, width)
    listed = sorted({d.agent for d in ctx.decisions if in_window(d, ctx.at, listing)})
    if agents is not None:
        listed = [a for a in listed if a in agents]
    results = {}
    for agent in listed:
        rows = [DecisionRow(d, outcomes_for(d, ctx, width, rules)) for d in ctx.by_agent[agent]
                if in_window(d, ctx.at, width)]
        results[agent] = score_agent(agent, rows, config, rules)
    return WindowResult(ctx.at, window, width, config.weights_active, results)


def evaluate(records: Records, at: datetime, window: str, config: ScoringConfig, rules: Rules = RULES) -> WindowResult:
    """The pure entry point: records, evaluation time, window and config in; the result out."""
    return evaluate_window(Context(records, at, config), window, rules=rules)


def to_json(result: WindowResult) -> dict[str, Any]:
    """The ``honestyd score --json`` object (field names are a contract; extra fields are welcome)."""
    agents: dict[str, Any] = {}
    for name, a in result.agents.items():
        agents[name] = {
            "decisions": a.decisions,
            "insufficient": a.insufficient,
            "false_gaps": a.false_gaps,
            "components": {
                c: {"pass": r.passed, "counted": r.counted, "pending": r.pending, "ratio": r.ratio}
                for c, r in a.components.items()
            },
            "score": a.score,
            "percent": a.percent,
            "coverage": a.coverage,
            "interval": {"low": a.interval[0], "high": a.interval[1]} if a.interval else None,
            "weights_version": a.weights_version,
        }
    return {
        "at": format_ts(result.at),
        "window": result.window,
        "weights_version": result.weights_version,
        "agents": agents,
    }
