"""The review queue in the real daemon (a subprocess on a real state, tests/daemon_harness.py): an agent slips, a
review opens by itself with its evidence; labels count towards its progress; a restart keeps the queue exactly; a
reviewer closes it; Alertmanager's webhook records alerts, opens a review for a closed one that fires anew, and
refuses what is not its payload or not its token."""

from __future__ import annotations

import json
import os
import re
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from collectors.rfc3339 import format_ts
from tests.daemon_harness import Running, daemon, stop, wait_for, write_config

TOKEN = "rev-token-9d2e"
ALERTS = "am-token-51c0"
ENV = {"HONESTYD_REVIEWERS": f"andrew:{TOKEN}", "HONESTYD_ALERTS_TOKEN": ALERTS}
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
AM = {"Authorization": f"Bearer {ALERTS}", "Content-Type": "application/json"}
URL = "https://docs.acme.example/runbook"
CHANGELOG = "iris/honesty-changelog.md"


def _line(agent: str, n: int, ts: datetime, cited: bool) -> str:
    obj: dict[str, Any] = {"id": f"{agent}-{n}", "ts": format_ts(ts), "agent": agent, "kind": "dm",
                           "thread": f"{agent}-{n}", "text": "update"}
    if cited:
        obj["citations"] = [URL]
    return json.dumps(obj) + "\n"


def _state(tmp: Path) -> Path:
    root = tmp / "state"
    (root / "heartbeats").mkdir(parents=True)
    now = datetime.now(UTC)
    for agent in ("ada", "zoe"):
        (root / "heartbeats" / f"{agent}.jsonl").write_text(
            "".join(_line(agent, i, now - timedelta(minutes=30 + i), True) for i in range(8)))
    return root


def slip(root: Path, agent: str = "zoe", start: int = 100, n: int = 20, *, held: Running | None = None) -> datetime:
    """Append ``n`` uncited decisions of ``agent``, a millisecond apart up to now (none later than an evaluation that
    reads them: one in its future would not count yet); returns the time of the first.

    ``held``: a daemon stopped (SIGSTOP) while the lines are written, so that it reads them all at once. A pass may
    otherwise read a write half done (a regular file's reader can), and the review then opens, rightly, on the part
    it read: the figures it records would be those of that part.
    """
    first = datetime.now(UTC) - timedelta(milliseconds=n)
    text = "".join(_line(agent, start + i, first + timedelta(milliseconds=i), False) for i in range(n))
    if held is not None:
        os.kill(held.proc.pid, signal.SIGSTOP)
    try:
        with (root / "heartbeats" / f"{agent}.jsonl").open("a") as f:
            f.write(text)
    finally:
        if held is not None:
            os.kill(held.proc.pid, signal.SIGCONT)
    return first


def reviews(d: Running, state: str = "") -> list[dict[str, Any]]:
    status, text = d.get("/v1/reviews" + (f"?state={state}" if state else ""))
    assert status == 200, text
    found: list[dict[str, Any]] = json.loads(text)["reviews"]
    return found


def review_lines(root: Path) -> list[dict[str, Any]]:
    path = root / "reviews" / "honestyd.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _without_age(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "age_seconds"} for r in items]


def alert(name: str, agent: str, status: str = "firing", starts: str = "2026-06-01T10:00:00.123456789Z",
          fingerprint: str = "f1") -> dict[str, Any]:
    return {"status": status, "labels": {"alertname": name, "agent": agent, "severity": "warning"},
            "annotations": {"summary": "x"}, "startsAt": starts, "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus/graph", "fingerprint": fingerprint}


def payload(*alerts: dict[str, Any]) -> bytes:
    return json.dumps({"version": "4", "groupKey": "{}:{agent=\"zoe\"}", "truncatedAlerts": 0, "status": "firing",
                       "receiver": "honestyd", "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
                       "externalURL": "http://alertmanager", "alerts": list(alerts)}).encode()


