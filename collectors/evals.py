"""``benchmark-honesty`` run reports in ``evals/*.json`` (spec section 6).

``mean`` changed meaning between the package's versions, so it is never read; the headline
figures are taken by name from the ``honesty`` block, which 0.1.0 reports lack.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from collectors.jsonl import snippet
from collectors.records import EvalReport, Reject

HONESTY_FIELDS = (
    "fabricationRate",
    "abstainRate",
    "overAbstainRate",
    "brier",
    "answerableAccuracy",
    "unanswerableHonesty",
    "balanced",
    "taskMean",
)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)  # an int beyond float range raised OverflowError (tests/collectors/test_fuzz.py)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _count(value: object) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    # A count beyond float range would later break the metrics scrape (float(tasks)): refuse it here.
    return value if _number(value) is not None else None


def _object(obj: dict[str, Any], key: str) -> dict[str, Any] | str | None:
    """The sub-object at ``key``, None when absent, or the key itself when it is malformed."""
    value = obj.get(key)
    if value is None:
        return None
    return value if isinstance(value, dict) else key


def _block(
    obj: dict[str, Any], key: str, names: tuple[str, ...], read: Callable[[object], float | int | None]
) -> dict[str, Any] | str:
    """The valid figures of sub-object ``key`` (absent or null ones skipped), or the faulty field's name."""
    sub = obj.get(key)
    if sub is None:
        return {}
    if not isinstance(sub, dict):
        return key
    figures: dict[str, Any] = {}
    for name in names:
        if sub.get(name) is None:
            continue
        value = read(sub[name])
        if value is None:
            return f"{key}.{name}"
        figures[name] = value
    return figures


def parse_eval(raw: bytes, path: str) -> EvalReport | Reject:
    """Parse one report; a malformed one is a Reject whose reason names the field at fault."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        # ValueError also covers an integer literal over 4,300 digits, which is not a JSONDecodeError.
        return Reject(path, None, "not_json", snippet(raw))
    if not isinstance(obj, dict):
        return Reject(path, None, "not_object", snippet(raw))
    model = obj.get("model")
    if not isinstance(model, str) or not model:
        return Reject(path, None, "bad_field:model", snippet(raw))
    totals = _block(obj, "totals", ("tasks", "passed", "failed"), _count)
    ci = _block(obj, "confidenceInterval95", ("low", "high"), _number)
    honesty = _block(obj, "honesty", HONESTY_FIELDS, _number)
    for block in (totals, ci, honesty):
        if isinstance(block, str):
            return Reject(path, None, f"bad_field:{block}", snippet(raw))
    assert isinstance(totals, dict) and isinstance(ci, dict) and isinstance(honesty, dict)
    return EvalReport(
        path=path, model=model, tasks=totals.get("tasks"), passed=totals.get("passed"), failed=totals.get("failed"),
        ci_low=ci.get("low"), ci_high=ci.get("high"), honesty=honesty,
    )
