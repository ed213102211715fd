"""Fitting weights to reviewer labels (methodology: "weight tuning").

Each labelled decision is one sample: its six component outcomes are the features
(✓ 1, ✗ 0, verifiability resolved/checked; N/A and pending are *missing*), and the reviewer's
label is the target (👍 1, 👎 0). Missing features are imputed with the mean of that component
over the samples where it applies, so a component that does not apply to a decision neither
pushes its prediction up nor down (the linear stand-in for the score's renormalisation).

The fit is constrained least squares: minimise ‖Xw − y‖² subject to w ≥ 0 and Σw = 1. With six
components it is solved exactly by trying every support set (63 of them): on each, the
equality-constrained problem is a small linear (KKT) system; the best feasible solution wins.

self_correction_rate is not fitted: it exists only for decisions that carry a 👎, so as a
feature it would leak the target. Its weight is carried over from the current version and the
other five share the rest (their fit targets ``(y − w_sc·m) / (1 − w_sc)``, m its imputed mean).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from collectors.rfc3339 import EPOCH
from scorers.context import Context
from scorers.outcome import NA, PENDING, Outcome
from scorers.spec import COMPONENTS

Vector = tuple[float, ...]


@dataclass(frozen=True)
class Sample:
    """One labelled decision: features (None where missing) and the label (1 up, 0 down)."""

    decision: str
    agent: str
    features: tuple[float | None, ...]
    label: int


def features_of(outcomes: Mapping[str, Outcome]) -> tuple[float | None, ...]:
    """The six features of one decision's outcomes, in spec order."""
    out: list[float | None] = []
    for name in COMPONENTS:
        o = outcomes[name]
        out.append(None if o.mark in (NA, PENDING) or o.counted == 0 else o.passed / o.counted)
    return tuple(out)


def samples_from(ctx: Context, agent: str | None = None) -> list[Sample]:
    """One sample per current reviewer label on a decision (of ``agent``), over all of history to ``ctx.at``."""
    from scorers.rules import RULES

    everything = ctx.at - EPOCH
    out: list[Sample] = []
    for d in ctx.decisions:
        if agent is not None and d.agent != agent:
            continue
        labels = ctx.labels.get(d.id, [])
        if not labels:
            continue
        feats = features_of({name: rule(d, ctx, everything) for name, rule in RULES.items()})
        out.extend(Sample(d.id, d.agent, feats, 1 if lb.value == "up" else 0) for lb in labels)
    return out


def impute(samples: Sequence[Sample]) -> tuple[list[Vector], Vector]:
    """Feature rows with missing values replaced by the component's mean where it applies (0.5 if never)."""
    means = []
    for j in range(len(COMPONENTS)):
        seen = [s.features[j] for s in samples if s.features[j] is not None]
        means.append(math.fsum(v for v in seen if v is not None) / len(seen) if seen else 0.5)
    rows = [tuple(means[j] if v is None else v for j, v in enumerate(s.features)) for s in samples]
    return rows, tuple(means)


FIXED = COMPONENTS.index("self_correction_rate")


def fit_with_fixed(rows: Sequence[Vector], y: Sequence[float], current: Vector) -> Vector:
    """Fit every component but self_correction_rate, whose current weight is kept (see module doc)."""
    w_fixed = current[FIXED]
    free = [j for j in range(len(COMPONENTS)) if j != FIXED]
    if w_fixed >= 1.0:
        return current
    sub_rows = [tuple(r[j] for j in free) for r in rows]
    target = [(t - w_fixed * r[FIXED]) / (1.0 - w_fixed) for r, t in zip(rows, y, strict=True)]
    v = fit(sub_rows, target)
    out = [0.0] * len(COMPONENTS)
    out[FIXED] = w_fixed
    for j, vj in zip(free, v, strict=True):
        out[j] = vj * (1.0 - w_fixed)
    return tuple(out)


