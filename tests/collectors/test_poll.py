"""The log poller: appends, truncation and rotation of tracked logs are reported; nothing else is."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collectors import poll
from collectors.poll import LogPoller


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def test_appends_truncation_and_rotation_are_reported(tmp_path: Path) -> None:
    (tmp_path / "heartbeats").mkdir()
    log = tmp_path / "heartbeats" / "a.jsonl"
    other = tmp_path / "heartbeats" / "b.jsonl"
    log.write_text("1\n")
    other.write_text("1\n")
    poller = LogPoller(tmp_path)
    poller.track("heartbeats/a.jsonl")
    assert "heartbeats/a.jsonl" in poller and len(poller) == 1
    assert poller.changed() == []  # tracking takes the current state as seen
    _append(log, "2\n")
    _append(other, "2\n")  # not tracked: not reported
    assert poller.changed() == ["heartbeats/a.jsonl"]
    assert poller.changed() == []  # reported once per change
    os.truncate(log, 0)  # copytruncate: smaller, same inode
    assert poller.changed() == ["heartbeats/a.jsonl"]
    log.rename(tmp_path / "heartbeats" / "a.jsonl.1")  # rename rotation: gone is news once, then untracked
    assert poller.changed() == ["heartbeats/a.jsonl"]
    assert "heartbeats/a.jsonl" not in poller
    log.write_text("new\n")
    assert poller.changed() == []  # the watcher reports the new file, and the daemon tracks it again
    poller.track("heartbeats/a.jsonl")
    _append(log, "more\n")
    assert poller.changed() == ["heartbeats/a.jsonl"]


def test_a_same_size_rewrite_is_seen_by_its_time(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    log.write_text("aaaa\n")
    os.utime(log, ns=(1_000_000_000, 1_000_000_000))
    poller = LogPoller(tmp_path)
    poller.track("a.jsonl")
    log.write_text("bbbb\n")  # same size, same inode: only the modification time differs
    assert poller.changed() == ["a.jsonl"]


def test_a_log_tracked_unseen_is_reported_at_the_next_poll(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("1\n")
    poller = LogPoller(tmp_path)
    poller.track("a.jsonl", seen=False)  # known from a cursor: lines may have come since the scan read it
    poller.track("b.jsonl", seen=False)  # a cursor whose file is gone: nothing to report
    assert poller.changed() == ["a.jsonl"]
    assert poller.changed() == []


def test_a_log_tracked_before_it_exists_is_reported_when_it_appears(tmp_path: Path) -> None:
    poller = LogPoller(tmp_path)
    poller.track("late.jsonl")
    assert poller.changed() == []
    (tmp_path / "late.jsonl").write_text("1\n")
    assert poller.changed() == ["late.jsonl"]


def test_a_log_tracked_anew_during_a_poll_is_left_to_track(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon polls on a thread of its own while the event loop tracks logs: a log tracked anew between the poll's
    stat and its bookkeeping is not reported by the poll (track saw it: a pass is pending for it), and the poll does
    not put its older look in place of track's."""
    log = tmp_path / "a.jsonl"
    log.write_text("1\n")
    poller = LogPoller(tmp_path)
    poller.track("a.jsonl")
    _append(log, "2\n")
    real = poll.signature

    def racing(path: str) -> poll.Signature | None:
        looked = real(path)  # the poll's stat sees the second line
        monkeypatch.setattr(poll, "signature", real)
        _append(log, "3\n")
        poller.track("a.jsonl")  # the loop, meanwhile: the file moved and came back, say, and a pass reads it
        return looked

    monkeypatch.setattr(poll, "signature", racing)
    assert poller.changed() == []
    assert poller.changed() == []  # what is seen is track's look (three lines), not the poll's (two)
    _append(log, "4\n")
    assert poller.changed() == ["a.jsonl"]
