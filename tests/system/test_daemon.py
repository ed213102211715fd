"""The real daemon as a subprocess on a temp state: live ingest, sliding windows, reload, stop, labels."""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from freezegun import freeze_time

from collectors.rfc3339 import format_ts
from daemon.cli import build_parser
from tests.daemon_harness import Running, daemon, stop, wait_for, write_config
from tests.tools import require


def _line(i: int, ts: datetime, agent: str = "ada", **extra: object) -> str:
    obj = {"id": f"{agent}-{i}", "ts": format_ts(ts), "agent": agent, "kind": "dm", "thread": f"t{i}",
           "text": f"update {i} see https://docs.example.org/{i % 3}", **extra}
    return json.dumps(obj) + "\n"


def _state(tmp: Path, n: int = 6, now: datetime | None = None) -> Path:
    root = tmp / "state"
    (root / "heartbeats").mkdir(parents=True)
    (root / "findings").mkdir()
    now = now or datetime.now(UTC)
    (root / "heartbeats" / "ada.jsonl").write_text("".join(_line(i, now - timedelta(minutes=30 + i)) for i in range(n)))
    return root


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def _decisions(d: Running, agent: str = "ada", window: str = "24h") -> float | None:
    return d.metric("honesty_window_decisions", agent=agent, window=window)


def test_append_changes_metrics_within_two_seconds(tmp_path: Path) -> None:
    root = _state(tmp_path)
    with daemon(tmp_path, root) as d:
        assert _decisions(d) == 6
        assert d.metric("honesty_score", agent="ada", window="24h") == 1.0
        start = time.monotonic()
        _append(root / "heartbeats" / "ada.jsonl", _line(100, datetime.now(UTC), text="no source"))
        wait_for(lambda: _decisions(d) == 7, 2.0, "the appended decision in /metrics")
        latency = time.monotonic() - start
        assert d.metric("honesty_component_ratio", agent="ada", window="24h", component="citation_rate") == 6 / 7
        print(f"append → metric latency: {latency * 1000:.0f} ms")
        code, took = stop(d)
        assert code == 0 and took < 10


def test_finding_edit_delete_and_rotation_are_picked_up(tmp_path: Path) -> None:
    root = _state(tmp_path)
    with daemon(tmp_path, root) as d:
        finding = root / "findings" / "ada-outage-1.md"
        finding.write_text(f"---\nts: {format_ts(datetime.now(UTC))}\n---\nNothing cited.\n")
        wait_for(lambda: _decisions(d) == 7, 5, "the new finding")
        wait_for(lambda: d.metric("honesty_component_counted", agent="ada", window="24h",
                                  component="citation_rate") == 7, 5)
        finding.write_text(f"---\nts: {format_ts(datetime.now(UTC))}\n---\nNow cites [source:docs/x.md].\n")
        wait_for(lambda: d.metric("honesty_component_ratio", agent="ada", window="24h",
                                  component="citation_rate") == 1.0, 5, "the edit")
        finding.unlink()
        wait_for(lambda: _decisions(d) == 6, 5, "the deletion")
        log = root / "heartbeats" / "ada.jsonl"
        _append(log, _line(50, datetime.now(UTC)))
        os.rename(log, root / "heartbeats" / "ada.jsonl.1")
        _append(root / "heartbeats" / "ada.jsonl.1", _line(51, datetime.now(UTC)))  # the writer still holds it
        log.write_text(_line(52, datetime.now(UTC)))
        wait_for(lambda: _decisions(d) == 9, 5, "rotation: old tail drained and new file read")
        assert d.metric("honesty_ingest_records_total", source="heartbeats") == 9
        assert stop(d)[0] == 0


def test_burst_of_ten_thousand_appends_ends_in_exact_totals(tmp_path: Path) -> None:
    root = _state(tmp_path, n=0)
    with daemon(tmp_path, root) as d:
        now = datetime.now(UTC)
        log = root / "heartbeats" / "ada.jsonl"
        with log.open("a") as f:
            for i in range(10_000):
                f.write(_line(i, now - timedelta(seconds=i)))
                if i % 500 == 0:
                    f.flush()
        wait_for(lambda: _decisions(d) == 10_000, 30, "all 10k decisions")
        assert d.metric("honesty_ingest_records_total", source="heartbeats") == 10_000
        assert stop(d)[0] == 0
    # Nothing doubled either: a fresh start on the same database adds nothing.
    with daemon(tmp_path, root) as d2:
        assert _decisions(d2) == 10_000
        assert d2.metric("honesty_ingest_records_total", source="heartbeats") in (None, 0.0)
        assert stop(d2)[0] == 0


