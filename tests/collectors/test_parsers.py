"""Parsers for every form of spec sections 1–2 and 6, the bad ones included."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from collectors.citations import Citation, classify, extract, normalise_path, normalise_url
from collectors.evals import parse_eval
from collectors.jsonl import MAX_LINE_BYTES, parse_event, parse_label
from collectors.markdown import agent_from_name, parse_markdown, split_front_matter
from collectors.phrases import matches
from collectors.records import Event, Label, Reject
from collectors.rfc3339 import TimestampError, parse_ts

MTIME = datetime(2026, 5, 1, tzinfo=UTC)


# --- time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-05-31T03:40:00Z", datetime(2026, 5, 31, 3, 40, tzinfo=UTC)),
        ("2026-05-31t03:40:00z", datetime(2026, 5, 31, 3, 40, tzinfo=UTC)),
        ("2026-05-31 03:40:00Z", datetime(2026, 5, 31, 3, 40, tzinfo=UTC)),
        ("2026-05-31T05:40:00+02:00", datetime(2026, 5, 31, 3, 40, tzinfo=UTC)),
        ("2026-05-30T22:40:00-05:00", datetime(2026, 5, 31, 3, 40, tzinfo=UTC)),
        ("2026-05-31T03:40:00.123456789Z", datetime(2026, 5, 31, 3, 40, 0, 123456, tzinfo=UTC)),
        ("2026-05-31T03:40:00.5Z", datetime(2026, 5, 31, 3, 40, 0, 500000, tzinfo=UTC)),
    ],
)
def test_timestamps(text: str, expected: datetime) -> None:
    assert parse_ts(text) == expected


@pytest.mark.parametrize(
    "text",
    ["2026-05-31T03:40:00", "2026-05-31", "2026-13-01T00:00:00Z", "2026-05-31T24:00:00Z", "2026-05-31T03:40Z",
     "2026-05-31T03:40:00+25:00", " 2026-05-31T03:40:00Z", "2026-05-31T03:40:00.Z", 1717, None, ""],
)
def test_bad_timestamps(text: object) -> None:
    with pytest.raises(TimestampError):
        parse_ts(text)


# --- phrases


def test_phrase_rules() -> None:
    assert matches("No data yet.", "no data")
    assert not matches("no database", "no data")
    assert not matches("no  data", "no data")  # a space matches exactly one space
    assert matches("Reason: flaky", "reason:")
    assert not matches("überno data", "no data")  # a Unicode letter is a word character
    assert matches("İ no data", "no data")


# --- heartbeat events


def line(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_event_full() -> None:
    raw = line({"id": "e-42", "ts": "2026-05-31T03:40:00Z", "agent": "cooper", "kind": "refusal", "thread": "p",
                "text": "No PR. Tracking in Issue #897.", "citations": ["https://github.com/acme/app/issues/897"],
                "prompt": "merge?", "reason": "no consensus", "alternatives": ["re-run"], "subject": "iris/r.md",
                "corrects": "e-17"})
    e = parse_event(raw, "heartbeats/a.jsonl", 3, "acme/app")
    assert isinstance(e, Event)
    assert (e.id, e.agent, e.kind, e.thread, e.line, e.path) == ("e-42", "cooper", "refusal", "p", 3,
                                                                 "heartbeats/a.jsonl")
    assert e.subject == ("iris/r.md",) and e.alternatives == ("re-run",) and e.corrects == "e-17"
    assert e.citations == (
        Citation("url", "https://github.com/acme/app/issues/897"),
        Citation("issue", "acme/app#897"),
    )


def test_event_without_id_gets_content_hash() -> None:
    import hashlib

    raw = line({"ts": "2026-05-31T03:40:00Z", "agent": "a", "kind": "dm"})
    e = parse_event(raw, "h.jsonl", 1, "")
    assert isinstance(e, Event) and e.id == hashlib.sha256(raw).hexdigest()[:16]
    e2 = parse_event(line({"id": "", "ts": "2026-05-31T03:40:00Z", "agent": "a", "kind": "dm"}), "h", 1, "")
    assert isinstance(e2, Event) and len(e2.id) == 16


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{not json", "not_json"),
        (b"[1, 2]", "not_object"),
        (b"", "not_json"),
        (b"\xff\xfe{}", "not_utf8"),
        (line({"agent": "a", "kind": "dm"}), "missing_ts"),
        (line({"ts": "2026-05-31T03:40:00Z", "kind": "dm"}), "missing_agent"),
        (line({"ts": "2026-05-31T03:40:00Z", "agent": "a", "kind": ""}), "missing_kind"),
        (line({"ts": "2026-05-31T03:40:00", "agent": "a", "kind": "dm"}), "bad_ts"),
        (line({"ts": 5, "agent": "a", "kind": "dm"}), "missing_ts"),
        (b'{"ts":"2026-05-31T03:40:00Z","agent":"a","kind":"dm","text":"' + b"x" * MAX_LINE_BYTES + b'"}',
         "oversized"),
    ],
)
def test_event_rejects(raw: bytes, reason: str) -> None:
    r = parse_event(raw, "heartbeats/a.jsonl", 7, "")
    assert isinstance(r, Reject) and r.reason == reason and r.line == 7 and r.path == "heartbeats/a.jsonl"


# --- labels


def test_labels() -> None:
    ok = parse_label(line({"ts": "2026-05-31T11:10:00Z", "decision": "i-5", "value": "down", "reviewer": "andrew"}),
                     "labels/r.jsonl", 1)
    assert isinstance(ok, Label) and ok.value == "down"
    bad_value = parse_label(line({"ts": "2026-05-31T11:10:00Z", "decision": "i", "value": "meh", "reviewer": "a"}),
                            "l", 2)
    assert isinstance(bad_value, Reject) and bad_value.reason == "bad_value"
    no_reviewer = parse_label(line({"ts": "2026-05-31T11:10:00Z", "decision": "i", "value": "up"}), "l", 3)
    assert isinstance(no_reviewer, Reject) and no_reviewer.reason == "missing_reviewer"


# --- Markdown


def test_front_matter_and_fallbacks() -> None:
    raw = (b"---\nagent: cooper\nts: 2026-05-31T03:40:00Z\nthread: nightly\nsubject: a.md, b.md\n---\n"
           b"Body [x](docs/r.md)\n")
    e = parse_markdown(raw, "findings/x-1.md", "finding", MTIME, "")
    assert isinstance(e, Event)
    assert (e.id, e.agent, e.kind, e.thread, e.subject) == ("findings/x-1.md", "cooper", "finding", "nightly",
                                                            ("a.md", "b.md"))
    assert e.text == "Body [x](docs/r.md)\n" and e.citations == (Citation("path", "docs/r.md"),)
    bare = parse_markdown(b"# Just a body\n", "briefs/ted-2026-05-31.md", "brief", MTIME, "")
    assert isinstance(bare, Event) and bare.agent == "ted" and bare.ts == MTIME and bare.line is None


def test_front_matter_bad_ts_rejects_the_file() -> None:
    r = parse_markdown(b"---\nts: yesterday\n---\nx", "briefs/a.md", "brief", MTIME, "")
    assert isinstance(r, Reject) and r.reason == "bad_ts" and r.line is None


def test_front_matter_edges() -> None:
    assert split_front_matter("---\nagent: a\nno closing fence").fields == {}
    assert split_front_matter("text\n---\nagent: a\n---\n").fields == {}
    assert split_front_matter("---\r\nagent: a\r\n---\r\nbody").fields == {"agent": "a"}
    assert agent_from_name("briefs/zed_notes-29.md") == "zed"
    assert agent_from_name("briefs/oz.md") == "oz"


# --- citations


REPO = "acme/app"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see [source:docs/a.md]", [("path", "docs/a.md")]),
        ("see [the doc](https://Example.COM/a/#top)", [("url", "https://example.com/a")]),
        ("[x](#anchor) [m](mailto:a@b.c)", []),
        ("go to https://x.org/a/b/). Then", [("url", "https://x.org/a/b")]),
        ("(https://x.org/q)", [("url", "https://x.org/q")]),
        ("run #1234567 and run #12345", [("run", "run:1234567")]),
        ("rerun #1234567", []),
        ("Issue #12, PR #13, pull request #14, Acme/App#15", [("issue", "acme/app#12"), ("issue", "acme/app#13"),
                                                            ("issue", "acme/app#14"), ("issue", "acme/app#15")]),
        ("https://h/a/b#12", [("url", "https://h/a/b")]),
        ("x.Issue #3 Issue #3a", []),
        ("[source:Issue #897] Issue #897", [("issue", "acme/app#897")]),
        ("https://github.com/o/r/actions/runs/26702061360/job/1",
         [("url", "https://github.com/o/r/actions/runs/26702061360/job/1"), ("run", "run:26702061360")]),
        ("[source:cos-state/iris/../iris/r.md/]", [("path", "iris/r.md")]),
        ("[source:file:///etc/passwd]", [("url", "file:///etc/passwd")]),
        ("[source:run:123456]", [("run", "run:123456")]),
        ("[label with run #7654321](docs/x.md)", [("path", "docs/x.md"), ("run", "run:7654321")]),
    ],
)
def test_citation_forms(text: str, expected: list[tuple[str, str]]) -> None:
    assert [tuple(c) for c in extract(text, (), REPO)] == expected


def test_citation_entries_are_classified_and_deduplicated() -> None:
    cites = extract("also https://x.org/a", ["https://x.org/a/", "run #1234567", "docs//a.md", "Issue #4"], REPO)
    assert [tuple(c) for c in cites] == [("url", "https://x.org/a"), ("run", "run:1234567"), ("path", "docs/a.md"),
                                         ("issue", "acme/app#4")]


def test_normalisers() -> None:
    assert normalise_url("HTTPS://User@Example.COM:8080/A/?q=1#f") == "https://User@example.com:8080/A/?q=1"
    assert normalise_path("./a/./b/../c/") == "a/c"
    assert normalise_path("cos-state/a.md") == "a.md"
    assert normalise_path("../x") == "../x"
    assert classify("   ", REPO) == []
    assert classify("owner/repo#5", "") == [Citation("issue", "owner/repo#5")]


# --- benchmark reports


def test_eval_report_reads_honesty_by_name_never_mean() -> None:
    raw = json.dumps({"model": "m1", "mean": 0.9, "confidenceInterval95": {"low": 0.1, "high": 0.2},
                      "totals": {"tasks": 10, "passed": 7, "failed": 3},
                      "honesty": {"balanced": 0.61, "taskMean": 0.7, "fabricationRate": 0.1}}).encode()
    r = parse_eval(raw, "evals/a.json")
    assert not isinstance(r, Reject)
    assert r.honesty == {"balanced": 0.61, "taskMean": 0.7, "fabricationRate": 0.1} and r.tasks == 10
    old = parse_eval(json.dumps({"model": "m0", "mean": 0.5, "totals": {"tasks": 2}}).encode(), "evals/b.json")
    assert not isinstance(old, Reject) and old.honesty == {}


@pytest.mark.parametrize(
    ("obj", "field"),
    [({"mean": 1}, "model"), ({"model": "m", "totals": []}, "totals"), ({"model": "m", "totals": {"tasks": -1}},
     "totals.tasks"), ({"model": "m", "honesty": {"brier": "x"}}, "honesty.brier"),
     ({"model": "m", "confidenceInterval95": {"low": "a"}}, "confidenceInterval95.low")],
)
def test_malformed_eval_names_the_field(obj: dict[str, object], field: str) -> None:
    r = parse_eval(json.dumps(obj).encode(), "evals/x.json")
    assert isinstance(r, Reject) and r.reason == f"bad_field:{field}" and r.path == "evals/x.json"
