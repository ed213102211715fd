"""The structure the code promises (issue 22): imports flow one way, no module is too long, tests mirror the code.

* ``scorers/`` and ``collectors/`` import nothing from ``daemon/``: the rules and the parsers are pure, the daemon
  wires them. Every import counts wherever it sits: at module level, inside a function, under
  ``if TYPE_CHECKING:``, or by name (``importlib.import_module("daemon.x")``); relative imports are resolved
  against the file's package.
* The store (``daemon/store*``, a module or a package, ``daemon/storerepair.py`` included) imports nothing from
  ``scorers/``: the store sits below the scorers, which read records, not tables.
* No module under ``daemon/``, ``collectors/`` or ``scorers/`` is over 500 lines.

Each failure lists every offender (file:line → module imported; file and its line count), so one run shows all
that is left to do.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("daemon", "collectors", "scorers")
MAX_LINES = 500


@dataclass(frozen=True)
class Import:
    """One import in a source file: where it is and the absolute module it names."""

    file: str  # relative to the checkout
    line: int
    module: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} → {self.module}"


def modules(root: Path, package: str) -> list[Path]:
    """Every Python file of ``package`` under ``root``, sorted (so messages are stable)."""
    return sorted((root / package).rglob("*.py"))


def _package_of(root: Path, path: Path) -> list[str]:
    """The dotted package a file's relative imports start from (``daemon/store/x.py`` → ``daemon.store``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1]  # a package's __init__ and a module both start from the folder they are in


def _absolute(base: list[str], level: int, module: str | None) -> str:
    """``from <level dots><module> import …`` resolved against the importing file's package."""
    if level == 0:
        return module or ""
    anchor = base[: len(base) - (level - 1)] if level - 1 <= len(base) else []
    return ".".join([*anchor, *([module] if module else [])])


def _by_name(node: ast.Call) -> str | None:
    """The module of ``importlib.import_module("x")`` / ``__import__("x")`` when given as a literal."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def imports_of(root: Path, path: Path) -> Iterator[Import]:
    """Every module ``path`` imports, anywhere in the file (functions, ``TYPE_CHECKING`` blocks, by name)."""
    rel = path.relative_to(root).as_posix()
    base = _package_of(root, path)
    for node in ast.walk(ast.parse(path.read_bytes(), filename=rel)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(rel, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(base, node.level, node.module)
            yield Import(rel, node.lineno, module)
            # ``from daemon import config`` names the module daemon.config: report that, not just the package.
            for alias in node.names:
                if alias.name != "*":
                    yield Import(rel, node.lineno, f"{module}.{alias.name}" if module else alias.name)
        elif isinstance(node, ast.Call) and (named := _by_name(node)) is not None:
            yield Import(rel, node.lineno, named)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def forbidden(root: Path, importers: list[Path], target: str) -> list[Import]:
    """The imports of ``target`` (or anything in it) made by ``importers``, one per file and line."""
    found: dict[tuple[str, int], Import] = {}
    for path in importers:
        for imp in imports_of(root, path):
            if _within(imp.module, target):
                key = (imp.file, imp.line)
                # Keep the most specific name for the line (daemon.config rather than daemon).
                if key not in found or len(imp.module) > len(found[key].module):
                    found[key] = imp
    return sorted(found.values(), key=lambda i: (i.file, i.line))


def store_modules(root: Path) -> list[Path]:
    """``daemon/store*``: the store's modules, whether files (store.py, store_x.py, storerepair.py) or a package."""
    out: list[Path] = []
    for entry in sorted((root / "daemon").glob("store*")):
        if entry.is_dir():
            out += sorted(entry.rglob("*.py"))
        elif entry.suffix == ".py":
            out.append(entry)
    return out