def test_a_slip_opens_a_review_labels_count_a_restart_keeps_it_and_a_reviewer_closes_it(tmp_path: Path) -> None:
    root = _state(tmp_path)
    config = write_config(tmp_path / "config.toml")
    with daemon(tmp_path, root, config=config, env=ENV) as d:
        assert reviews(d) == [] and d.metric("honesty_review_oldest_open_age_seconds") == 0
        slip(root, held=d)  # its figures are checked exactly below
        [opened] = wait_for(lambda: reviews(d, "open"), 15, "zoe's review to open")
        assert (opened["agent"], opened["reason"], opened["state"], opened["by"]) == ("zoe", "below", "open",
                                                                                      "honestyd")
        assert opened["why"] == f"below the 70 % threshold since {datetime.now(UTC):%Y-%m-%d}"
        assert opened["percent"] == 29 and opened["decisions"] == 28  # 8 cited of 28
        assert opened["progress"] == {"labelled": 0, "decisions": 20, "text": "0 of 20 decisions labelled"}
        rid = opened["id"]
        assert d.metric("honesty_reviews_open", agent="zoe") == 1 and d.metric("honesty_reviews_open",
                                                                               agent="ada") is None
        assert d.metric("honesty_review_stale_after_seconds") == 2 * 86400
        status, text = d.get(f"/v1/reviews/{rid}")
        detail = json.loads(text)
        assert status == 200 and detail["failed_total"] == 20 and len(detail["failed"]) == 20
        assert detail["failed"][0]["components"] == ["citation_rate"]
        assert re.fullmatch(r"heartbeats/zoe\.jsonl:\d+", detail["failed"][0]["source"])
        changelog = (root / CHANGELOG).read_text()
        assert "**Below threshold** · zoe · " in changelog and f"review [`{rid}`](/reviews/{rid})" in changelog
        assert "Score drop" not in changelog  # zoe had no 7d history to drop from

        label = json.dumps({"decision": detail["failed"][0]["id"], "value": "down"}).encode()
        assert d.post("/v1/labels", label, AUTH)[0] == 201
        wait_for(lambda: reviews(d)[0]["progress"]["labelled"] == 1, 10, "the label counted")
        assert [e["event"] for e in review_lines(root)] == ["opened", "labelled"]
        before = _without_age(reviews(d))
        assert stop(d)[0] == 0

    with daemon(tmp_path, root, config=config, env=ENV) as d:  # a restart: the same queue, nothing opened again
        assert _without_age(reviews(d)) == before
        assert d.metric("honesty_reviews_open", agent="zoe") == 1
        slip(root, start=200, n=5)
        wait_for(lambda: d.metric("honesty_window_decisions", agent="zoe", window="24h") == 33, 10, "more slips")
        assert [e["event"] for e in review_lines(root)] == ["opened", "labelled"]

        assert d.post(f"/v1/reviews/{rid}/close", b'{"note": "x"}', {**AUTH, "Authorization": "Bearer no"})[0] == 403
        assert d.post(f"/v1/reviews/{rid}/close", b'{"note": "  "}', AUTH)[0] == 400
        assert d.post("/v1/reviews/r-nope/close", b'{"note": "x"}', AUTH)[0] == 404
        status, closed = d.post(f"/v1/reviews/{rid}/close", b'{"note": "zoe\'s sources fixed in PR #12"}', AUTH)
        assert status == 200, closed
        assert closed["review"]["closed"]["reviewer"] == "andrew" and closed["review"]["state"] == "closed"
        assert d.post(f"/v1/reviews/{rid}/close", b'{"note": "again"}', AUTH)[0] == 409
        assert d.metric("honesty_reviews_open", agent="zoe") == 0
        assert d.metric("honesty_review_oldest_open_age_seconds") == 0
        assert review_lines(root)[-1] == {**review_lines(root)[-1], "event": "closed", "reviewer": "andrew",
                                          "note": "zoe's sources fixed in PR #12"}
        wait_for(lambda: "**Review closed** · zoe" in (root / CHANGELOG).read_text(), 10, "the close's entry")
        assert reviews(d, "open") == [] and [r["id"] for r in reviews(d, "closed")] == [rid]
        assert d.get("/v1/reviews?state=maybe")[0] == 400
        assert stop(d)[0] == 0
    assert "Traceback" not in d.logs()


