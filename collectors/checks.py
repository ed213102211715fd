"""Link-check results as JSON Lines: ``target``, ``type``, ``checked_at``, ``ok`` (true/false/null), ``status``."""

from __future__ import annotations

from collectors.citations import CITATION_TYPES
from collectors.jsonl import load_object, snippet
from collectors.records import CheckResult, Reject
from collectors.rfc3339 import TimestampError, parse_ts


def parse_check(raw: bytes, path: str, line: int) -> CheckResult | Reject:
    """One check line → :class:`CheckResult` (``seq`` = its line, the arrival order) or a Reject."""
    obj = load_object(raw, path, line)
    if isinstance(obj, Reject):
        return obj
    target, kind, ok, status = obj.get("target"), obj.get("type"), obj.get("ok"), obj.get("status")
    if not isinstance(target, str) or not target:
        return Reject(path, line, "missing_target", snippet(raw))
    if kind not in CITATION_TYPES:
        return Reject(path, line, "bad_type", snippet(raw))
    if ok is not None and not isinstance(ok, bool):
        return Reject(path, line, "bad_ok", snippet(raw))
    if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
        return Reject(path, line, "bad_status", snippet(raw))
    try:
        checked_at = parse_ts(obj.get("checked_at"))
    except TimestampError:
        return Reject(path, line, "bad_ts", snippet(raw))
    detail = obj.get("detail")
    return CheckResult(target, str(kind), checked_at, ok, status, seq=line,
                       detail=detail if isinstance(detail, str) else "")


def load_checks(data: bytes, path: str) -> tuple[list[CheckResult], list[Reject]]:
    """Every complete line of a checks file, parsed."""
    results: list[CheckResult] = []
    rejects: list[Reject] = []
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        if not line.strip():
            continue
        rec = parse_check(line.removesuffix(b"\r"), path, number)
        (rejects if isinstance(rec, Reject) else results).append(rec)  # type: ignore[arg-type]
    return results, rejects