def line_count(path: Path) -> int:
    """Lines as an editor numbers them: ``wc -l``, plus a last line that has no newline."""
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def long_modules(root: Path, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(file, lines) of every module of the three packages over ``limit`` lines, longest first."""
    sizes = [(p.relative_to(root).as_posix(), line_count(p)) for pkg in PACKAGES for p in modules(root, pkg)]
    return sorted(((f, n) for f, n in sizes if n > limit), key=lambda fn: (-fn[1], fn[0]))


def unmirrored(root: Path) -> list[str]:
    """Test folders under tests/<package>/ naming no package of the code (``tests/daemon/store`` ↔ ``daemon/store``)."""
    out: list[str] = []
    for package in PACKAGES:
        base = root / "tests" / package
        folders = [base, *(d for d in sorted(base.rglob("*")) if d.is_dir() and d.name != "__pycache__")]
        for folder in folders:
            code = root / folder.relative_to(root / "tests")
            if not (code / "__init__.py").is_file() or not (folder / "__init__.py").is_file():
                out.append(folder.relative_to(root).as_posix())
    return out


def _report(what: str, offenders: list[Import]) -> str:
    return f"{len(offenders)} {what}:\n" + "\n".join(f"  {imp}" for imp in offenders)


# --- the rules, on the checkout


@pytest.mark.parametrize("package", ["scorers", "collectors"])
def test_scorers_and_collectors_import_nothing_from_daemon(package: str) -> None:
    offenders = forbidden(ROOT, modules(ROOT, package), "daemon")
    if offenders:
        pytest.fail(_report(f"imports of daemon/ from {package}/", offenders), pytrace=False)


def test_the_store_imports_nothing_from_scorers() -> None:
    store = store_modules(ROOT)
    assert store, "no daemon/store* module found: the check would prove nothing"
    offenders = forbidden(ROOT, store, "scorers")
    if offenders:
        pytest.fail(_report("imports of scorers/ from daemon/store*", offenders), pytrace=False)


def test_no_module_is_over_500_lines() -> None:
    found = long_modules(ROOT)
    if found:
        listed = "\n".join(f"  {f}: {n} lines" for f, n in found)
        pytest.fail(f"{len(found)} modules over {MAX_LINES} lines:\n{listed}", pytrace=False)


def test_the_tests_mirror_the_packages() -> None:
    found = unmirrored(ROOT)
    if found:
        listed = "\n  ".join(found)
        pytest.fail(f"test folders that mirror no package (or lack __init__.py):\n  {listed}", pytrace=False)


# --- the checker itself: each way an import can hide is found, and clean code passes


def _tree(tmp: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp


def test_the_checker_finds_every_kind_of_import(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "scorers/__init__.py": "",
        "scorers/a.py": "import daemon.config\nfrom daemon import store\n",
        "scorers/b.py": "def f():\n    from daemon.app import Daemon\n    return Daemon\n",
        "scorers/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from daemon.config import Config\n",
        "scorers/sub/__init__.py": "from .. import outcome\nfrom daemon import metrics\n",
        "scorers/sub/d.py": "import importlib\nm = importlib.import_module('daemon.live')\n",
        "scorers/clean.py": "import os\nfrom collectors.records import Event\nfrom . import a\nfrom .sub import d\n",
        "scorers/daemonic.py": "import daemonize\nfrom scorers import daemon_like\n",  # names that only start alike
    })
    found = [str(i) for i in forbidden(root, modules(root, "scorers"), "daemon")]
    assert found == [
        "scorers/a.py:1 → daemon.config",
        "scorers/a.py:2 → daemon.store",
        "scorers/b.py:2 → daemon.app.Daemon",
        "scorers/c.py:3 → daemon.config.Config",
        "scorers/sub/__init__.py:2 → daemon.metrics",
        "scorers/sub/d.py:2 → daemon.live",
    ]


def test_the_checker_finds_store_modules_as_files_or_a_package(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "daemon/__init__.py": "",
        "daemon/store.py": "from scorers.context import Records\n",
        "daemon/store_queries.py": "import sqlite3\n",
        "daemon/storerepair.py": "from scorers import score\n",
        "daemon/store/__init__.py": "",
        "daemon/store/events.py": "from .. import config\nfrom scorers.live import LiveModel\n",
        "daemon/app.py": "from scorers.score import evaluate\n",  # not the store: allowed
    })
    found = [str(i) for i in forbidden(root, store_modules(root), "scorers")]
    assert found == [
        "daemon/store.py:1 → scorers.context.Records",
        "daemon/store/events.py:2 → scorers.live.LiveModel",
        "daemon/storerepair.py:1 → scorers.score",
    ]


def test_the_checker_counts_lines_and_lists_the_long_modules_longest_first(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "daemon/long.py": "x = 1\n" * 501,
        "daemon/exact.py": "x = 1\n" * 500,
        "collectors/unterminated.py": "x = 1\n" * 500 + "y = 2",
        "scorers/pkg/deep.py": "x = 1\n" * 600,
    })
    assert long_modules(root) == [("scorers/pkg/deep.py", 600), ("collectors/unterminated.py", 501),
                                  ("daemon/long.py", 501)]


def test_the_checker_finds_test_folders_that_mirror_nothing(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "daemon/__init__.py": "", "daemon/store/__init__.py": "", "collectors/__init__.py": "",
        "scorers/__init__.py": "", "scorers/live/__init__.py": "",
        "tests/daemon/__init__.py": "", "tests/daemon/store/__init__.py": "",
        "tests/daemon/stor/__init__.py": "",  # a typo of daemon/store
        "tests/collectors/__init__.py": "",
        "tests/scorers/__init__.py": "", "tests/scorers/live/test_x.py": "",  # no __init__.py: imported by path
    })
    assert unmirrored(root) == ["tests/daemon/stor", "tests/scorers/live"]
