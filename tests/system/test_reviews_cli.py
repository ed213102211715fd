"""``honestyd reviews list`` and ``honestyd reviews show ID`` (daemon/reviewscli.py) as a user runs them: the queue
from the review files (``--state``) and from a database (``--db``) is the same; ``show`` prints Markdown."""

from __future__ import annotations

import json
from pathlib import Path

from daemon.reviews.events import closing, encode, labelling, opening
from tests.conftest import Run
from tests.helpers import T0, t

EVIDENCE = {"agent": "zoe", "reason": "below", "why": "below the 70 % threshold since 2026-06-01", "by": "honestyd",
            "window": "24h", "score": 0.4, "percent": 40, "interval": [0.3, 0.52], "decisions": 10,
            "weights_version": "v2026.Q3", "threshold": 0.7, "drop_alert": 0.15,
            "reference": {"window": "7d", "score": 0.9, "percent": 90, "decisions": 40},
            "audit": "/agents/zoe?window=24h", "failed_total": 1,
            "failed": [{"id": "zoe-1", "ts": "2026-06-01T11:59:00Z", "kind": "dm", "components": ["citation_rate"],
                        "source": "heartbeats/zoe.jsonl:4"}]}


def _state(tmp: Path) -> Path:
    root = tmp / "state"
    (root / "reviews").mkdir(parents=True)
    lines = [opening("r-20260601-aaaa0001", T0, EVIDENCE),
             labelling("r-20260601-aaaa0001", t(5), "zoe-1", "down", "andrew"),
             opening("r-20260601-bbbb0002", t(10), {**EVIDENCE, "agent": "ada\x1b[31m", "reason": "drop",
                                                    "why": "dropped from 90 % to 40 % in 24h"}),
             closing("r-20260601-bbbb0002", t(20), "maya", "a flaky tool, fixed")]
    (root / "reviews" / "honestyd.jsonl").write_bytes(b"".join(encode(e)[0] for e in lines) + b"{broken\n")
    return root


def test_list_and_show_from_the_files_and_from_the_database_agree(honestyd: Run, tmp_path: Path) -> None:
    root = _state(tmp_path)
    db = tmp_path / "h.db"
    honestyd("ingest", "--state", str(root), "--db", str(db))
    at = "2026-06-01T14:00:00Z"
    from_files = honestyd("reviews", "list", "--state", str(root), "--at", at, "--json")
    from_db = honestyd("reviews", "list", "--db", str(db), "--at", at, "--json")
    assert json.loads(from_files.stdout) == json.loads(from_db.stdout)
    assert "reviews/honestyd.jsonl:5: line refused (not_json)" in from_files.stderr
    listed = json.loads(from_db.stdout)["reviews"]
    assert [(r["id"], r["state"]) for r in listed] == [("r-20260601-aaaa0001", "open"),
                                                       ("r-20260601-bbbb0002", "closed")]
    table = honestyd("reviews", "list", "--db", str(db), "--at", at).stdout.splitlines()
    assert table[0].split() == ["ID", "AGENT", "REASON", "STATE", "AGE", "PROGRESS", "WHY"]
    assert table[1].split()[:5] == ["r-20260601-aaaa0001", "zoe", "below", "open", "2h"]
    assert "1 of 1 decision labelled" in table[1] and "\x1b" not in "".join(table) and "ada\\x1b[31m" in table[2]
    only = honestyd("reviews", "list", "--db", str(db), "--only", "closed").stdout
    assert "r-20260601-bbbb0002" in only and "r-20260601-aaaa0001" not in only

    md = honestyd("reviews", "show", "r-20260601-aaaa0001", "--state", str(root), "--at", at,
                  "--base-url", "https://honestyd.example.org/").stdout
    assert md.startswith("### Review `r-20260601-aaaa0001` · zoe · below (open)\n")
    assert "zoe's 24h honesty score is **40 %** (below the 70 % threshold since 2026-06-01)." in md
    assert "- Score: 40 %, 95 % interval 30–52 %, N = 10 decisions, weights v2026.Q3" in md
    assert "- 7d: 90 % (40 decisions)" in md
    assert "- Live audit: [`/agents/zoe?window=24h`](https://honestyd.example.org/agents/zoe?window=24h)" in md
    assert "| `zoe-1` | 2026-06-01T11:59:00Z | dm | citation_rate | `heartbeats/zoe.jsonl:4` | 👎 andrew |" in md
    closed = honestyd("reviews", "show", "r-20260601-bbbb0002", "--db", str(db), "--json").stdout
    assert json.loads(closed)["closed"]["note"] == "a flaky tool, fixed"
