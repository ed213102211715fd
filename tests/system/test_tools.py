"""A missing program fails the suite, naming the Debian package ``make test`` installs it from (tests/tools.py).

No test looks a program up on its own or skips when one is missing; the only skip left is the conformance copy
check, which needs the upstream cases beside the checkout (see tests/system/test_conformance.py).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests import tools
from tests.conftest import ROOT

#: (file, line text) of the skips that are not about a missing program, each with its reason in the file.
ALLOWED_SKIPS = {("tests/system/test_conformance.py", "@pytest.mark.skipif(not SHARED.exists(),")}


def test_every_program_required_is_one_make_test_installs() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    found = re.search(r"^SYSTEM_TOOLS := ((?:.*\\\n)*.*)$", makefile, re.M)
    assert found is not None, "the Makefile lists SYSTEM_TOOLS"
    pairs = dict(pair.split(":") for pair in found.group(1).replace("\\", " ").split())
    assert pairs == tools.PACKAGES


def test_a_missing_program_fails_naming_its_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(tools, "SYSTEM_DIRS", (str(tmp_path),))
    with pytest.raises(pytest.fail.Exception) as failed:
        tools.require("promtool")
    assert str(failed.value) == (
        "promtool is missing: it comes from the Debian package 'prometheus', which `make test` installs "
        "(`make system-deps`, or apt-get update && apt-get install -y --no-install-recommends prometheus)")
    fake = tmp_path / "chromium-browser"  # found under its other name, on PATH
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert tools.require("chromium") == str(fake)
    with pytest.raises(KeyError, match="SYSTEM_TOOLS"):
        tools.require("grafana-server")


def _uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each skip and each program lookup in a module."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("skip", "skipif", "importorskip"):
            base = node.value
            if (isinstance(base, ast.Name) and base.id == "pytest") or (
                    isinstance(base, ast.Attribute) and base.attr == "mark"):
                out.append((node.lineno, f"pytest {node.attr}"))
        elif _looks_up_a_program(node):
            out.append((node.lineno, "shutil.which"))
    return out


def _looks_up_a_program(node: ast.AST) -> bool:
    """``shutil.which`` used, or imported by name."""
    if isinstance(node, ast.Attribute):
        return node.attr == "which" and isinstance(node.value, ast.Name) and node.value.id == "shutil"
    return isinstance(node, ast.ImportFrom) and node.module == "shutil" and any(a.name == "which" for a in node.names)


def test_no_test_skips_or_looks_up_a_program_itself() -> None:
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "tests/tools.py" or rel.startswith("tests/fixtures/"):
            continue
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for line, what in _uses(ast.parse(text)):
            if not any(rel == f and lines[line - 1].strip().startswith(s) for f, s in ALLOWED_SKIPS):
                found.append(f"{rel}:{line}: {what}")
    assert found == [], "use tests.tools.require(name) (a missing program fails the test):\n" + "\n".join(found)
