"""The methodology of a configuration (spec section 5): its fingerprint, its full listing, and what changed.

The fingerprint is a SHA-256 of every setting that changes a published score or alert, in a canonical form; the
changelog embeds it in each methodology entry (:func:`fingerprint_line`), so a restart with an unchanged
configuration finds it there and records nothing. :func:`full_lines` lists a configuration's methodology and
:func:`diff_lines` what changed between two, one Markdown line per setting.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import fields
from datetime import date, timedelta
from typing import Any

from collectors.rfc3339 import format_duration
from daemon.changelog.markdown import md_code, md_text, number, points
from daemon.config import COMPONENTS, Config, Phrases, Signal

# Matched with an optional `\r` so a file saved with CRLF by a human editor still reads.
_FINGERPRINT_LINE = re.compile(r"^<!-- honestyd:methodology sha256=([0-9a-f]{64}) -->\r?$", re.MULTILINE)
_PHRASE_LISTS = tuple(f.name for f in fields(Phrases))
_DURATIONS = (
    ("follow_up", "follow-up"),
    ("gap_grace", "gap grace"),
    ("correction_within", "correction within"),
    ("check_max_age", "check max age"),
)


def _seconds(delta: timedelta) -> float:
    return delta.total_seconds()


def _canonical(config: Config) -> dict[str, Any]:
    """Every setting that changes a published score or alert, in an order-independent form where order is moot."""
    s = config.scoring
    return {
        "schema": 1,
        "weights": {
            "active": config.weights_active,
            "versions": {
                name: dict(zip(COMPONENTS, vector, strict=True)) for name, vector in config.weights_versions.items()
            },
            "agents": dict(config.weights_agents),
        },
        # Kinds and phrases are tested for membership only: their order and repeats change nothing.
        "decision_kinds": sorted(set(config.decision_kinds)),
        "state_change_kinds": sorted(set(config.state_change_kinds)),
        "phrases": {name: sorted(set(getattr(config.phrases, name))) for name in _PHRASE_LISTS},
        # Signals are tried in order (the first whose phrase matches decides), so order is kept.
        "signals": [[sig.phrase, sig.glob, _seconds(sig.within)] for sig in config.signals],
        # The first window is the dashboard's, so window order is kept too.
        "windows": [[name, _seconds(width)] for name, width in s.windows],
        "min_decisions": s.min_decisions,
        "durations": {attr: _seconds(getattr(s, attr)) for attr, _ in _DURATIONS},
        "z": s.z,
        "alert_below": s.alert_below,
        "drop_alert": s.drop_alert,
        "verify_rates": dict(config.verify.rates),
    }


def methodology_fingerprint(config: Config) -> str:
    """SHA-256 (hex) of a canonical JSON of the methodology: weights, kinds, phrases, signals, windows, floor…"""
    text = json.dumps(_canonical(config), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def fingerprint_line(fingerprint: str) -> str:
    """The line of a methodology entry holding its fingerprint (read back by :func:`last_methodology_fingerprint`)."""
    return f"<!-- honestyd:methodology sha256={fingerprint} -->"


def last_methodology_fingerprint(text: str) -> str | None:
    """The fingerprint of the last methodology entry in a changelog's text, or None when it has none."""
    found = _FINGERPRINT_LINE.findall(text)
    return found[-1] if found else None


#: The key line of a methodology entry (see entries.methodology_entries): its UTC date is the entry's day.
_METHODOLOGY_KEY = re.compile(r"^<!-- honestyd:methodology:(\d{4}-\d{2}-\d{2})T[^ ]*:[0-9a-f]{16} -->\r?$",
                              re.MULTILINE)


def weight_changes(text: str) -> list[tuple[date, str]]:
    """(day, what changed) of each methodology change in a changelog's text that changed weights, oldest first.

    Read from the entries honestyd wrote (a key line, its ``**Methodology change**`` title, the ``- weights…`` lines);
    the first record of the methodology in force is not a change, and text anyone else wrote carries no key.
    """
    out: list[tuple[date, str]] = []
    for m in _METHODOLOGY_KEY.finditer(text):
        lines = text[m.end():m.end() + 20_000].lstrip("\r\n").splitlines()  # an entry is a few lines
        if len(lines) < 2 or not lines[1].startswith("**Methodology change**"):
            continue
        items = list(itertools.takewhile(lambda line: line.startswith("- "), lines[2:]))  # the entry's own lines
        weights = [line[2:].strip() for line in items if line.startswith("- weights")]
        if weights:
            try:
                out.append((date.fromisoformat(m.group(1)), "; ".join(weights)))
            except ValueError:
                continue
    return out


def _dashboard_window(config: Config) -> str:
    """The window the dashboard and the alerts use: "24h" when configured, else the first."""
    names = [name for name, _ in config.scoring.windows]
    return "24h" if "24h" in names else names[0]


def _vector(vector: tuple[float, ...]) -> str:
    return ", ".join(f"{c} {number(w)}" for c, w in zip(COMPONENTS, vector, strict=True))


def _codes(items: Iterable[str]) -> str:
    return ", ".join(md_code(i) for i in items) or "none"


def _signal(sig: Signal) -> str:
    return f"{md_code(sig.phrase)} → {md_code(sig.glob)} within {format_duration(sig.within)}"


def _windows(config: Config) -> str:
    return "/".join(md_text(name) for name, _ in config.scoring.windows)


def _alerts(config: Config) -> str:
    s = config.scoring
    return (
        f"a {md_text(_dashboard_window(config))} score below {points(s.alert_below)} %, "
        f"or more than {points(s.drop_alert)} points below the agent's 7d score"
    )


