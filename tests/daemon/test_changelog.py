"""The methodology changelog (spec section 5): real files, snapshots scored by the real scorer."""

from __future__ import annotations

import os
import re
import threading
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from collectors.records import Event
from daemon import changelog
from daemon.changelog import (
    TITLE,
    Appender,
    Entry,
    append_entries,
    changelog_text,
    digest_entry,
    last_methodology_fingerprint,
    md_code,
    md_text,
    methodology_entries,
    methodology_fingerprint,
)
from daemon.config import Config, GitHub, Phrases
from daemon.snapshot import Snapshot
from scorers.score import evaluate
from tests.helpers import T0, ev, records, review_entries, t

CFG = Config(github=GitHub(repo="acme/app"))
Q4 = (0.30, 0.30, 0.20, 0.10, 0.05, 0.05)
URL = "https://example.org/doc"  # cited: citation ✓; no checks and no paths, so the score is the citation rate


def log(tmp_path: Path) -> Path:
    return tmp_path / "cos-state" / CFG.changelog


def decisions(agent: str, cited: int, uncited: int, at: datetime, prefix: str = "") -> list[Event]:
    """``cited + uncited`` decisions a minute apart ending at ``at``."""
    return [
        ev(f"{agent}-{prefix}{i}", at - timedelta(minutes=i), agent=agent, cites=(URL,) if i < cited else ())
        for i in range(cited + uncited)
    ]


def snap(events: list[Event], at: datetime = T0, config: Config = CFG) -> Snapshot:
    """A snapshot of every configured window, scored for real."""
    recs = records(*events)
    return Snapshot(at, config, {name: evaluate(recs, at, name, config) for name, _ in config.scoring.windows})


def start(path: Path, config: Config, now: datetime) -> list[Entry]:
    """What the daemon does at start: compare with the fingerprint the file recorded last."""
    previous = last_methodology_fingerprint(changelog_text(path))
    return append_entries(path, methodology_entries(None, config, now, previous=previous))


def bullets(entry: Entry) -> list[str]:
    return [line[2:] for line in entry.markdown.splitlines() if line.startswith("- ")]


def headings(text: str) -> list[str]:
    return re.findall(r"^## (.*)$", text, re.MULTILINE)


def keys(text: str) -> list[str]:
    return re.findall(r"^<!-- honestyd:(\S+) -->$", text, re.MULTILINE)


# --- methodology


def test_first_start_records_methodology_once_and_an_unchanged_restart_writes_nothing(tmp_path: Path) -> None:
    path = log(tmp_path)
    written = start(path, CFG, T0)
    assert len(written) == 1
    text = path.read_text(encoding="utf-8")
    assert text.startswith(TITLE + "\n\n")
    assert headings(text) == ["2026-06-01"]
    assert "**Methodology in force** · 2026-06-01T12:00:00Z" in text and "(first record)" in text
    lines = bullets(written[0])
    assert "weights: active version v2026.Q3" in lines
    assert ("weights v2026.Q3 = citation_rate 0.35, refusal_correctness 0.25, source_verifiability 0.20, "
            "gap_surfacing_rate 0.10, consistency_under_repeat 0.05, self_correction_rate 0.05") in lines
    assert "floor: min_decisions 5" in lines and "windows: 24h/7d/30d" in lines
    assert "decision kinds: `dm`, `resolution`, `brief`, `cite`, `refusal`, `ack`, `tool_call`, `finding`" in lines
    assert last_methodology_fingerprint(text) == methodology_fingerprint(CFG)
    before = path.read_bytes()
    assert start(path, CFG, t(hours=2)) == []  # restart, same config
    assert start(path, CFG, t(days=3)) == []  # and days later
    assert path.read_bytes() == before


