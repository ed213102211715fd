"""The daily sampler and confined path checks (spec 3.3), on real files and a real store."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from collectors.links import LinkMap
from daemon.config import Config
from daemon.ingest import Ingester
from daemon.store import Store
from daemon.verify.paths import check_path
from daemon.verify.sampler import daily_sample, sample_value, sampled

T = datetime(2026, 6, 1, 12, tzinfo=UTC)


def test_sample_value_is_the_spec_formula() -> None:
    d = date(2026, 5, 31)
    expected = int(hashlib.sha256(b"https://x.org/a|2026-05-31").hexdigest()[:8], 16) / 2**32
    assert sample_value("https://x.org/a", d) == expected
    assert sampled("https://x.org/a", d, expected + 1e-12) and not sampled("https://x.org/a", d, expected)


def test_same_date_same_sample_and_rates_per_type() -> None:
    targets = [("url", f"https://x.org/{i}") for i in range(300)] + [("run", f"run:{i}") for i in range(300)]
    d = date(2026, 5, 31)
    assert daily_sample(targets, d, {"url": 0.1, "run": 0.1}) == daily_sample(targets, d, {"url": 0.1, "run": 0.1})
    assert daily_sample(targets, d, {"url": 0.0, "run": 1.0}) == targets[300:]
    assert daily_sample(targets, d, {"url": 0.1}) == [t for t in daily_sample(targets, d, {"url": 0.1, "run": 0.1})
                                                      if t[0] == "url"]


def test_share_over_thirty_days_is_near_the_rate() -> None:
    targets = [("url", f"https://x.org/page/{i}") for i in range(400)]
    days = [date(2026, 5, 1) + timedelta(days=n) for n in range(30)]
    counts = {t: 0 for t in targets}
    for d in days:
        for t in daily_sample(targets, d, {"url": 0.1}):
            counts[t] += 1
    overall = sum(counts.values()) / (len(targets) * len(days))
    assert 0.085 < overall < 0.115
    # Each target's share is Binomial(30, 0.1)/30: nearly all within a few checks of 3 in 30 days.
    assert sum(1 for c in counts.values() if c > 9) == 0
    assert sum(1 for c in counts.values() if c == 0) < 0.1 * len(targets)  # 0.9^30 ≈ 4 %


def _indexed(tmp_path: Path) -> tuple[Path, Store, Ingester]:
    root = tmp_path / "state"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# a\n")
    (root / "docs" / "gone.md").write_text("# soon deleted\n")
    (tmp_path / "secret.md").write_text("outside\n")
    os.symlink("../../secret.md", root / "docs" / "escape.md")
    os.symlink("a.md", root / "docs" / "alias.md")
    made = (T - timedelta(hours=3)).timestamp()
    for p in (root / "docs" / "a.md", root / "docs" / "gone.md"):
        os.utime(p, (made, made))
    store = Store.open(tmp_path / "h.db")
    clock = iter([T - timedelta(hours=2), T - timedelta(hours=1)])
    ingester = Ingester(store, root, Config(), clock=lambda: next(clock))
    ingester.scan()
    return root, store, ingester


def test_path_suite(tmp_path: Path) -> None:
    root, store, ingester = _indexed(tmp_path)
    (root / "docs" / "gone.md").unlink()
    ingester.scan()  # the deletion is noticed at the clock's next time
    files, links = store.file_entries(), LinkMap(store.links())
    store.close()
    assert check_path(root, "docs/a.md", files, links, T).ok is True
    assert check_path(root, "docs/alias.md", files, links, T).ok is True  # a symlink that stays inside
    for target in ("../../etc/passwd", "/etc/passwd", str(tmp_path / "secret.md"), "docs/escape.md",
                   "docs/../../secret.md", "docs/nothing.md", "docs"):
        outcome = check_path(root, target, files, links, T)
        assert outcome.ok is False, (target, outcome)
    deleted = check_path(root, "docs/gone.md", files, links, T)
    assert deleted.ok is False and "deleted" in deleted.detail
    assert files["docs/gone.md"].deleted is not None
    # Before the deletion the same path resolved: the check is "at the check time".
    before = files["docs/gone.md"].deleted - timedelta(seconds=1)
    assert check_path(root, "docs/gone.md", files, links, before).ok is True
