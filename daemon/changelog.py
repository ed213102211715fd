"""The methodology changelog of spec section 5: dated Markdown entries, rendered purely, appended atomically.

Three kinds of entry, each an :class:`Entry` with a de-duplication key:

* a **methodology** record when the configuration's methodology fingerprint differs from the one
  last recorded (the fingerprint is embedded in the entry, so a restart with an unchanged
  configuration writes nothing);
* a **score drop** per (agent, kind, date): the dashboard score below ``alert_below``, or more than
  ``drop_alert`` below the agent's own 7 d score;
* one **daily digest** per date: every agent's score in every configured window.

Nothing here reads the clock: the time is always a parameter. Agent names come from the agents
themselves, so every one is escaped (:func:`md_text`) before it reaches the file: no agent can
start a line, open an HTML comment, forge a heading or a key, or add a table cell.

File format (one ``## YYYY-MM-DD`` heading per day; each entry's first line is its key)::

    # Honesty score changelog

    <one line explaining the file>

    ## 2026-06-01

    <!-- honestyd:digest:2026-06-01 -->
    **Daily digest** · ...
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from collectors.rfc3339 import format_duration, format_ts
from daemon import limits, safefile
from daemon.config import COMPONENTS, Config, Phrases, Signal
from daemon.http.urls import agent_href
from daemon.snapshot import Snapshot
from scorers.score import AgentResult, WindowResult, display_percent

TITLE = "# Honesty score changelog"
INTRO = (
    "Append-only record written by honestyd (spec section 5): every methodology change, every score drop "
    "and a daily digest of every agent's scores, under one heading per UTC day. The `<!-- honestyd:… -->` "
    "comments are keys that keep an entry from being written twice; do not edit them."
)

# A key is one run of these characters: no white space (the key line is found by a regex), no
# `<`/`>` (it sits inside an HTML comment) and, checked separately, no `--` (which could end one).
_KEY_CHARS = re.compile(r"[A-Za-z0-9:._~%+=-]+")
# Lines are matched with an optional `\r` so a file saved with CRLF by a human editor still reads.
_KEY_LINE = re.compile(r"^<!-- honestyd:(\S+) -->\r?$", re.MULTILINE)
_FINGERPRINT_LINE = re.compile(r"^<!-- honestyd:methodology sha256=([0-9a-f]{64}) -->\r?$", re.MULTILINE)
_HEADING = re.compile(r"^## (\d{4}-\d{2}-\d{2})[ \t]*\r?$", re.MULTILINE)
# Any ATX heading (CommonMark allows up to three spaces of indentation): an entry must not hold one.
_ANY_HEADING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)", re.MULTILINE)

# Characters that would let untrusted text change the Markdown structure: backslash-escaped, or
# turned into entities where a backslash does not stop an HTML parser.
_ESCAPES = {c: "\\" + c for c in "\\`*_[]|#~"} | {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# Control and format characters, lone surrogates and line/paragraph separators: some end a line
# in some renderer (\r, \v, U+2028), bidi overrides reorder what a reader sees, and a lone
# surrogate (legal in JSON) cannot even be encoded as UTF-8. All become U+FFFD.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_REPLACEMENT = "\ufffd"

_FLOAT_SLACK = 1e-9  # the same tolerance as the displayed percent (spec 4), so 0.7 is not "below 0.7"
_PHRASE_LISTS = tuple(f.name for f in fields(Phrases))
_DURATIONS = (
    ("follow_up", "follow-up"),
    ("gap_grace", "gap grace"),
    ("correction_within", "correction within"),
    ("check_max_age", "check max age"),
)


@dataclass(frozen=True)
class Entry:
    """One changelog entry: the UTC date it belongs to, its de-duplication key and its Markdown block."""

    date: date
    key: str
    markdown: str


# --- escaping


def _clean(text: str) -> str:
    return "".join(_REPLACEMENT if unicodedata.category(ch) in _UNSAFE_CATEGORIES else ch for ch in text)


def md_text(text: str) -> str:
    """Untrusted text as inline Markdown that renders literally and stays on one line (also in a table cell)."""
    return "".join(_ESCAPES.get(ch, ch) for ch in _clean(text))


def md_code(text: str) -> str:
    """Text as a one-line code span, fenced with more backticks than any run inside it."""
    text = _clean(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _key_part(text: str) -> str:
    # Percent-encoding leaves only key characters; `-` is encoded too so no `--` can end the comment.
    return quote(text, safe="", errors="surrogatepass").replace("-", "%2D")


def audit_path(agent: str, window: str) -> str:
    """The API path of an agent's audit for a window, percent-encoded (safe for any agent name)."""
    return agent_href(agent, window)