def test_weights_version_and_values_changes_are_described_precisely(tmp_path: Path) -> None:
    path = log(tmp_path)
    start(path, CFG, T0)
    q4 = replace(CFG, weights_versions={**CFG.weights_versions, "v2026.Q4": Q4}, weights_active="v2026.Q4")
    [entry] = methodology_entries(CFG, q4, t(hours=1))
    assert bullets(entry) == [
        "weights: active version v2026.Q3 → v2026.Q4",
        "weights v2026.Q4: added = citation_rate 0.30, refusal_correctness 0.30, source_verifiability 0.20, "
        "gap_surfacing_rate 0.10, consistency_under_repeat 0.05, self_correction_rate 0.05",
    ]
    assert "**Methodology change** · 2026-06-01T13:00:00Z" in entry.markdown
    assert f"(was `{methodology_fingerprint(CFG)[:12]}`)" in entry.markdown
    retuned = replace(q4, weights_versions={**q4.weights_versions, "v2026.Q4": (0.25, 0.30, 0.25, 0.10, 0.05, 0.05)})
    [values] = methodology_entries(q4, retuned, t(hours=2))
    assert bullets(values) == ["weights v2026.Q4: citation_rate 0.30 → 0.25, source_verifiability 0.20 → 0.25"]
    per_agent = replace(retuned, weights_agents={"cooper": "v2026.Q3"})
    [agents] = methodology_entries(retuned, per_agent, t(hours=3))
    assert bullets(agents) == ["weights for agent cooper: the active version → v2026.Q3"]
    assert append_entries(path, [entry, values, agents]) == [entry, values, agents]
    text = path.read_text(encoding="utf-8")
    assert headings(text) == ["2026-06-01"]
    assert last_methodology_fingerprint(text) == methodology_fingerprint(per_agent)
    assert start(path, per_agent, t(hours=4)) == []  # the restart after a reload sees the new fingerprint


def test_kinds_phrases_floor_windows_and_durations_changes(tmp_path: Path) -> None:
    new = replace(
        CFG,
        decision_kinds=(*(k for k in CFG.decision_kinds if k != "ack"), "note"),
        phrases=replace(Phrases(), gap=(*Phrases().gap, "tbd")),
        scoring=replace(CFG.scoring, min_decisions=6, windows=(*CFG.scoring.windows[:2], ("90d", timedelta(days=90))),
                        follow_up=timedelta(minutes=10)),
    )
    [entry] = methodology_entries(CFG, new, T0)
    assert bullets(entry) == [
        "decision kinds: added `note`; removed `ack`",
        "gap phrases: added `tbd`",
        "windows: 24h/7d/30d → 24h/7d/90d",
        "floor: min_decisions 5 → 6",
        "follow-up: 5m → 10m",
    ]


def test_order_of_kinds_is_not_a_change_and_a_different_unknown_predecessor_is_recorded(tmp_path: Path) -> None:
    shuffled = replace(CFG, decision_kinds=tuple(reversed(CFG.decision_kinds)))
    assert methodology_fingerprint(shuffled) == methodology_fingerprint(CFG)
    assert methodology_entries(CFG, shuffled, T0) == []
    path = log(tmp_path)
    start(path, CFG, T0)
    floor6 = replace(CFG, scoring=replace(CFG.scoring, min_decisions=6))
    [entry] = start(path, floor6, t(days=1))  # changed while the daemon was down: old config unknown
    assert f"previous fingerprint `{methodology_fingerprint(CFG)[:12]}`" in entry.markdown
    assert "floor: min_decisions 6" in bullets(entry)
    assert headings(path.read_text(encoding="utf-8")) == ["2026-06-01", "2026-06-02"]


# --- score drops: the review queue's openings (daemon/reviews/views.py)


def test_a_review_opening_is_a_drop_entry_that_names_and_links_the_review(tmp_path: Path) -> None:
    # carol: 24h 3/5 = 60 %, 7d 18/20 = 90 %, already so at start: one "below" entry, never a "Score drop".
    carol = decisions("carol", 3, 2, T0) + decisions("carol", 15, 0, t(days=-3), "old")
    # dave: 24h 4/5 = 80 %, 7d 24/25 = 96 %: only the drop.
    dave = decisions("dave", 4, 1, T0) + decisions("dave", 20, 0, t(days=-3), "old")
    ok = decisions("ada", 6, 0, T0)
    below, drop = review_entries(snap(carol + dave + ok))
    assert re.fullmatch(r"review:r-20260601-[0-9a-f]{8}:opened:[0-9a-f]{16}", below.key)
    review = below.key.split(":")[1]
    assert below.markdown.split("\n")[1] == (
        f"**Below threshold** · carol · 2026-06-01T12:00:00Z · 24h 60 % below the 70 % threshold since 2026-06-01 at"
        f" the latest (already below when honestyd started) (7d 90 %; weights v2026.Q3) · review [`{review}`]"
        f"(/reviews/{review}) · audit [`/agents/carol?window=24h`](/agents/carol?window=24h)")
    assert "**Score drop** · dave · 2026-06-01T12:00:00Z · 24h 80 % dropped from 96 % to 80 % in 24h (7d 96 %" in \
        drop.markdown
    path = log(tmp_path)
    assert append_entries(path, [below, drop]) == [below, drop]
    assert append_entries(path, [below, drop]) == []  # written once, whatever offers it again


