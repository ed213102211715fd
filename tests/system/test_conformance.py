"""The shared conformance cases, scored by the real CLI and compared field by field."""

from __future__ import annotations

import filecmp
import json
from pathlib import Path

import pytest

from tests.conformance import FIXTURES, cases, compare, materialize
from tests.conftest import ROOT, Run

#: The upstream cases: shared/ beside the checkout, or beside a folder holding it (a git worktree's).
SHARED = next((p / "shared" / "conformance" for p in ROOT.parents if (p / "shared" / "conformance").is_dir()),
              ROOT.parent / "shared" / "conformance")


@pytest.mark.parametrize(("case_id", "folder", "at", "window", "verify_paths"), cases(), ids=[c[0] for c in cases()])
def test_conformance_case(
    honestyd: Run, tmp_path: Path, case_id: str, folder: Path, at: str, window: str, verify_paths: bool
) -> None:
    dest = materialize(folder, tmp_path / "case")
    args = ["score", "--state", dest / "state", "--at", at, "--window", window,
            "--config", dest / "config.toml", "--checks", dest / "checks.jsonl", "--json"]
    if verify_paths:
        args.append("--verify-paths")
    actual = json.loads(honestyd(*args).stdout)
    expected = json.loads((folder / f"expected-{window}.json").read_text())
    assert compare(actual, expected) == []


def test_compare_detects_differences() -> None:
    """The comparison itself must fail on a changed number, a missing field and an extra agent."""
    expected = {"agents": {"a": {"score": 0.5, "percent": 50}}}
    assert compare({"agents": {"a": {"score": 0.5 + 2e-9, "percent": 50}}}, expected)
    assert compare({"agents": {"a": {"score": 0.5}}}, expected)
    assert compare({"agents": {"a": {"score": 0.5, "percent": 50}, "b": {}}}, expected)
    assert compare({"agents": {"a": {"score": 0.5, "percent": 50, "extra": 1}}}, expected) == []
    assert compare({"x": True}, {"x": 1}) and compare({"x": None}, {"x": 0.0})


# Not a missing tool: a clone on its own (CI) has no upstream to compare with; the copy is then checked where the
# cases are edited, beside shared/.
@pytest.mark.skipif(not SHARED.exists(), reason="shared/conformance is not beside this checkout or above it")
def test_fixtures_are_identical_to_shared() -> None:
    """tests/fixtures/conformance is a verbatim copy of shared/conformance."""
    def walk(a: Path, b: Path) -> list[str]:
        cmp = filecmp.dircmp(a, b)
        bad = cmp.left_only + cmp.right_only + cmp.funny_files
        bad += [f for f in cmp.common_files if not filecmp.cmp(a / f, b / f, shallow=False)]
        for sub in cmp.common_dirs:
            bad += walk(a / sub, b / sub)
        return bad

    assert walk(FIXTURES, SHARED) == []
