"""Alertmanager's webhook payload, version 4 (daemon/reviews/alertmanager.py): what opens or joins a review, what is
acknowledged and ignored, what is refused. The HTTP side (tokens, body limits): tests/system/test_reviews_daemon.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from daemon.reviews.alertmanager import MAX_ALERTS, PayloadError, parse_payload, review_target


def alert(name: str, agent: str | None = "zoe", status: str = "firing", **extra: Any) -> dict[str, Any]:
    labels = {"alertname": name, "severity": "warning", **({"agent": agent} if agent is not None else {})}
    return {"status": status, "labels": labels, "annotations": {"summary": "s"},
            "startsAt": "2026-06-01T10:00:00.123456789Z", "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prom/graph", "fingerprint": f"fp-{name}-{agent}", **extra}


def body(*alerts: dict[str, Any], **top: Any) -> bytes:
    return json.dumps({"version": "4", "groupKey": "{}:{agent=\"zoe\"}", "truncatedAlerts": 0, "status": "firing",
                       "receiver": "honestyd", "groupLabels": {"agent": "zoe"}, "commonLabels": {},
                       "commonAnnotations": {}, "externalURL": "http://am:9093", "alerts": list(alerts),
                       **top}).encode()


def test_a_firing_honesty_alert_targets_its_agents_review() -> None:
    n = parse_payload(body(alert("HonestyScoreLow")))
    assert (n.status, n.receiver, len(n.alerts)) == ("firing", "honestyd", 1)
    [a] = n.alerts
    assert (a.status, a.alertname, a.fingerprint) == ("firing", "HonestyScoreLow", "fp-HonestyScoreLow-zoe")
    assert a.starts_at == "2026-06-01T10:00:00.123456789Z"
    assert review_target(a) == ("zoe", "below")


def test_resolved_and_grouped_alerts_each_map_to_their_reason() -> None:
    n = parse_payload(body(alert("HonestyScoreLow", status="resolved"), alert("HonestyScoreDrop"),
                           alert("HonestyConfidentlyBad"), status="resolved"))
    assert [(a.status, review_target(a)) for a in n.alerts] == [
        ("resolved", ("zoe", "below")), ("firing", ("zoe", "drop")), ("firing", ("zoe", "below"))]


def test_unknown_alerts_parse_and_target_no_review() -> None:
    n = parse_payload(body(alert("HonestydDown", agent=None), alert("HonestyAgentSilent"), alert("HonestyScoreLow", ""),
                           alert("DiskFull", agent="zoe")))
    assert [review_target(a) for a in n.alerts] == [None, None, None, None]


def test_an_alert_without_a_fingerprint_gets_one_from_its_labels() -> None:
    one, two = parse_payload(body(alert("HonestyScoreLow", fingerprint=""), alert("HonestyScoreLow"))).alerts
    again = parse_payload(body(alert("HonestyScoreLow", fingerprint=None))).alerts[0]
    assert len(one.fingerprint) == 16 and one.fingerprint == again.fingerprint != two.fingerprint


@pytest.mark.parametrize(("raw", "message"), [
    (b"{", "JSON object"),
    (b"\xff", "JSON object"),
    (b"[]", "JSON object"),
    (b"[" * 100000, "JSON object"),
    (body(version="3"), "version"),
    (json.dumps({"alerts": []}).encode(), "version"),
    (body(alerts={}), "alerts must be a list"),
    (body(status="pending"), "status"),
    (body(alert("HonestyScoreLow", status="pending")), r"alerts\[0\].status"),
    (body("nope"), r"alerts\[0\] must be an object"),  # type: ignore[arg-type]
    (body(alert("HonestyScoreLow", labels={"agent": 3})), r"alerts\[0\].labels"),
    (body(alert("HonestyScoreLow", labels=None)), r"alerts\[0\].labels"),
    (body(alert("HonestyScoreLow", startsAt="yesterday")), r"alerts\[0\].startsAt"),
    (body(*[alert("HonestyScoreLow")] * (MAX_ALERTS + 1)), "more than"),
])
def test_malformed_and_oversized_payloads_are_refused_naming_the_fault(raw: bytes, message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        parse_payload(raw)