def test_insufficient_agents_open_no_review_and_write_no_entry() -> None:
    # 4 uncited decisions today (INSUFFICIENT), a perfect week before: no drop despite "0 %" data.
    few = decisions("gus", 0, 4, T0) + decisions("gus", 10, 0, t(days=-3), "old")
    s = snap(few)
    assert s.windows["24h"].agents["gus"].insufficient and not s.windows["7d"].agents["gus"].insufficient
    assert review_entries(s) == []
    # The floor is configurable: the same 8 decisions alert under floor 8 and are INSUFFICIENT under floor 9.
    low = decisions("hal", 1, 7, T0)
    floor8 = replace(CFG, scoring=replace(CFG.scoring, min_decisions=8))
    [alert] = review_entries(snap(low, config=floor8))
    assert "· hal · 2026-06-01T12:00:00Z · 24h 13 % below" in alert.markdown
    floor9 = replace(CFG, scoring=replace(CFG.scoring, min_decisions=9))
    assert review_entries(snap(low, config=floor9)) == []


def test_an_appender_reads_the_file_again_only_when_it_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """The daemon offers the day's drops after every evaluation: the file is not read for entries already in it,
    unless it changed since this appender last read or wrote it (another writer, a deletion)."""
    path = log(tmp_path)
    reads = []
    real_read = changelog.writer._read
    monkeypatch.setattr(changelog.writer, "_read", lambda p, *root: reads.append(p) or real_read(p, *root))
    appender = Appender(path)
    drops = review_entries(snap(decisions("carol", 1, 4, T0)))
    assert appender.append(drops) == drops
    written = path.read_bytes()
    reads.clear()
    for _ in range(50):
        assert appender.append(drops) == []
    assert reads == [] and path.read_bytes() == written
    # Another writer (`honestyd tune`, a hand edit) appends: the appender sees it, and writes nothing twice.
    digest = digest_entry(snap(decisions("carol", 1, 4, T0)))
    assert append_entries(path, [digest]) == [digest]
    assert appender.append([digest, *drops]) == []
    assert len(reads) == 2  # the other writer's read, then the appender's one look at the changed file
    assert keys(path.read_text(encoding="utf-8")) == [drops[0].key, digest.key]
    path.unlink()
    assert appender.append(drops) == drops
    assert path.read_text(encoding="utf-8").startswith(TITLE)


def test_an_appender_shared_by_threads_loses_no_entry(tmp_path: Path) -> None:
    """Drops after an evaluation and the digest job append from different worker threads."""
    path = log(tmp_path)
    appender = Appender(path)
    batches = [[Entry(date(2026, 6, 1), f"t{i}-{j}", f"<!-- honestyd:t{i}-{j} -->\nentry {i} {j}") for j in range(15)]
               for i in range(6)]

    def run(batch: list[Entry]) -> None:
        for entry in batch:
            appender.append([entry])

    threads = [threading.Thread(target=run, args=(b,)) for b in batches]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(keys(path.read_text(encoding="utf-8"))) == sorted(e.key for b in batches for e in b)


# --- the digest


def test_digest_once_per_date_after_restarts(tmp_path: Path) -> None:
    path = log(tmp_path)
    events = decisions("ada", 5, 1, T0) + decisions("bob", 2, 0, T0)
    for hours in (0, 1, 5):  # the first run and two restarts the same day
        at = t(hours=hours)
        start(path, CFG, at)
        append_entries(path, [digest_entry(snap(events, at))])
    text = path.read_text(encoding="utf-8")
    assert keys(text).count("digest:2026-06-01") == 1
    assert len(keys(text)) == len(set(keys(text)))
    assert headings(text) == ["2026-06-01"]
    assert "| agent | 24h | 7d | 30d | weights |" in text
    assert "| ada | 83 % (6 decisions) | 83 % (6 decisions) | 83 % (6 decisions) | v2026.Q3 |" in text
    assert ("| bob | INSUFFICIENT · N=<5 (2 decisions) | INSUFFICIENT · N=<5 (2 decisions) | "
            "INSUFFICIENT · N=<5 (2 decisions) | v2026.Q3 |") in text
    [written] = append_entries(path, [digest_entry(snap(events, t(days=1)))])
    assert written.key == "digest:2026-06-02"
    assert headings(path.read_text(encoding="utf-8")) == ["2026-06-01", "2026-06-02"]


