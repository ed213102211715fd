"""Docs are tested: every CLI command, config key, metric and API route is documented."""

from __future__ import annotations

import re

from daemon.cli import build_parser
from daemon.config import Config, render_config
from daemon.http.app import make_app
from daemon.metrics import _FAMILIES as FAMILIES
from tests.conftest import ROOT


def _subcommands() -> list[str]:
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return sorted(action.choices)  # type: ignore[arg-type]


def test_every_cli_command_is_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [c for c in _subcommands() if f"honestyd {c}" not in readme and f"make {c}" not in readme]
    assert missing == []


def test_every_config_key_is_in_config_toml() -> None:
    shipped = (ROOT / "config.toml").read_text()
    keys = {m.group(1) for m in re.finditer(r"^([a-z_]+) = ", render_config(Config()), re.M)}
    assert keys and [k for k in sorted(keys) if not re.search(rf"^#? ?{k} = ", shipped, re.M)] == []


def test_every_metric_is_in_the_operations_guide() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    names = [n + "_total" if kind == "counter" else n for n, (kind, *_rest) in FAMILIES.items()]
    assert [n for n in names if n not in guide] == []


def test_every_api_route_is_in_the_operations_guide() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()

    class _Backend:
        config = Config()

    app = make_app(_Backend())  # type: ignore[arg-type]
    routes = {r.resource.canonical for r in app.router.routes() if r.resource is not None}  # type: ignore[union-attr]
    assert routes and [r for r in sorted(routes) if r not in guide] == []