def test_sliding_window_drops_an_old_decision_without_new_input(tmp_path: Path) -> None:
    t0 = datetime(2026, 6, 1, 12, tzinfo=UTC)
    clock = tmp_path / "now.txt"
    clock.write_text(format_ts(t0))
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    lines = [_line(0, t0 - timedelta(hours=23, minutes=59))] + [_line(i, t0 - timedelta(hours=1, minutes=i))
                                                                 for i in range(1, 6)]
    (root / "heartbeats" / "ada.jsonl").write_text("".join(lines))
    with daemon(tmp_path, root, clock_file=clock) as d:
        assert _decisions(d) == 6
        assert d.metric("honesty_last_evaluation_timestamp_seconds") == t0.timestamp()
        clock.write_text(format_ts(t0 + timedelta(minutes=2)))  # time moves; no file changes
        wait_for(lambda: _decisions(d) == 5, 5, "the window to slide past ada-0")
        # ada-1..5 sit at t0−1h01m … t0−1h05m; at t0+22h57m30s the window starts at t0−1h02m30s.
        clock.write_text(format_ts(t0 + timedelta(hours=22, minutes=57, seconds=30)))
        wait_for(lambda: _decisions(d) == 2, 5, "the floor")
        assert d.metric("honesty_score", agent="ada", window="24h") is None  # INSUFFICIENT: absent
        assert d.metric("honesty_score_sufficient", agent="ada", window="24h") == 0
        assert d.metric("honesty_score", agent="ada", window="7d") == 1.0
        assert stop(d)[0] == 0


def test_a_clock_stepping_back_past_what_the_model_let_go_rebuilds_it(tmp_path: Path) -> None:
    """Records behind every window are let go from memory (scorers/live/eviction.py); a clock stepping back further
    than the model can answer for makes the daemon build the model again from the store, and score that time."""
    t0 = datetime(2026, 6, 1, 12, tzinfo=UTC)
    clock = tmp_path / "now.txt"
    clock.write_text(format_ts(t0))
    root = tmp_path / "state"
    (root / "heartbeats").mkdir(parents=True)
    lines = [_line(i, t0 - timedelta(hours=1, minutes=i)) for i in range(6)]
    lines += [_line(10 + i, t0 - timedelta(days=3, hours=1, minutes=i)) for i in range(2)]
    lines += [_line(20 + i, t0 - timedelta(days=40, minutes=i)) for i in range(3)]  # behind every window
    (root / "heartbeats" / "ada.jsonl").write_text("".join(lines))
    with daemon(tmp_path, root, clock_file=clock) as d:
        assert _decisions(d) == 6
        # A start reads only what it keeps: the three 40-day-old records stay in the store, their ids hashed.
        assert d.metric("honesty_model_records") == 8 and d.metric("honesty_model_ids_let_go") == 3
        clock.write_text(format_ts(t0 - timedelta(days=3)))
        wait_for(lambda: _decisions(d) == 2, 10, "the 24h window three days back")
        assert "stepped back past what the scoring model keeps" in d.logs()
        assert _decisions(d, window="30d") == 2  # the 40-day-old ones are outside every window, as before
        assert stop(d)[0] == 0


def test_sighup_with_a_broken_config_keeps_serving_the_old_scores(tmp_path: Path) -> None:
    root = _state(tmp_path)
    config = write_config(tmp_path / "config.toml")
    with daemon(tmp_path, root, config=config) as d:
        before = d.metrics()
        config.write_text("[scoring]\nmin_decisions = 0\n[nonsense]\n")
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "scoring.min_decisions" in d.logs(), 5, "the rejection in the log")
        assert "nonsense: unknown section" in d.logs()
        assert d.proc.poll() is None
        assert d.get("/readyz")[0] == 200
        assert d.metric("honesty_score", agent="ada", window="24h") == before[
            ("honesty_score", (("agent", "ada"), ("window", "24h")))]
        # A good reload takes effect, flags (--state, --db, --listen) still win.
        write_config(config, "[scoring]\nmin_decisions = 7\n")
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: d.metric("honesty_score_sufficient", agent="ada", window="24h") == 0, 5, "the new floor")
        assert "scoring model kept" in d.logs()  # the floor is read only when windows are summed
        assert "rebuilding the scoring model" not in d.logs()
        # A change the rules read (dm no longer a decision kind): the model is built again from the store.
        write_config(config, '[scoring]\nmin_decisions = 7\n[kinds]\ndecision = ["resolution", "refusal"]\n')
        d.proc.send_signal(signal.SIGHUP)
        wait_for(lambda: _decisions(d) is None, 10, "ada's dm decisions no longer decisions")
        assert "rebuilding the scoring model" in d.logs()
        assert stop(d)[0] == 0