def test_digest_of_an_empty_snapshot_and_a_per_agent_weights_version() -> None:
    assert "No agent has a decision" in digest_entry(snap([])).markdown
    own = replace(CFG, weights_versions={**CFG.weights_versions, "v2026.Q4": Q4}, weights_agents={"ada": "v2026.Q4"})
    md = digest_entry(snap(decisions("ada", 5, 0, T0), config=own)).markdown
    assert "weights v2026.Q3 (active)" in md and md.rstrip().endswith("| v2026.Q4 |")


# --- the file


def test_one_heading_per_day_and_append_only(tmp_path: Path) -> None:
    path = log(tmp_path)
    events = decisions("carol", 1, 4, T0) + decisions("carol", 1, 4, t(days=1), "next")
    start(path, CFG, T0)
    snapshots = [snap(events, T0), snap(events, t(hours=6)), snap(events, t(days=1)), snap(events, t(days=1, hours=1))]
    previous = path.read_bytes()
    append_entries(path, review_entries(snapshots[0]))
    for s in snapshots:
        append_entries(path, [digest_entry(s)])
        now = path.read_bytes()
        assert now.startswith(previous)
        previous = now
    text = previous.decode()
    assert headings(text) == ["2026-06-01", "2026-06-02"]
    assert keys(text) == [
        keys(text)[0],  # the methodology record
        keys(text)[1], "digest:2026-06-01", "digest:2026-06-02",
    ]
    assert keys(text)[1].startswith("review:r-20260601-")


def test_a_batch_across_days_and_a_late_entry_never_repeat_a_heading(tmp_path: Path) -> None:
    path = log(tmp_path)
    day2 = Entry(date(2026, 6, 2), "test:2", "<!-- honestyd:test:2 -->\nsecond day")
    day1 = Entry(date(2026, 6, 1), "test:1", "<!-- honestyd:test:1 -->\nfirst day")
    assert append_entries(path, [day2, day1, day1]) == [day1, day2]  # sorted by date, duplicate in batch once
    late = Entry(date(2026, 6, 1), "test:late", "<!-- honestyd:test:late -->\nclock stepped back")
    assert append_entries(path, [late]) == [late]
    text = path.read_text(encoding="utf-8")
    assert headings(text) == ["2026-06-01", "2026-06-02"]
    assert text.endswith("second day\n\n<!-- honestyd:test:late -->\nclock stepped back\n")


HOSTILE = ["## fake", "<!-- honestyd:digest:2026-01-01 -->", "x|y|z", "two\nlines\r\n## heading", "`*_[a](b)_*`",
           "\u2028## sep", "bidi\u202eevil", "surrogate\ud800"]


def test_hostile_agent_names_cannot_forge_headings_keys_or_cells(tmp_path: Path) -> None:
    path = log(tmp_path)
    events = [e for i, name in enumerate(HOSTILE) for e in decisions(name, 0, 5, T0, f"h{i}")]
    s = snap(events)
    written = append_entries(path, [*review_entries(s), digest_entry(s)])
    assert len(written) == len(HOSTILE)  # a review each, but the one whose name UTF-8 cannot hold; the digest
    text = path.read_text(encoding="utf-8")
    assert headings(text) == ["2026-06-01"]
    assert all(re.fullmatch(r"(review:r-20260601-[0-9a-f]{8}:opened:[0-9a-f]{16}|digest:2026-06-01)", k)
               for k in keys(text))
    assert len(keys(text)) == len(HOSTILE)
    assert "<!-- honestyd:digest:2026-01-01" not in text
    assert re.findall(r"^ {0,3}#.*$", text, re.MULTILINE) == [TITLE, "## 2026-06-01"]
    for line in text.splitlines():
        assert not line.startswith("<") or line.startswith("<!-- honestyd:")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "decisions)" in line]
    assert len(rows) == len(HOSTILE)
    for row in rows:  # unescaped pipes delimit cells: agent, 3 windows, weights
        assert len(re.findall(r"(?<!\\)\|", row)) == 6
    # A restart writes nothing twice, and a later day's digest cannot be blocked by a forged key.
    assert append_entries(path, [*review_entries(s), digest_entry(s)]) == []
    [pre_empted] = append_entries(path, [digest_entry(snap(events, t(days=1)))])
    assert pre_empted.key == "digest:2026-06-02"