def full_lines(config: Config) -> list[str]:
    """The methodology in force under ``config``, one Markdown line per setting."""
    s = config.scoring
    lines = [f"weights: active version {md_text(config.weights_active)}"]
    lines += [f"weights {md_text(name)} = {_vector(v)}" for name, v in config.weights_versions.items()]
    agents = sorted(config.weights_agents.items())
    lines.append("weights per agent: " + (", ".join(f"{md_text(a)} → {md_text(v)}" for a, v in agents) or "none"))
    lines.append(f"decision kinds: {_codes(config.decision_kinds)}")
    lines.append(f"state-change kinds: {_codes(config.state_change_kinds)}")
    lines += [f"{name} phrases: {_codes(getattr(config.phrases, name))}" for name in _PHRASE_LISTS]
    lines.append("signals: " + (", ".join(_signal(sig) for sig in config.signals) or "none"))
    lines.append(f"windows: {_windows(config)}")
    lines.append(f"floor: min_decisions {s.min_decisions}")
    lines.append("durations: " + ", ".join(f"{label} {format_duration(getattr(s, a))}" for a, label in _DURATIONS))
    lines.append(f"interval: Wilson z {number(s.z)}")
    lines.append(f"alerts: {_alerts(config)}")
    lines.append("verification sample rates: " + ", ".join(f"{t} {number(r)}" for t, r in config.verify.rates.items()))
    return lines


def _set_diff(label: str, old: Sequence[str], new: Sequence[str]) -> list[str]:
    added = [x for x in dict.fromkeys(new) if x not in old]
    removed = [x for x in dict.fromkeys(old) if x not in new]
    parts = []
    if added:
        parts.append(f"added {_codes(added)}")
    if removed:
        parts.append(f"removed {_codes(removed)}")
    return [f"{label}: {'; '.join(parts)}"] if parts else []


def _weights_diff(old: Config, new: Config) -> list[str]:
    lines = []
    if old.weights_active != new.weights_active:
        lines.append(f"weights: active version {md_text(old.weights_active)} → {md_text(new.weights_active)}")
    for name in dict.fromkeys([*old.weights_versions, *new.weights_versions]):
        before, after = old.weights_versions.get(name), new.weights_versions.get(name)
        if before is None and after is not None:
            lines.append(f"weights {md_text(name)}: added = {_vector(after)}")
        elif after is None and before is not None:
            lines.append(f"weights {md_text(name)}: removed (was {_vector(before)})")
        elif before is not None and after is not None and before != after:
            changed = [
                f"{c} {number(b)} → {number(a)}" for c, b, a in zip(COMPONENTS, before, after, strict=True) if a != b
            ]
            lines.append(f"weights {md_text(name)}: {', '.join(changed)}")
    for agent in sorted(set(old.weights_agents) | set(new.weights_agents)):
        was, now = old.weights_agents.get(agent), new.weights_agents.get(agent)
        if was == now:
            continue
        was_text = md_text(was) if was is not None else "the active version"
        now_text = md_text(now) if now is not None else "the active version"
        lines.append(f"weights for agent {md_text(agent)}: {was_text} → {now_text}")
    return lines


def _scoring_diff(old: Config, new: Config) -> list[str]:
    a, b = old.scoring, new.scoring
    lines = []
    if [(n, w) for n, w in a.windows] != [(n, w) for n, w in b.windows]:
        lines.append(f"windows: {_windows(old)} → {_windows(new)}")
    if a.min_decisions != b.min_decisions:
        lines.append(f"floor: min_decisions {a.min_decisions} → {b.min_decisions}")
    for attr, label in _DURATIONS:
        x, y = getattr(a, attr), getattr(b, attr)
        if x != y:
            lines.append(f"{label}: {format_duration(x)} → {format_duration(y)}")
    if a.z != b.z:
        lines.append(f"interval: Wilson z {number(a.z)} → {number(b.z)}")
    if a.alert_below != b.alert_below:
        lines.append(f"alerts: score below {points(a.alert_below)} % → {points(b.alert_below)} %")
    if a.drop_alert != b.drop_alert:
        lines.append(f"alerts: drop of more than {points(a.drop_alert)} → {points(b.drop_alert)} points below 7d")
    return lines


def diff_lines(old: Config, new: Config) -> list[str]:
    """What changed from ``old`` to ``new``, one Markdown line per changed setting ([] when nothing did)."""
    lines = _weights_diff(old, new)
    lines += _set_diff("decision kinds", old.decision_kinds, new.decision_kinds)
    lines += _set_diff("state-change kinds", old.state_change_kinds, new.state_change_kinds)
    for name in _PHRASE_LISTS:
        lines += _set_diff(f"{name} phrases", getattr(old.phrases, name), getattr(new.phrases, name))
    if old.signals != new.signals:
        before = ", ".join(_signal(s) for s in old.signals) or "none"
        after = ", ".join(_signal(s) for s in new.signals) or "none"
        lines.append(f"signals: {before} → {after}")
    lines += _scoring_diff(old, new)
    for kind in dict.fromkeys([*old.verify.rates, *new.verify.rates]):
        x, y = old.verify.rates.get(kind), new.verify.rates.get(kind)
        if x != y:
            lines.append(f"verification sample rate {md_text(kind)}: {_opt(x)} → {_opt(y)}")
    return lines


def _opt(x: float | None) -> str:
    return "none" if x is None else number(x)

