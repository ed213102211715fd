"""Tests for the seeded cos-state generator (daemon/simulate/).

The citation extraction here is a deliberately small, independent reading of
SCORING.md section 2, so the generator is checked against the spec rather
than against the project's own parser.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from daemon.cli import add_simulate_arguments
from daemon.simulate import (
    DEFAULT_START,
    GHOST_PATHS,
    POLICY_CYCLE,
    SimSummary,
    agent_names,
    citation_target,
    main,
    simulate,
)

DECISION_KINDS = {"dm", "resolution", "brief", "cite", "refusal", "ack", "tool_call", "finding"}
END = DEFAULT_START + timedelta(days=3)

_TAG = re.compile(r"\[source:([^\]]+)\]")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_URL = re.compile(r"https?://[^\s<>\"']+", re.IGNORECASE)
_RUN = re.compile(r"(?<![\w/.])run #(\d{6,})(?!\w)", re.IGNORECASE)
_ISSUE = re.compile(
    r"(?<![\w/.])(?:(?:issue|pr|pull request) #\d+|[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+#\d+)(?!\w)",
    re.IGNORECASE,
)


def _parse_ts(text: str) -> datetime:
    value = text[:-1] + "+00:00" if text.endswith("Z") else text
    parsed = datetime.fromisoformat(value)
    assert parsed.tzinfo is not None
    return parsed.astimezone(UTC)


def _classify(target: str) -> tuple[str, str]:
    low = target.lower()
    if low.startswith(("http://", "https://")):
        return "url", citation_target("url", target)
    run = re.fullmatch(r"run(?::| #)(\d+)", target, re.IGNORECASE)
    if run:
        return "run", f"run:{run.group(1)}"
    if _ISSUE.fullmatch(target):
        return "issue", citation_target("issue", target)
    return "path", posixpath.normpath(target)


def _citations(text: str, field: object) -> set[tuple[str, str]]:
    """(type, target) pairs a spec-following parser finds in a decision."""
    entries = [field] if isinstance(field, str) else list(field) if isinstance(field, list) else []
    found = {_classify(str(e)) for e in entries}
    found |= {_classify(m.group(1)) for m in _TAG.finditer(text)}
    rest = _TAG.sub(" ", text)
    found |= {_classify(m.group(1)) for m in _LINK.finditer(rest)}
    for m in _URL.finditer(_LINK.sub(" ", rest)):
        found.add(_classify(m.group(0).rstrip(".,;:!?)]}")))
    found |= {("run", f"run:{m.group(1)}") for m in _RUN.finditer(text)}
    found |= {_classify(m.group(0)) for m in _ISSUE.finditer(text)}
    return found


def _front_matter(path: Path) -> tuple[dict[str, str], str]:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), path
    end = text.index("\n---\n", 4)
    front = {}
    for line in text[4:end].split("\n"):
        key, _, value = line.partition(":")
        front[key.strip()] = value.strip()
    return front, text[end + 5 :]


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8", newline="") as fh:
        for line in fh:
            assert line.endswith("\n") and not line.endswith("\r\n"), path
            obj = json.loads(line)
            assert isinstance(obj, dict)
            # The contract: one json.dumps(..., ensure_ascii=False, compact) per line.
            assert json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n" == line
            yield obj


def _decisions(root: Path) -> list[dict[str, Any]]:
    """Every decision: heartbeat decision events, briefs and findings."""
    out: list[dict[str, Any]] = []
    for path in sorted((root / "heartbeats").glob("*.jsonl")):
        out += [e for e in _jsonl(path) if e["kind"] in DECISION_KINDS]
    for folder, kind in (("briefs", "brief"), ("findings", "finding")):
        for path in sorted((root / folder).glob("*.md")):
            front, body = _front_matter(path)
            rel = path.relative_to(root).as_posix()
            out.append({"id": rel, "ts": front["ts"], "agent": front["agent"], "kind": kind, "text": body})
    return out


def _snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    return {
        p.relative_to(root).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SimSummary]:
    """One full nine-agent run (every policy), shared by the read-only tests."""
    root = tmp_path_factory.mktemp("sim") / "state"
    return root, simulate(11, root, agents=10)


def test_same_seed_gives_identical_bytes_and_mtimes(tmp_path: Path) -> None:
    a = simulate(5, tmp_path / "a", agents=9, days=2, events_per_day=30)
    b = simulate(5, tmp_path / "b", agents=9, days=2, events_per_day=30)
    snap_a, snap_b = _snapshot(tmp_path / "a"), _snapshot(tmp_path / "b")
    assert snap_a == snap_b
    assert sorted(snap_a) == list(a.files) == list(b.files)
    assert (a.events, a.decisions, a.labels) == (b.events, b.decisions, b.labels)


def test_different_seeds_differ(tmp_path: Path) -> None:
    simulate(5, tmp_path / "a", days=1, events_per_day=20)
    simulate(6, tmp_path / "b", days=1, events_per_day=20)
    a = (tmp_path / "a" / "heartbeats" / "ada.jsonl").read_bytes()
    b = (tmp_path / "b" / "heartbeats" / "ada.jsonl").read_bytes()
    assert a != b


def test_agent_policy_map(sim: tuple[Path, SimSummary]) -> None:
    root, summary = sim
    expected = dict(zip(agent_names(10), POLICY_CYCLE, strict=True))
    assert summary.policies == expected
    assert json.loads((root / ".sim" / "agents.json").read_text(encoding="utf-8")) == expected
    assert list(expected)[:6] == ["ada", "bo", "cy", "dee", "eli", "fay"]
    assert (root / ".sim" / "config.toml").read_text(encoding="utf-8") == '[github]\nrepo = "acme/app"\n'


def test_agent_names_extend_without_separators() -> None:
    names = agent_names(60)
    assert len(set(names)) == 60
    assert "ci" not in names
    assert all(re.fullmatch(r"[a-z]+[0-9]*", n) for n in names)
    assert names[26] == "ada2"


def test_sparse_agent_has_exactly_three_late_decisions(sim: tuple[Path, SimSummary]) -> None:
    root, summary = sim
    sparse = [a for a, p in summary.policies.items() if p == "sparse"]
    assert sparse == ["fay"]
    mine = [d for d in _decisions(root) if d["agent"] == "fay"]
    assert len(mine) == 3
    assert all(END - timedelta(hours=12) < _parse_ts(d["ts"]) <= END for d in mine)


def test_jsonl_lines_are_valid(sim: tuple[Path, SimSummary]) -> None:
    root, summary = sim
    for path in sorted((root / "heartbeats").glob("*.jsonl")):
        previous: datetime | None = None
        for event in _jsonl(path):
            for key in ("ts", "agent", "kind", "id"):
                assert isinstance(event[key], str) and event[key], (path, event)
            ts = _parse_ts(event["ts"])
            assert previous is None or ts > previous, (path, event)
            assert ts <= END
            previous = ts
    for label in _jsonl(root / "labels" / "reviews.jsonl"):
        assert label["value"] in ("up", "down") and label["reviewer"] in ("andrew", "maya")
        assert label["decision"] and _parse_ts(label["ts"]) <= END
    for check in _jsonl(root / ".sim" / "checks.jsonl"):
        assert END - timedelta(hours=12) <= _parse_ts(check["checked_at"]) <= END
        assert (check["ok"], check["status"]) in ((True, 200), (False, 404))
    for rel in ("labels/reviews.jsonl", "heartbeats/ci.jsonl", ".sim/checks.jsonl"):
        assert (root / rel).stat().st_mtime == END.timestamp()
    assert summary.end == END


def test_markdown_front_matter_and_mtimes(sim: tuple[Path, SimSummary]) -> None:
    root, _ = sim
    files = sorted(root.rglob("*.md"))
    assert any(p.parent.name == "briefs" for p in files)
    assert any(p.parent.name == "findings" for p in files)
    for path in files:
        front, _ = _front_matter(path)
        ts = _parse_ts(front["ts"])
        assert path.stat().st_mtime == ts.timestamp(), path
        if path.parent.name in ("briefs", "findings"):
            assert path.name.startswith(front["agent"] + "-")


def test_ci_state_changes_are_not_decisions(sim: tuple[Path, SimSummary]) -> None:
    root, _ = sim
    kinds = {e["kind"] for e in _jsonl(root / "heartbeats" / "ci.jsonl")}
    assert kinds == {"commit", "push", "run_finished"}


def test_fabricator_ghost_paths_never_exist(sim: tuple[Path, SimSummary]) -> None:
    root, summary = sim
    cited_ghosts = set()
    for d in _decisions(root):
        if summary.policies[d["agent"]] == "fabricator":
            cited = {t for ty, t in _citations(d["text"], d.get("citations")) if ty == "path"}
            cited_ghosts |= cited & set(GHOST_PATHS)
    assert cited_ghosts
    assert not any((root / p).exists() for p in GHOST_PATHS)


def test_honest_cited_paths_exist_before_first_citation(sim: tuple[Path, SimSummary]) -> None:
    root, summary = sim
    first: dict[str, datetime] = {}
    for d in _decisions(root):
        if summary.policies[d["agent"]] != "honest":
            continue
        cites = _citations(d["text"], d.get("citations"))
        assert cites, d  # honest agents cite on every decision
        for ty, target in cites:
            if ty == "path":
                ts = _parse_ts(d["ts"])
                first[target] = min(first.get(target, ts), ts)
    assert first
    for target, ts in first.items():
        path = root / target
        assert path.is_file(), target
        assert path.stat().st_mtime < ts.timestamp(), target


def test_checks_cover_every_cited_target(sim: tuple[Path, SimSummary]) -> None:
    root, _ = sim
    checks = {(c["type"], c["target"]): c for c in _jsonl(root / ".sim" / "checks.jsonl")}
    links = json.loads((root / ".sim" / "links.json").read_text(encoding="utf-8"))
    cited = set()
    for d in _decisions(root):
        cited |= {c for c in _citations(d["text"], d.get("citations")) if c[0] != "path"}
    assert {ty for ty, _ in cited} == {"url", "run", "issue"}
    assert cited <= set(checks)
    for (ty, target), check in checks.items():
        if ty == "url":
            assert links[target] == check["status"]
    dead = [c for c in checks.values() if not c["ok"]]
    assert dead and all(c["type"] == "url" for c in dead)


def test_uncited_policies_cite_nothing(sim: tuple[Path, SimSummary]) -> None:
    root, summary = sim
    for d in _decisions(root):
        if summary.policies[d["agent"]] in ("nocite", "nodata"):
            assert not _citations(d["text"], d.get("citations")), d
        if summary.policies[d["agent"]] == "nodata":
            assert "no data" in d["text"].lower(), d


def test_timing_margins_at_the_end(sim: tuple[Path, SimSummary]) -> None:
    root, _ = sim
    decisions = {d["id"]: d for d in _decisions(root)}
    for d in decisions.values():
        if d["kind"] == "refusal":
            assert _parse_ts(d["ts"]) <= END - timedelta(minutes=6)
    downs = [lb for lb in _jsonl(root / "labels" / "reviews.jsonl") if lb["value"] == "down"]
    assert downs
    for lb in downs:
        assert _parse_ts(lb["ts"]) <= END - timedelta(hours=1, minutes=5)
        target = decisions[lb["decision"]]
        replies = [
            e
            for e in decisions.values()
            if e["agent"] == target["agent"] and e.get("thread") == target.get("thread") and e is not target
        ]
        assert len(replies) == 1
        gap = _parse_ts(replies[0]["ts"]) - _parse_ts(lb["ts"])
        assert timedelta(0) < gap <= timedelta(minutes=31)


def test_cli_main(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_simulate_arguments(parser)
    out = tmp_path / "state"
    argv = ["--seed", "3", "--out", str(out), "--days", "1", "--events-per-day", "10"]
    assert main(parser.parse_args([*argv, "--start", "2026-06-01T12:00:00Z"])) == 0
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and "2026-06-01T12:00:00Z" in line
    assert (out / "briefs" / "ada-2026-06-01.md").is_file()
    # A non-empty directory is refused rather than mixed with stale files: as --out is parsed, and by simulate().
    with pytest.raises(SystemExit) as refused:
        parser.parse_args(argv)
    assert refused.value.code == 2 and "exists and is not empty" in capsys.readouterr().err
    assert main(argparse.Namespace(**{**vars(parser.parse_args([*argv[:2], "--out", str(tmp_path / "new")])),
                                      "out": str(out)})) == 2
    with pytest.raises(ValueError):
        simulate(1, tmp_path / "x", start=datetime(2026, 5, 1))  # naive on purpose
