"""``honestyd tune``: fit weights to reviewer labels, report, and (``--apply``) write a new version.

A new version goes to the weights file named by ``[weights] file`` (never into the user's
config.toml), becomes the active version (or the agent's own, with ``--agent``), and is logged
once in the changelog; a running daemon picks it up on SIGHUP.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

from collectors.rfc3339 import format_ts
from daemon import changelog
from daemon.config import COMPONENTS, Config, ConfigError, load_config
from scorers.context import Context, Records
from scorers.tune import Figures, TuneResult, samples_from, tune


def latest_time(records: Records) -> datetime | None:
    """The newest event or label time: the default evaluation time for tuning."""
    times = [e.ts for e in records.events] + [lb.ts for lb in records.labels]
    return max(times) if times else None


def _fig(f: Figures) -> dict[str, float | None]:
    return {"correlation": f.correlation, "agreement": f.agreement, "heldout_correlation": f.heldout_correlation,
            "heldout_agreement": f.heldout_agreement}


def result_json(r: TuneResult, version: str, agent: str | None) -> dict[str, Any]:
    """The tuning report as data."""
    return {
        "agent": agent, "labels": r.labels, "folds": r.folds,
        "current": {"version": version, "weights": dict(zip(COMPONENTS, r.current, strict=True)),
                    **_fig(r.current_figures)},
        "proposed": {"weights": dict(zip(COMPONENTS, r.proposed, strict=True)), **_fig(r.proposed_figures)},
        "method": "constrained least squares (w ≥ 0, Σw = 1), exact over all support sets; N/A imputed by mean",
    }


def render(r: TuneResult, version: str, agent: str | None) -> str:
    """The tuning report as a table."""
    def f(x: float | None) -> str:
        return "  n/a" if x is None else f"{x:5.3f}"

    lines = [f"tuning {'agent ' + agent if agent else 'all agents'} on {r.labels} labels ({r.folds}-fold held out)",
             f"{'component':<26} {'current':>8} {'proposed':>9}"]
    for c, cur, new in zip(COMPONENTS, r.current, r.proposed, strict=True):
        lines.append(f"{c:<26} {cur:8.3f} {new:9.3f}")
    for name, fig in ((f"current ({version})", r.current_figures), ("proposed", r.proposed_figures)):
        lines.append(f"{name:<26} correlation {f(fig.correlation)} agreement {f(fig.agreement)} · held out: "
                     f"correlation {f(fig.heldout_correlation)} agreement {f(fig.heldout_agreement)}")
    return "\n".join(lines) + "\n"


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_weights_file(path: Path, version: str, weights: tuple[float, ...], agent: str | None) -> None:
    """Add ``version`` to the weights file and make it active (or ``agent``'s own); atomic replace."""
    data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    versions: dict[str, dict[str, float]] = data.get("versions", {})
    versions[version] = dict(zip(COMPONENTS, weights, strict=True))
    agents: dict[str, str] = data.get("agents", {})
    active = data.get("active")
    if agent is None:
        active = version
    else:
        agents[agent] = version
    lines = ["# Written by `honestyd tune --apply`; referenced from config.toml by [weights] file.", ""]
    if active is not None:
        lines += [f"active = {_toml_str(active)}", ""]
    for name, vector in versions.items():
        lines.append(f"[versions.{_toml_str(name)}]")
        lines += [f"{c} = {float(w)!r}" for c, w in vector.items()]
        lines.append("")
    lines.append("[agents]")
    lines += [f"{_toml_str(a)} = {_toml_str(v)}" for a, v in sorted(agents.items())]
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def apply(config_path: Path, config: Config, version: str, weights: tuple[float, ...], agent: str | None,
          state_root: Path, now: datetime) -> str | None:
    """Write the version and log the change once; returns an error message or None."""
    if config.weights_file is None:
        return "set [weights] file = \"weights.toml\" in the config first; tune never rewrites config.toml"
    if version in config.weights_versions:
        return f"weights version {version!r} exists already; versions never change, choose a new name"
    write_weights_file(config.weights_file, version, weights, agent)
    try:
        new = load_config(config_path)
    except ConfigError as exc:
        return "the weights file no longer loads: " + "; ".join(exc.errors)
    path = state_root / config.changelog
    try:
        previous = changelog.last_methodology_fingerprint(changelog.changelog_text(path, state_root))
        changelog.append_entries(path, changelog.methodology_entries(config, new, now, previous=previous), state_root)
    except OSError as exc:  # a symlink, FIFO or device at the changelog path is refused (daemon/safefile.py)
        return f"weights {version} written to {config.weights_file}, but the changelog was not: {exc}"
    return None


def main(args: argparse.Namespace, records: Records, config: Config) -> int:
    """Run ``tune`` over loaded records."""
    at = args.at or latest_time(records)
    if at is None:
        print("nothing to tune on: no events or labels", file=sys.stderr)
        return 1
    ctx = Context(records, at, config)
    samples = samples_from(ctx, args.agent)
    who = f"agent {args.agent!r}" if args.agent else "all agents"
    if len(samples) < args.min_labels:
        print(f"tune needs at least {args.min_labels} labelled decisions for {who}; found {len(samples)}"
              f" ({args.min_labels - len(samples)} more 👍/👎 labels are missing)", file=sys.stderr)
        return 1
    version, current = config.weights_for(args.agent) if args.agent else (
        config.weights_active, config.weights_versions[config.weights_active])
    result = tune(samples, current)
    if args.json:
        print(json.dumps(result_json(result, version, args.agent), indent=2))
    else:
        sys.stdout.write(render(result, version, args.agent))
    if args.apply:
        if args.config is None:
            print("--apply needs --config FILE (the weights file is named there)", file=sys.stderr)
            return 2
        root = Path(args.state) if args.state else config.state_root
        error = apply(Path(args.config), config, args.apply, result.proposed, args.agent, root, at)
        if error:
            print(error, file=sys.stderr)
            return 2
        target = f"agent {args.agent}" if args.agent else "the active version"
        print(f"applied: weights {args.apply} written to {config.weights_file} as {target} at {format_ts(at)};"
              " send SIGHUP to a running daemon (systemctl reload honestyd)")
    return 0