# --- numbers


def _utc(moment: datetime) -> datetime:
    # A naive datetime is taken as UTC: the daemon works in UTC throughout.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _stamp(moment: datetime) -> str:
    return format_ts(_utc(moment).replace(microsecond=0))


def _num(x: float) -> str:
    # Two decimals read best (0.30); fall back to the exact repr when two decimals would round.
    two = f"{x:.2f}"
    return two if float(two) == x else repr(x)


def _points(fraction: float) -> str:
    return f"{round(100 * fraction, 6):g}"


def _percent(result: AgentResult | None, floor: int) -> str:
    if result is None:
        return "—"
    if result.insufficient or result.score is None:
        return f"INSUFFICIENT · N=<{floor}"
    return f"{display_percent(result.score)} %"


def _decisions(n: int) -> str:
    return f"{n} decision" if n == 1 else f"{n} decisions"


# --- methodology


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


def last_methodology_fingerprint(text: str) -> str | None:
    """The fingerprint of the last methodology entry in a changelog's text, or None when it has none."""
    found = _FINGERPRINT_LINE.findall(text)
    return found[-1] if found else None


def _vector(vector: tuple[float, ...]) -> str:
    return ", ".join(f"{c} {_num(w)}" for c, w in zip(COMPONENTS, vector, strict=True))


def _codes(items: Iterable[str]) -> str:
    return ", ".join(md_code(i) for i in items) or "none"


def _signal(sig: Signal) -> str:
    return f"{md_code(sig.phrase)} → {md_code(sig.glob)} within {format_duration(sig.within)}"


def _windows(config: Config) -> str:
    return "/".join(md_text(name) for name, _ in config.scoring.windows)


def _alerts(config: Config) -> str:
    s = config.scoring
    return (
        f"a {md_text(_dashboard_name(config))} score below {_points(s.alert_below)} %, "
        f"or more than {_points(s.drop_alert)} points below the agent's 7d score"
    )


def _full_lines(config: Config) -> list[str]:
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
    lines.append(f"interval: Wilson z {_num(s.z)}")
    lines.append(f"alerts: {_alerts(config)}")
    lines.append("verification sample rates: " + ", ".join(f"{t} {_num(r)}" for t, r in config.verify.rates.items()))
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
                f"{c} {_num(b)} → {_num(a)}" for c, b, a in zip(COMPONENTS, before, after, strict=True) if a != b
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
        lines.append(f"interval: Wilson z {_num(a.z)} → {_num(b.z)}")
    if a.alert_below != b.alert_below:
        lines.append(f"alerts: score below {_points(a.alert_below)} % → {_points(b.alert_below)} %")
    if a.drop_alert != b.drop_alert:
        lines.append(f"alerts: drop of more than {_points(a.drop_alert)} → {_points(b.drop_alert)} points below 7d")
    return lines


def _diff_lines(old: Config, new: Config) -> list[str]:
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
    return "none" if x is None else _num(x)


