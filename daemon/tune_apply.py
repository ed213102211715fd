"""``honestyd tune``: report the fit of weights to reviewer labels and (``--apply``) write it as a new version.

The fit itself is :mod:`scorers.tune` (pure); this module is the command around it: the report (a table or
JSON), the guardrails, and the writes.

A new version goes to the weights file named by ``[weights] file`` (never into the user's
config.toml), becomes the active version (or the agent's own, with ``--agent``), and is logged
once in the changelog; a running daemon picks it up on SIGHUP.

Two guardrails stand before ``--apply`` (``--force`` passes both): at least :data:`FLOOR` labelled
decisions, whatever ``--min-labels`` lowers the report's own minimum to, and a held-out correlation
strictly better than that of the weights in force over the same folds.
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
from daemon.cliargs import UsageError
from daemon.config import COMPONENTS, Config, ConfigError, load_config
from scorers.context import Context, Records
from scorers.progress import FLOOR
from scorers.tune import Figures, TuneResult, samples_from, tune


def latest_time(records: Records) -> datetime | None:
    """The newest event or label time: the default evaluation time for tuning."""
    times = [e.ts for e in records.events] + [lb.ts for lb in records.labels]
    return max(times) if times else None


def _fig(f: Figures) -> dict[str, float | None]:
    return {"correlation": f.correlation, "agreement": f.agreement, "heldout_correlation": f.heldout_correlation,
            "heldout_agreement": f.heldout_agreement}


def refusals(r: TuneResult, version: str) -> list[str]:
    """Why ``--apply`` would refuse these proposed weights without ``--force`` (empty: it would apply them)."""
    out = []
    if r.labels < FLOOR:
        out.append(f"{r.labels} labelled decisions are fewer than the {FLOOR} --apply needs: weights fitted to so few"
                   " labels follow their noise")
    new, cur = r.proposed_figures.heldout_correlation, r.current_figures.heldout_correlation
    if new is None or (cur is not None and new <= cur) or (cur is None and new <= 0):
        shown = "undefined" if new is None else f"{new:.3f}"
        than = "undefined" if cur is None else f"{cur:.3f}"
        out.append(f"the proposal's held-out correlation ({shown}) is not better than that of {version}, the weights"
                   f" in force ({than}, the same {r.folds} folds)")
    return out


def result_json(r: TuneResult, version: str, agent: str | None) -> dict[str, Any]:
    """The tuning report as data."""
    return {
        "agent": agent, "labels": r.labels, "folds": r.folds,
        "current": {"version": version, "weights": dict(zip(COMPONENTS, r.current, strict=True)),
                    **_fig(r.current_figures)},
        "proposed": {"weights": dict(zip(COMPONENTS, r.proposed, strict=True)), **_fig(r.proposed_figures)},
        "method": "constrained least squares (w ≥ 0, Σw = 1), exact over all support sets; N/A imputed by mean",
        "apply": {"floor": FLOOR, "refusals": refusals(r, version)},
    }


def report_table(r: TuneResult, version: str, agent: str | None) -> str:
    """The tuning report as a table: weights, then the figures of both vectors side by side."""
    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    current = f"{version} (in force)"
    width = max(len(current), 8)
    lines = [f"tuning {'agent ' + agent if agent else 'all agents'} on {r.labels} labels ({r.folds}-fold held out)",
             f"{'component':<26} {current:>{width}} {'proposed':>9}"]
    for c, cur, new in zip(COMPONENTS, r.current, r.proposed, strict=True):
        lines.append(f"{c:<26} {cur:>{width}.3f} {new:9.3f}")
    rows = (("correlation, in sample", "correlation"), ("agreement, in sample", "agreement"),
            ("correlation, held out", "heldout_correlation"), ("agreement, held out", "heldout_agreement"))
    for name, key in rows:
        cur_fig, new_fig = getattr(r.current_figures, key), getattr(r.proposed_figures, key)
        lines.append(f"{name:<26} {f(cur_fig):>{width}} {f(new_fig):>9}")
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


def cannot_apply(config: Config, version: str) -> str | None:
    """Why no version ``version`` can be written under ``config``, whatever the weights (None: it can)."""
    if config.weights_file is None:
        return "set [weights] file = \"weights.toml\" in the config first; tune never rewrites config.toml"
    if version in config.weights_versions:
        return f"weights version {version!r} exists already; versions never change, choose a new name"
    return None


def apply(config_path: Path, config: Config, version: str, weights: tuple[float, ...], agent: str | None,
          state_root: Path, now: datetime) -> str | None:
    """Write the version and log the change once; returns an error message or None."""
    blocked = cannot_apply(config, version)
    if blocked:
        return blocked
    assert config.weights_file is not None
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
    if args.agent is not None and args.agent not in ctx.by_agent:
        raise UsageError(f"--agent {args.agent}: no decisions by this agent up to {format_ts(at)}")
    if args.force and not args.apply:
        raise UsageError("--force only goes with --apply")
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
        sys.stdout.write(report_table(result, version, args.agent))
    return _apply(args, config, result, version, at) if args.apply else 0


def _apply(args: argparse.Namespace, config: Config, result: TuneResult, version: str, at: datetime) -> int:
    """``--apply``: write the proposal unless a guardrail refuses it (exit status 2) and ``--force`` is not given."""
    if args.config is None:
        raise UsageError(f"--apply {args.apply}: needs --config FILE (the weights file is named there)")
    blocked = cannot_apply(config, args.apply)
    if blocked:
        raise UsageError(f"--apply {args.apply}: {blocked}")
    refused = refusals(result, version)
    if refused and not args.force:
        for why in refused:
            print(f"not applied: {why}", file=sys.stderr)
        print("not applied: pass --force to apply these weights anyway", file=sys.stderr)
        return 2
    for why in refused:
        print(f"applied with --force although {why}", file=sys.stderr)
    root = Path(args.state) if args.state else config.state_root
    error = apply(Path(args.config), config, args.apply, result.proposed, args.agent, root, at)
    if error:
        print(error, file=sys.stderr)
        return 2
    target = f"agent {args.agent}" if args.agent else "the active version"
    print(f"applied: weights {args.apply} written to {config.weights_file} as {target} at {format_ts(at)};"
          " send SIGHUP to a running daemon (systemctl reload honestyd)")
    return 0
