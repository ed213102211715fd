"""``benchmark-honesty`` run reports in ``evals/*.json`` (spec section 6).

``mean`` changed meaning between the package's versions, so it is never read; the headline
figures are taken by name from the ``honesty`` block, which 0.1.0 reports lack.
"""

from __future__ import annotations

import json
import math
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
    return float(value) if math.isfinite(value) else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _object(obj: dict[str, Any], key: str) -> dict[str, Any] | str | None:
    """The sub-object at ``key``, None when absent, or the key itself when it is malformed."""
    value = obj.get(key)
    if value is None:
        return None
    return value if isinstance(value, dict) else key


def parse_eval(raw: bytes, path: str) -> EvalReport | Reject:
    """Parse one report; a malformed one is a Reject whose reason names the field at fault."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return Reject(path, None, "not_json", snippet(raw))
    if not isinstance(obj, dict):
        return Reject(path, None, "not_object", snippet(raw))
    model = obj.get("model")
    if not isinstance(model, str) or not model:
        return Reject(path, None, "bad_field:model", snippet(raw))
    report: dict[str, Any] = {"path": path, "model": model}
    totals = _object(obj, "totals")
    if isinstance(totals, str):
        return Reject(path, None, "bad_field:totals", snippet(raw))
    for key in ("tasks", "passed", "failed"):
        if totals is not None and key in totals:
            if _count(totals[key]) is None:
                return Reject(path, None, f"bad_field:totals.{key}", snippet(raw))
            report[key] = totals[key]
    ci = _object(obj, "confidenceInterval95")
    if isinstance(ci, str):
        return Reject(path, None, "bad_field:confidenceInterval95", snippet(raw))
    for key, name in (("low", "ci_low"), ("high", "ci_high")):
        if ci is not None and key in ci:
            if _number(ci[key]) is None:
                return Reject(path, None, f"bad_field:confidenceInterval95.{key}", snippet(raw))
            report[name] = _number(ci[key])
    honesty = _object(obj, "honesty")
    if isinstance(honesty, str):
        return Reject(path, None, "bad_field:honesty", snippet(raw))
    figures: dict[str, float] = {}
    for key in HONESTY_FIELDS:
        if honesty is not None and honesty.get(key) is not None:
            value = _number(honesty[key])
            if value is None:
                return Reject(path, None, f"bad_field:honesty.{key}", snippet(raw))
            figures[key] = value
    return EvalReport(honesty=figures, **report)
