"""Helpers to run the shared conformance cases (copied verbatim into tests/fixtures/conformance)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "conformance"


def materialize(case: Path, dest: Path) -> Path:
    """Copy a case and restore what the copy in ``shared/`` lost.

    ``materialize.py`` restores mtimes. The shared copy also turned the cases' symlinks into
    regular files holding the link target (``docs/shared.md`` → ``../../outside/shared.md``);
    those are exactly the files mtimes.json does not list, so they become symlinks again.
    """
    shutil.copytree(case, dest, symlinks=True, dirs_exist_ok=True)
    for p in dest.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    mtimes_file = case / "mtimes.json"
    if not mtimes_file.exists():
        return dest
    mtimes: dict[str, int] = json.loads(mtimes_file.read_text())
    for sub in ("state", "outside"):
        for p in sorted((dest / sub).rglob("*")) if (dest / sub).exists() else []:
            rel = p.relative_to(dest).as_posix()
            if p.is_file() and not p.is_symlink() and rel not in mtimes:
                target = p.read_text().strip()
                if target.startswith("../") and "\n" not in target:
                    p.unlink()
                    os.symlink(target, p)
    for rel, ns in mtimes.items():
        if (dest / rel).exists():
            os.utime(dest / rel, ns=(ns, ns), follow_symlinks=False)
    return dest


def cases() -> list[tuple[str, Path, str, str, bool]]:
    """(case id, folder, at, window, verify_paths) for every expected file of every case."""
    out = []
    we = FIXTURES / "worked-example"
    for window in ("24h", "7d"):
        out.append((f"worked-example-{window}", we, "2026-05-31T12:00:00Z", window, True))
    for case in sorted((FIXTURES / "generated").iterdir()):
        spec = json.loads((case / "case.json").read_text())
        for window in spec["windows"]:
            out.append((f"{case.name}-{window}", case, spec["at"], window, bool(spec["verify_paths"])))
    return out


def compare(actual: Any, expected: Any, path: str = "") -> list[str]:
    """Field-by-field differences (floats to 1e-9); extra fields in ``actual`` are allowed."""
    diffs: list[str] = []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {actual!r}"]
        for key, value in expected.items():
            if key not in actual:
                diffs.append(f"{path}.{key}: missing")
            else:
                diffs.extend(compare(actual[key], value, f"{path}.{key}"))
        if path == ".agents":
            diffs.extend(f"{path}.{key}: unexpected agent" for key in actual if key not in expected)
    elif isinstance(expected, float) and isinstance(actual, int | float) and not isinstance(actual, bool):
        close = abs(actual - expected) <= 1e-9
        diffs.extend([] if close else [f"{path}: {actual!r} != {expected!r}"])
    elif actual != expected or type(actual) is not type(expected):
        # Exact for ints, strings, booleans and null (True == 1 must not pass).
        diffs.append(f"{path}: {actual!r} != {expected!r}")
    return diffs