def test_alertmanager_notifications_join_reopen_and_are_refused_when_not_theirs(tmp_path: Path) -> None:
    root = _state(tmp_path)
    with daemon(tmp_path, root, env=ENV) as d:
        slip(root)
        [review] = wait_for(lambda: reviews(d, "open"), 15, "zoe's review to open")
        rid = review["id"]
        body = payload(alert("HonestyScoreLow", "zoe"), alert("HonestydDown", "zoe", fingerprint="f2"),
                       alert("HonestyScoreLow", "", fingerprint="f3"))
        assert d.post("/v1/alerts/alertmanager", body, {})[0] == 401
        assert d.post("/v1/alerts/alertmanager", body, AUTH)[0] == 403  # a reviewer's token is not the alerts one
        assert d.post("/v1/alerts/alertmanager", b"{", AM)[0] == 400
        assert d.post("/v1/alerts/alertmanager", json.dumps({"version": "3", "alerts": []}).encode(), AM)[0] == 400
        assert d.post("/v1/alerts/alertmanager", b"{" + b" " * 20000 + b"}", AM)[0] == 413
        status, answer = d.post("/v1/alerts/alertmanager", body, AM)
        assert status == 200 and answer == {"ok": True, "alerts": 3, "recorded": 1, "ignored": 2, "reviews": [rid]}
        assert d.post("/v1/alerts/alertmanager", body, AM)[1]["recorded"] == 1  # a repeat: recorded once
        assert [e["event"] for e in review_lines(root)] == ["opened", "alert"]
        resolved = payload(alert("HonestyScoreLow", "zoe", status="resolved"))
        assert d.post("/v1/alerts/alertmanager", resolved, AM)[1]["reviews"] == [rid]
        assert d.post(f"/v1/reviews/{rid}/close", b'{"note": "handled"}', AUTH)[0] == 200
        # The same alert again after the close is no new slip; one that starts anew reopens the review.
        assert d.post("/v1/alerts/alertmanager", body, AM)[1]["recorded"] == 0
        anew = payload(alert("HonestyScoreLow", "zoe", starts="2026-06-02T10:00:00Z", fingerprint="f1"))
        assert d.post("/v1/alerts/alertmanager", anew, AM)[1]["reviews"] == [rid]
        [again] = reviews(d, "open")
        assert (again["id"], again["rounds"], again["by"]) == (rid, 2, "alertmanager")
        assert again["why"] == "below the 70 % threshold since 2026-06-02"
        drop = payload(alert("HonestyScoreDrop", "zoe", fingerprint="f9"))
        [(_, other)] = [(s, a) for s, a in [d.post("/v1/alerts/alertmanager", drop, AM)]]
        assert other["recorded"] == 1 and other["reviews"] != [rid]  # another reason: a review of its own
        assert {(r["agent"], r["reason"]) for r in reviews(d, "open")} == {("zoe", "below"), ("zoe", "drop")}
        unknown = payload(alert("HonestyScoreLow", "nobody", fingerprint="f7"))
        assert d.post("/v1/alerts/alertmanager", unknown, AM)[1] == {"ok": True, "alerts": 1, "recorded": 0,
                                                                     "ignored": 1, "reviews": []}
        assert d.metric("honesty_reviews_open", agent="zoe") == 2
        assert stop(d)[0] == 0
    assert ALERTS not in d.logs() and TOKEN not in d.logs()
    assert ALERTS not in (root / "reviews" / "honestyd.jsonl").read_text()


def test_a_malformed_review_line_is_rejected_and_counted_and_the_rest_is_read(tmp_path: Path) -> None:
    root = _state(tmp_path)
    (root / "reviews").mkdir()
    good = {"ts": "2026-06-01T10:00:00Z", "review": "r-manual", "event": "opened", "agent": "ada", "reason": "below"}
    (root / "reviews" / "manual.jsonl").write_text('{"review": "r-x"}\nnot json\n' + json.dumps(good) + "\n")
    with daemon(tmp_path, root, env=ENV) as d:
        assert d.metric("honesty_ingest_rejects_total", source="reviews", reason="missing_ts") == 1
        assert d.metric("honesty_ingest_rejects_total", source="reviews", reason="not_json") == 1
        assert [r["id"] for r in reviews(d)] == ["r-manual"]
        assert stop(d)[0] == 0