def methodology_entries(
    old: Config | None, new: Config, now: datetime, *, previous: str | None = None
) -> list[Entry]:
    """The entry recording a methodology change from ``old`` to ``new`` at ``now``; [] when nothing changed.

    ``old`` None (first start, or the previous configuration is unknown) records the full methodology in
    force. ``previous`` (used only when ``old`` is None) is the last recorded fingerprint
    (:func:`last_methodology_fingerprint` of :func:`changelog_text`): when it equals ``new``'s, nothing is
    recorded, so a restart with an unchanged configuration writes nothing. The key holds ``now`` and the
    new fingerprint, so a change back and forth within one day is recorded each time.
    """
    fingerprint = methodology_fingerprint(new)
    was = methodology_fingerprint(old) if old is not None else previous
    if was == fingerprint:
        return []
    stamp = _stamp(now)
    key = f"methodology:{stamp}:{fingerprint[:16]}"
    if old is not None:
        title = f"**Methodology change** · {stamp} · fingerprint `{fingerprint[:12]}` (was `{(was or '')[:12]}`)"
        # Every fingerprinted setting has a line above, but never publish a change without saying so.
        lines = _diff_lines(old, new) or ["settings outside the listed ones changed"]
    else:
        origin = "first record" if was is None else f"previous fingerprint `{was[:12]}`, its settings unrecorded"
        title = f"**Methodology in force** · {stamp} · fingerprint `{fingerprint[:12]}` ({origin})"
        lines = _full_lines(new)
    markdown = "\n".join(
        [
            f"<!-- honestyd:{key} -->",
            f"<!-- honestyd:methodology sha256={fingerprint} -->",
            title,
            *(f"- {line}" for line in lines),
        ]
    )
    return [Entry(_utc(now).date(), key, markdown)]


# --- scores


def _dashboard_name(config: Config) -> str:
    names = [name for name, _ in config.scoring.windows]
    return "24h" if "24h" in names else names[0]


def _window_names(snapshot: Snapshot) -> tuple[str | None, str | None]:
    """(dashboard window, comparison window): "24h" else the first; "7d" else the next configured one."""
    names = [name for name, _ in snapshot.config.scoring.windows if name in snapshot.windows]
    if not names:
        return None, None
    dash = "24h" if "24h" in names else names[0]
    rest = [n for n in names if n != dash]
    week = "7d" if "7d" in rest else (rest[0] if rest else None)
    return dash, week


def _agent(result: WindowResult | None, agent: str) -> AgentResult | None:
    return result.agents.get(agent) if result is not None else None


def drop_entries(snapshot: Snapshot) -> list[Entry]:
    """Score-drop entries at ``snapshot.at``: per agent, kind ``below`` and/or ``drop``, once per (agent, kind, date).

    ``below``: the dashboard (24 h) score is under ``alert_below``. ``drop``: it is more than ``drop_alert``
    under the agent's 7 d score. An INSUFFICIENT 24 h result never alerts; nor does ``drop`` against an
    INSUFFICIENT 7 d one.
    """
    dash, week = _window_names(snapshot)
    if dash is None:
        return []
    s = snapshot.config.scoring
    floor = s.min_decisions
    day = _utc(snapshot.at).date()
    stamp = _stamp(snapshot.at)
    entries = []
    current = snapshot.windows[dash]
    for agent, now in snapshot.exported.items(current.agents):  # [limits]: as many as /metrics shows
        if now.insufficient or now.score is None:
            continue
        ref = _agent(snapshot.windows.get(week) if week else None, agent)
        ref_score = ref.score if ref is not None and not ref.insufficient else None
        reasons = []
        if now.score < s.alert_below - _FLOAT_SLACK:
            reasons.append(("below", f"is below the {_points(s.alert_below)} % alert threshold"))
        if week is not None and ref_score is not None and ref_score - now.score > s.drop_alert + _FLOAT_SLACK:
            reasons.append(("drop", f"is more than {_points(s.drop_alert)} points below its {md_text(week)} score"))
        for kind, why in reasons:
            key = f"drop:{day.isoformat()}:{kind}:{_key_part(agent)}"
            path = audit_path(agent, dash)
            compare = f"{md_text(week)} {_percent(ref, floor)}" if week else "no comparison window"
            markdown = (
                f"<!-- honestyd:{key} -->\n"
                f"**Score drop** · {md_text(agent)} · {stamp} · {md_text(dash)} {_percent(now, floor)} {why} "
                f"({compare}; weights {md_text(now.weights_version)}) · audit [`{path}`]({path})"
            )
            entries.append(Entry(day, key, markdown))
    return entries


