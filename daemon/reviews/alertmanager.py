"""Alertmanager's webhook payload, version 4 (pure): parsed, checked, and mapped to the reviews it concerns.

Alertmanager POSTs one notification per alert group::

    {"version": "4", "groupKey": "...", "truncatedAlerts": 0, "status": "firing", "receiver": "honestyd",
     "groupLabels": {...}, "commonLabels": {...}, "commonAnnotations": {...}, "externalURL": "...",
     "alerts": [{"status": "firing", "labels": {"alertname": "HonestyScoreLow", "agent": "zoe", ...},
                 "annotations": {...}, "startsAt": "...", "endsAt": "...", "generatorURL": "...",
                 "fingerprint": "..."}, ...]}

A payload that is not that (not JSON, another version, an alert without status or labels) raises
:class:`PayloadError`: answered 400, and Alertmanager does not retry a 4xx. An alert honestyd has no review for
(another rule's, or one without an ``agent`` label) is parsed like any other, and :func:`review_target` says so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collectors.rfc3339 import TimestampError, parse_ts

#: The shipped honesty alerts (ops/prometheus/alerts.yml) that open or join a review, and the reason of each.
REVIEW_ALERTS: Mapping[str, str] = {
    "HonestyScoreLow": "below",
    "HonestyConfidentlyBad": "below",
    "HonestyScoreDrop": "drop",
}
#: The most alerts one notification may hold (Alertmanager's ``max_alerts`` is 0, unlimited, by default).
MAX_ALERTS = 1000


class PayloadError(ValueError):
    """A body that is not an Alertmanager webhook payload of version 4; the message says what is wrong."""


@dataclass(frozen=True)
class Alert:
    """One alert of a notification."""

    status: str
    labels: Mapping[str, str]
    starts_at: str
    fingerprint: str

    @property
    def alertname(self) -> str:
        """The alert rule's name (its ``alertname`` label; "" without one)."""
        return self.labels.get("alertname", "")


@dataclass(frozen=True)
class Notification:
    """One webhook payload: the group's status, its receiver and its alerts."""

    status: str
    receiver: str
    alerts: tuple[Alert, ...]


def _labels(value: Any, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise PayloadError(f"{where} must be an object of string labels")
    return dict(value)


def _alert(item: Any, n: int) -> Alert:
    where = f"alerts[{n}]"
    if not isinstance(item, dict):
        raise PayloadError(f"{where} must be an object")
    status = item.get("status")
    if status not in ("firing", "resolved"):
        raise PayloadError(f"{where}.status must be 'firing' or 'resolved'")
    labels = _labels(item.get("labels"), f"{where}.labels")
    starts = item.get("startsAt", "")
    try:
        parse_ts(starts)
    except TimestampError:
        raise PayloadError(f"{where}.startsAt must be an RFC 3339 time") from None
    fingerprint = item.get("fingerprint")
    if not isinstance(fingerprint, str) or not fingerprint:
        # Alertmanager sends one; a sender that does not gets the same for the same labels.
        fingerprint = hashlib.sha256(json.dumps(labels, sort_keys=True).encode()).hexdigest()[:16]
    return Alert(status, labels, starts, fingerprint)


def parse_payload(raw: bytes) -> Notification:
    """The notification a webhook body holds; raises :class:`PayloadError` naming what is wrong."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise PayloadError("body must be a JSON object") from None
    if not isinstance(body, dict):
        raise PayloadError("body must be a JSON object")
    if body.get("version") != "4":
        raise PayloadError("version must be \"4\" (Alertmanager's webhook payload)")
    alerts = body.get("alerts")
    if not isinstance(alerts, list):
        raise PayloadError("alerts must be a list")
    if len(alerts) > MAX_ALERTS:
        raise PayloadError(f"more than {MAX_ALERTS} alerts in one notification")
    status, receiver = body.get("status", ""), body.get("receiver", "")
    if status not in ("firing", "resolved") or not isinstance(receiver, str):
        raise PayloadError("status must be 'firing' or 'resolved', and receiver a string")
    return Notification(status, receiver, tuple(_alert(a, n) for n, a in enumerate(alerts)))


def review_target(alert: Alert) -> tuple[str, str] | None:
    """(agent, reason) of the review an alert opens or joins; None for an alert honestyd acknowledges and ignores
    (not one of :data:`REVIEW_ALERTS`, or without a non-empty ``agent`` label)."""
    reason = REVIEW_ALERTS.get(alert.alertname)
    agent = alert.labels.get("agent", "")
    return (agent, reason) if reason is not None and agent else None