def test_sigterm_exits_zero_and_nothing_is_lost_on_restart(tmp_path: Path) -> None:
    root = _state(tmp_path, n=0)
    log = root / "heartbeats" / "ada.jsonl"
    with daemon(tmp_path, root) as d:
        now = datetime.now(UTC)
        for i in range(200):
            _append(log, _line(i, now - timedelta(seconds=i)))
        code, took = stop(d)
        assert code == 0 and took < 10
    with daemon(tmp_path, root) as d2:
        wait_for(lambda: _decisions(d2) == 200, 5, "all 200 after restart")
        assert stop(d2)[0] == 0


def _reviewer_env() -> dict[str, str]:
    return {"HONESTYD_REVIEWERS": "andrew:s3cret-token, maya:other-token"}


def test_labels_api(tmp_path: Path) -> None:
    root = _state(tmp_path)
    with daemon(tmp_path, root, env=_reviewer_env()) as d:
        body = json.dumps({"decision": "ada-1", "value": "down"}).encode()
        assert d.post("/v1/labels", body)[0] == 401
        assert d.post("/v1/labels", body, {"Authorization": "Bearer wrong"})[0] == 403
        good = {"Authorization": "Bearer s3cret-token", "Content-Type": "application/json"}
        assert d.post("/v1/labels", b"{not json", good)[0] == 400
        assert d.post("/v1/labels", json.dumps({"decision": "ada-1", "value": "meh"}).encode(), good)[0] == 400
        assert d.post("/v1/labels", json.dumps(["x"]).encode(), good)[0] == 400
        assert d.post("/v1/labels", json.dumps({"decision": "ada-1", "value": "down", "reviewer": "maya"}).encode(),
                      good)[0] == 403
        assert d.post("/v1/labels", b'{"decision": "' + b"x" * 20000 + b'", "value": "up"}', good)[0] == 413
        status, reply = d.post("/v1/labels", body, good)
        assert status == 201 and reply["label"]["reviewer"] == "andrew"
        lines = (root / "labels" / "api.jsonl").read_text().splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["decision"] == "ada-1"
        wait_for(lambda: d.metric("honesty_ingest_records_total", source="labels") == 1, 5, "the label ingested")
        # Just labelled: the agent's hour to acknowledge has begun, so the decision is pending.
        wait_for(lambda: d.metric("honesty_component_pending", agent="ada", window="24h",
                                  component="self_correction_rate") == 1, 5, "the down label scored")
        assert stop(d)[0] == 0


def test_labels_for_unknown_decisions(tmp_path: Path) -> None:
    """POST /v1/labels answers 404 for an id no stored record carries; label files keep theirs, counted."""
    root = _state(tmp_path)
    (root / "labels").mkdir()
    now = datetime.now(UTC)
    (root / "labels" / "reviews.jsonl").write_text("".join(json.dumps(
        {"ts": format_ts(now - timedelta(minutes=5)), "decision": d, "value": "up", "reviewer": "maya"}) + "\n"
        for d in ("ada-2", "ghost-1")))
    good = {"Authorization": "Bearer s3cret-token", "Content-Type": "application/json"}
    with daemon(tmp_path, root, env=_reviewer_env()) as d:
        assert d.metric("honesty_labels_unmatched") == 1  # ghost-1: kept, counted, labelling nothing
        status, reply = d.post("/v1/labels", json.dumps({"decision": "ada-99", "value": "down"}).encode(), good)
        assert status == 404 and reply["decision"] == "ada-99" and "unknown decision 'ada-99'" in reply["error"]
        assert not (root / "labels" / "api.jsonl").exists()
        assert d.post("/v1/labels", json.dumps({"decision": "ada-3", "value": "down"}).encode(), good)[0] == 201
        # ada-99 arrives: once stored, the label is taken (evaluated yet or not: the store answers for the rest).
        _append(root / "heartbeats" / "ada.jsonl", _line(99, datetime.now(UTC)))
        wait_for(lambda: d.metric("honesty_ingest_records_total", source="heartbeats") == 7, 5, "ada-99 stored")
        assert d.post("/v1/labels", json.dumps({"decision": "ada-99", "value": "down"}).encode(), good)[0] == 201
        # ghost-1 arrives too: its file label finds its decision.
        _append(root / "heartbeats" / "ada.jsonl", _line(1, datetime.now(UTC), agent="ghost"))
        wait_for(lambda: d.metric("honesty_labels_unmatched") == 0, 5, "ghost-1's label matched")
        lines = [json.loads(x)["decision"] for x in (root / "labels" / "api.jsonl").read_text().splitlines()]
        assert lines == ["ada-3", "ada-99"]
        assert stop(d)[0] == 0