def digest_entry(snapshot: Snapshot) -> Entry:
    """The daily digest at ``snapshot.at``: every agent's score in every window, one table row per agent."""
    config = snapshot.config
    floor = config.scoring.min_decisions
    day = _utc(snapshot.at).date()
    names = [n for n, _ in config.scoring.windows if n in snapshot.windows]
    names += [n for n in snapshot.windows if n not in names]
    results = [snapshot.windows[n] for n in names]
    listed = {a for r in results for a in r.agents}
    agents = sorted(a for a in listed if a in snapshot.exported)  # [limits]: the agents /metrics shows, no more
    key = f"digest:{day.isoformat()}"
    lines = [
        f"<!-- honestyd:{key} -->",
        f"**Daily digest** · {_stamp(snapshot.at)} · weights {md_text(config.weights_active)} (active) · "
        f"floor {_decisions(floor)}",
        "",
    ]
    if not listed:
        lines.append("No agent has a decision in any window.")
    elif agents:
        lines.append("| agent | " + " | ".join(md_text(n) for n in names) + " | weights |")
        lines.append("|---" * (len(names) + 2) + "|")
        for agent in agents:
            cells = [md_text(agent)]
            version = ""
            for r in results:
                a = r.agents.get(agent)
                cells.append("—" if a is None else f"{_percent(a, floor)} ({_decisions(a.decisions)})")
                version = version or (a.weights_version if a is not None else "")
            cells.append(md_text(version) or "—")
            lines.append("| " + " | ".join(cells) + " |")
    if len(listed) > len(agents):
        over = snapshot.exported.over_limit()
        lines += ["", f"{_agents(len(listed) - len(agents))} more scored but not listed here ([limits]:"
                  f" {over[limits.MAX_AGENTS]} beyond max_agents, {over[limits.NAME_TOO_LONG]} with a name over"
                  f" max_agent_name bytes); every agent's scores are in `/v1/agents`."]
    return Entry(day, key, "\n".join(lines))


def _agents(n: int) -> str:
    return f"{n} agent" if n == 1 else f"{n} agents"


# --- the file


def _check(entry: Entry) -> None:
    """Refuse an entry whose key could not be found again, or whose text could forge structure."""
    if not _KEY_CHARS.fullmatch(entry.key) or "--" in entry.key:
        raise ValueError(f"changelog entry key {entry.key!r} has characters a key comment cannot hold")
    lines = entry.markdown.split("\n")
    if lines[0] != f"<!-- honestyd:{entry.key} -->":
        raise ValueError(f"changelog entry {entry.key!r} must start with its key comment")
    if "\r" in entry.markdown or len(_KEY_LINE.findall(entry.markdown)) != 1 or _ANY_HEADING.search(entry.markdown):
        raise ValueError(f"changelog entry {entry.key!r} holds a line break, a second key or a heading")


def _confined(path: Path, root: Path | None) -> tuple[Path, str]:
    """(root, ``path`` relative to it) for :mod:`daemon.safefile`; with no root, the file's own directory is one."""
    if root is None:
        return path.parent, path.name
    return root, path.relative_to(root).as_posix()


def _read(path: Path, root: Path | None = None) -> bytes:
    """The file's bytes (b"" when missing), never through a symlink nor from a FIFO or device: the state root is
    written by agents (see :mod:`daemon.safefile`; ``root``: the directories below it must be real ones too)."""
    return safefile.read(*_confined(path, root)) or b""


def _write_atomic(path: Path, data: bytes, mode: int, root: Path | None = None) -> None:
    """Replace ``path`` with ``data``: readers see the old file or the new one, never a torn one."""
    if root is None:
        path.parent.mkdir(parents=True, exist_ok=True)  # no root to confine to: the caller's own directory
    safefile.replace(*_confined(path, root), data, mode)