def test_escapers() -> None:
    assert md_text("a|b <c> & `d` *e* _f_ [g] #h\ni") == r"a\|b &lt;c&gt; &amp; \`d\` \*e\* \_f\_ \[g\] \#h" + "\ufffdi"
    assert md_code("a`b") == "``a`b``" and md_code("`x") == "`` `x ``"
    assert "\n" not in md_code("x\ny")


def test_malformed_entries_are_refused(tmp_path: Path) -> None:
    path = log(tmp_path)
    for bad in [
        Entry(T0.date(), "k", "no key line"),
        Entry(T0.date(), "a b", "<!-- honestyd:a b -->"),
        Entry(T0.date(), "a--", "<!-- honestyd:a-- -->"),
        Entry(T0.date(), "k", "<!-- honestyd:k -->\n## heading"),
        Entry(T0.date(), "k", "<!-- honestyd:k -->\n<!-- honestyd:other -->"),
    ]:
        with pytest.raises(ValueError):
            append_entries(path, [bad])
    assert not path.exists()


def test_atomic_write_leaves_no_temp_files_and_keeps_mode(tmp_path: Path) -> None:
    path = log(tmp_path)
    start(path, CFG, T0)
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    os.chmod(path, 0o640)
    append_entries(path, [digest_entry(snap(decisions("ada", 5, 0, T0)))])
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_failed_replace_keeps_the_old_file_and_removes_the_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = log(tmp_path)
    start(path, CFG, T0)
    before = path.read_bytes()

    def broken(src: str, dst: str, **dir_fds: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        append_entries(path, [digest_entry(snap([]))])
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_symlinked_changelog_is_never_read_or_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not copy me\n")
    path = log(tmp_path)
    path.parent.mkdir(parents=True)
    path.symlink_to(secret)
    with pytest.raises(OSError, match="symbolic link"):
        append_entries(path, [digest_entry(snap([]))])
    assert path.is_symlink() and secret.read_text() == "do not copy me\n"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_an_edited_file_without_final_newline_stays_a_prefix(tmp_path: Path) -> None:
    path = log(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"# Honesty score changelog\n\nhand-written note, no newline \xff")
    old = path.read_bytes()
    append_entries(path, [digest_entry(snap([]))])
    new = path.read_bytes()
    assert new.startswith(old) and new[len(old):].startswith(b"\n\n## 2026-06-01\n")


def test_weight_changes_are_read_back_from_the_entries_written(tmp_path: Path) -> None:
    from daemon.changelog import weight_changes

    root = tmp_path / "state"
    root.mkdir()
    base = Config(github=GitHub(repo="acme/app"))
    alt = replace(base, weights_versions={**base.weights_versions, "v2": (0.3, 0.3, 0.2, 0.1, 0.05, 0.05)},
                  weights_active="v2")
    path = root / base.changelog
    day = datetime(2026, 5, 3, 9, 0, tzinfo=UTC)
    append_entries(path, methodology_entries(None, base, day - timedelta(days=2)), root)  # in force: not a change
    append_entries(path, methodology_entries(base, alt, day), root)
    append_entries(path, methodology_entries(alt, replace(alt, decision_kinds=("dm",)), day + timedelta(days=1)),
                   root)  # a change, but not of weights
    text = path.read_text()
    ((when, what),) = weight_changes(text)
    assert when == day.date() and "weights: active version" in what and "v2" in what
    forged = text + "\n<!-- honestyd:methodology:2026-05-09T00:00:00Z:zzzz -->\n**Methodology change**\n- weights x\n"
    assert weight_changes(forged) == weight_changes(text)  # a key honestyd never wrote is no entry