def test_api_routes_and_errors(tmp_path: Path) -> None:
    root = _state(tmp_path)
    (root / "heartbeats" / "evil.jsonl").write_text("".join(
        _line(i, datetime.now(UTC) - timedelta(minutes=i), agent="<script>alert(1)</script>") for i in range(5)))
    with daemon(tmp_path, root) as d:
        wait_for(lambda: d.get("/v1/agents")[0] == 200, 5)
        agents = json.loads(d.get("/v1/agents")[1])["agents"]
        assert set(agents) == {"ada", "<script>alert(1)</script>"}
        status, text = d.get("/v1/agents/ada?window=7d")
        assert status == 200 and json.loads(text)["decisions"] == 6
        status, text = d.get("/v1/agents/ada?window=1y")
        assert status == 400 and json.loads(text)["allowed"] == ["24h", "7d", "30d"]
        assert d.get("/v1/agents/nobody")[0] == 404
        status, text = d.get("/v1/agents/ada/audit?window=24h")
        audit = json.loads(text)
        assert status == 200 and len(audit["decision_rows"]) == 6
        assert audit["decision_rows"][0]["source"]["path"] == "heartbeats/ada.jsonl"
        status, page = d.get("/agents/ada?window=24h")
        assert status == 200 and "heartbeats/ada.jsonl:1" in page and "v2026.Q3" in page
        status, page = d.get("/agents/%3Cscript%3Ealert(1)%3C%2Fscript%3E?window=24h")
        assert status == 200 and "<script>" not in page and "&lt;script&gt;" in page
        status, page = d.get("/methodology")
        assert status == 200 and "citation_rate" in page and "Changelog" in page
        assert d.get("/healthz")[0] == 200
        assert stop(d)[0] == 0


def test_changelog_after_two_restarts_has_no_duplicates(tmp_path: Path) -> None:
    root = _state(tmp_path)
    for _ in range(3):
        with daemon(tmp_path, root) as d:
            assert stop(d)[0] == 0
    text = (root / "iris" / "honesty-changelog.md").read_text()
    keys = [line for line in text.splitlines() if line.startswith("<!-- honestyd:")]
    assert keys and len(keys) == len(set(keys))
    assert text.count("## ") == 1


@pytest.mark.parametrize("watchdog", [True])
def test_notify_protocol_against_a_real_datagram_socket(tmp_path: Path, watchdog: bool) -> None:
    import socket

    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(10)
    root = _state(tmp_path)
    config = write_config(tmp_path / "config.toml")
    env = {"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "400000"}
    received: list[str] = []

    def until(prefix: str) -> str:
        while True:
            msg = sock.recv(4096).decode()
            received.append(msg)
            if msg.startswith(prefix) or f"\n{prefix}" in msg:
                return msg

    try:
        with daemon(tmp_path, root, config=config, env=env) as d:
            assert "READY=1" in until("READY=1")
            assert until("WATCHDOG=1") == "WATCHDOG=1"
            d.proc.send_signal(signal.SIGHUP)
            assert "RELOADING=1" in until("RELOADING=1")
            assert "READY=1" in until("READY=1")
            d.proc.send_signal(signal.SIGTERM)
            assert "STOPPING=1" in until("STOPPING=1")
            assert d.proc.wait(10) == 0
    finally:
        sock.close()
    assert any(m.startswith("STATUS=") or "\nSTATUS=" in m for m in received)


def test_promtool_accepts_the_live_metrics(tmp_path: Path) -> None:
    import subprocess

    promtool = require("promtool")
    root = _state(tmp_path)
    (root / "labels").mkdir()
    (root / "labels" / "r.jsonl").write_text("not json\n")  # a reject series in the live output too
    with daemon(tmp_path, root) as d:
        status, text = d.get("/metrics")
        assert status == 200 and "honesty_ingest_rejects_total" in text
        proc = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b"", proc
        assert stop(d)[0] == 0


def test_the_soak_clock_runs_rate_times_fast_from_its_origin_and_bad_values_are_refused() -> None:
    """``run --clock-warp ORIGIN,SINCE,RATE`` (the fast-clock soak's): ten real seconds at 8,640 × are a day."""
    with freeze_time("2026-06-01T00:00:10Z"):
        since = time.time() - 10
        args = build_parser().parse_args(["run", "--clock-warp", f"2026-01-01T00:00:00Z,{since!r},8640"])
        assert args.clock_warp() == datetime(2026, 1, 2, tzinfo=UTC)
    for bad in ["2026-01-01T00:00:00Z,1", "yesterday,1,2", "2026-01-01T00:00:00Z,1,0", "2026-01-01T00:00:00Z,1,-2",
                "2026-01-01T00:00:00Z,nan,2", "2026-01-01T00:00:00Z,1,inf"]:
        with pytest.raises(SystemExit):
            build_parser().parse_args(["run", "--clock-warp", bad])