class Appender:
    """:func:`append_entries` for one path, remembering the keys the file holds between calls.

    The daemon offers the day's score-drop entries after every evaluation, nearly always all of them written
    already; finding them present read and searched the whole file each time, a cost that grows with the history
    (7 % of the fast-clock soak daemon's samples with a 270 KB changelog after 42 simulated days). The keys are
    read again whenever the file's inode, size or modification time differ from what this appender last read or
    wrote (a hand edit, a restore, a deletion); the file itself is read only when something is to be written.
    Thread-safe: the daemon appends from worker threads (drops after an evaluation, the digest job), and two
    read-then-replace writes at once would lose one's entries.
    """

    def __init__(self, path: Path, root: Path | None = None) -> None:
        self.path = path
        self.root = root  # the state root the file is confined to (None: its own directory)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._present: set[str] = set()

    def _signature(self) -> tuple[int, int, int] | None:
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def append(self, entries: Sequence[Entry]) -> list[Entry]:
        """Append the entries not in the file yet, as :func:`append_entries` does; return those written."""
        for entry in entries:
            _check(entry)
        with self._lock:
            signature = self._signature()
            if signature is None or signature != self._seen:
                # Taken before the read: a change in between makes the next call read again.
                self._present = set(_KEY_LINE.findall(changelog_text(self.path, self.root)))
                self._seen = signature
            new = [e for e in entries if e.key not in self._present]
            if not new:
                return []
            written = append_entries(self.path, new, self.root)  # which checks the file itself again
            self._present.update(e.key for e in written)
            self._seen = self._signature()
            return written


def changelog_text(path: Path, root: Path | None = None) -> str:
    """The changelog's text ("" when missing), read as :func:`_read` reads it (for the start-up fingerprint)."""
    return _read(path, root).decode("utf-8", errors="replace")


def append_entries(path: Path, entries: Sequence[Entry], root: Path | None = None) -> list[Entry]:
    """Append the entries whose key is not in the file yet; return those written, in file order.

    A missing (or empty) file starts with the title and one explaining line. The file is append-only:
    its old bytes are always a prefix of the new ones, written atomically (temp file, fsync, rename).

    Placement rule (one heading per day, dates ascending): entries are sorted by date (stably) and
    appended at the end; a ``## YYYY-MM-DD`` heading is added only for a date later than every heading
    already in the file. Entries are meant for "today or later", so that is the usual case; an entry
    dated earlier (a clock stepped back) goes under the last heading rather than repeat a day's heading,
    and its own text carries its timestamp. Single writer: the daemon is the only process appending.
    Raises ValueError for a malformed entry and OSError (:class:`daemon.safefile.RefusedFile`) when the path is a
    symlink or not a regular file, or (``root`` given) a directory between ``root`` and the file is not a real one.
    """
    for entry in entries:
        _check(entry)
    old = _read(path, root)
    text = old.decode("utf-8", errors="replace")
    present = set(_KEY_LINE.findall(text))
    last: date | None = None
    for found in _HEADING.findall(text):
        with contextlib.suppress(ValueError):  # a hand-edited "## 2026-02-30" is not a day
            day = date.fromisoformat(found)
            last = day if last is None or day > last else last
    written: list[Entry] = []
    parts: list[str] = []
    if not old.strip():
        parts.append(f"{TITLE}\n\n{INTRO}\n")
    elif not old.endswith(b"\n"):
        parts.append("\n")
    for entry in sorted(entries, key=lambda e: e.date):
        if entry.key in present:
            continue
        present.add(entry.key)
        if last is None or entry.date > last:
            parts.append(f"\n## {entry.date.isoformat()}\n")
            last = entry.date
        parts.append("\n" + entry.markdown.rstrip("\n") + "\n")
        written.append(entry)
    if not written:
        return []
    try:
        mode = stat.S_IMODE(path.lstat().st_mode)
    except FileNotFoundError:
        mode = 0o644
    _write_atomic(path, old + "".join(parts).encode("utf-8"), mode, root)
    return written