def _solve(a: list[list[float]], b: list[float]) -> list[float] | None:
    """Gaussian elimination with partial pivoting; None when singular."""
    n = len(b)
    m = [[*row, b[i]] for i, row in enumerate(a)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) < 1e-12:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                for c in range(col, n + 1):
                    m[r][c] -= f * m[col][c]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit(rows: Sequence[Vector], y: Sequence[float]) -> Vector:
    """argmin ‖Xw − y‖² with w ≥ 0, Σw = 1, solved exactly over every support set."""
    k = len(rows[0])
    gram = [[math.fsum(r[i] * r[j] for r in rows) for j in range(k)] for i in range(k)]
    xty = [math.fsum(r[i] * t for r, t in zip(rows, y, strict=True)) for i in range(k)]
    best: tuple[float, Vector] | None = None
    for size in range(1, k + 1):
        for support in itertools.combinations(range(k), size):
            # KKT: [2G_SS 1; 1ᵀ 0] [w; λ] = [2Xᵀy_S; 1]
            a = [[2 * gram[i][j] for j in support] + [1.0] for i in support] + [[1.0] * size + [0.0]]
            sol = _solve(a, [2 * xty[i] for i in support] + [1.0])
            if sol is None or any(v < -1e-12 for v in sol[:size]):
                continue
            w = [0.0] * k
            for i, v in zip(support, sol[:size], strict=True):
                w[i] = max(v, 0.0)
            total = math.fsum(w)
            w = [v / total for v in w]
            loss = math.fsum((math.fsum(wi * ri for wi, ri in zip(w, r, strict=True)) - t) ** 2
                             for r, t in zip(rows, y, strict=True))
            if best is None or loss < best[0] - 1e-15:
                best = (loss, tuple(w))
    assert best is not None, "the single-component supports are always feasible"
    return best[1]


def predict(rows: Sequence[Vector], w: Vector) -> list[float]:
    """Σ w·x for every row."""
    return [math.fsum(wi * ri for wi, ri in zip(w, r, strict=True)) for r in rows]


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None when either side is constant."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def agreement(pred: Sequence[float], y: Sequence[float], threshold: float = 0.5) -> float:
    """Share of samples where ``pred ≥ threshold`` matches a 👍."""
    return sum(1 for p, t in zip(pred, y, strict=True) if (p >= threshold) == (t >= 0.5)) / len(y)


@dataclass(frozen=True)
class Figures:
    """How well a weight vector explains the labels, in sample and held out."""

    correlation: float | None
    agreement: float
    heldout_correlation: float | None
    heldout_agreement: float


@dataclass(frozen=True)
class TuneResult:
    """Current and proposed weights with their figures."""

    labels: int
    current: Vector
    proposed: Vector
    current_figures: Figures
    proposed_figures: Figures
    folds: int


def _folds(n: int, k: int, seed: int) -> list[list[int]]:
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return [order[i::k] for i in range(k)]


def tune(samples: Sequence[Sample], current: Vector, *, folds: int = 5, seed: int = 0) -> TuneResult:
    """Fit proposed weights and compare them with ``current`` (k-fold held-out figures for both)."""
    rows, _ = impute(samples)
    y = [float(s.label) for s in samples]
    proposed = fit_with_fixed(rows, y, current)
    held_cur: list[tuple[float, float]] = []
    held_new: list[tuple[float, float]] = []
    for fold in _folds(len(samples), folds, seed):
        test = set(fold)
        train = [s for i, s in enumerate(samples) if i not in test]
        train_rows, means = impute(train)
        w = fit_with_fixed(train_rows, [float(s.label) for s in train], current)
        for i in fold:
            row = tuple(means[j] if v is None else v for j, v in enumerate(samples[i].features))
            held_new.append((predict([row], w)[0], y[i]))
            held_cur.append((predict([row], current)[0], y[i]))

    def figures(w: Vector, held: list[tuple[float, float]]) -> Figures:
        pred = predict(rows, w)
        hp, hy = [p for p, _ in held], [t for _, t in held]
        return Figures(correlation(pred, y), agreement(pred, y), correlation(hp, hy), agreement(hp, hy))

    return TuneResult(len(samples), current, proposed, figures(current, held_cur), figures(proposed, held_new),
                      folds)
