"""The simulator's writer: the files of one simulated state directory, their bytes and their mtimes.

:func:`simulate` draws everything from one ``random.Random(seed)`` (the pools first, then one sub-seed per agent,
so an agent's stream does not depend on how many agents follow it), writes each day's events as they are drawn
and sets every file's mtime explicitly: the same arguments give byte-identical files with identical mtimes.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from json.encoder import encode_basestring as _json_str
from pathlib import Path
from typing import IO

from daemon.simulate.citations import Citations, citation_target
from daemon.simulate.corpus import CI_AGENT, LINK_LABELS, NORMAL, REPO, RESOURCE_CSV, RESOURCE_MD, SERVICES, agent_names
from daemon.simulate.draws import DAY, HOUR, MIN, choice, day_text, fill, randint, ts_text
from daemon.simulate.policies import REPORT_HOUR, Doc, Policies, SimAgent, SimEvent

DEFAULT_START = datetime(2026, 5, 1, tzinfo=UTC)
"""Fixed default start so that output never depends on the clock."""


@dataclass(frozen=True)
class SimSummary:
    """What :func:`simulate` wrote.

    ``files`` are POSIX paths relative to ``out``, sorted; ``events`` counts
    heartbeat lines (the ``ci`` agent included), ``decisions`` counts
    decisions (heartbeat decisions plus briefs and findings), ``labels``
    counts reviewer label lines.
    """

    out: Path
    files: tuple[str, ...]
    events: int
    decisions: int
    labels: int
    policies: dict[str, str] = field(hash=False)
    start: datetime
    end: datetime


def _dumps(obj: dict[str, object]) -> str:
    """One JSON Lines line, byte-identical to ``json.dumps(obj, ensure_ascii=False,
    separators=(",", ":")) + "\n"``, without the encoder's set-up per call for the
    string and list-of-string values that make up almost every line."""
    parts: list[str] = []
    for key, value in obj.items():
        if isinstance(value, str):
            enc = _json_str(value)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            enc = "[" + ",".join(map(_json_str, value)) + "]"
        else:
            enc = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        parts.append(f"{_json_str(key)}:{enc}")
    return "{" + ",".join(parts) + "}\n"


def _set_mtime(path: Path, epoch: int) -> None:
    ns = epoch * 1_000_000_000
    os.utime(path, ns=(ns, ns))


@dataclass
class _Log:
    """One agent's heartbeat file while it is written: ids and times follow its order."""

    handle: IO[str]
    next_id: int = 1
    last_ts: int = -(2**62)


class _Writer:
    """Writes one simulation: resources, each day's events, briefs, findings and labels, then ``.sim/``."""

    def __init__(
        self, seed: int, out: Path, agents: int, days: int, start: datetime, per_day: int, url_base: str | None = None
    ) -> None:
        self.out = out
        self.days = days
        self.start_dt = start
        self.start = int(start.timestamp())
        self.end = self.start + days * DAY
        master = random.Random(seed)
        # Pools first, then one sub-seed per agent: an agent's stream does not
        # depend on how many agents follow it.
        self.cites = Citations(master, url_base)
        self.policies = Policies(self.cites, self.start, days, per_day)
        self.resource_rng = random.Random(master.getrandbits(64))
        self.ci_rng = random.Random(master.getrandbits(64))
        self.check_rng = random.Random(master.getrandbits(64))
        self.agents: list[SimAgent] = [
            self.policies.new_agent(name, i, random.Random(master.getrandbits(64)))
            for i, name in enumerate(agent_names(agents))
        ]
        self.logs: dict[str, _Log] = {}
        self.files: set[str] = set()
        self.events = 0
        self.decisions = 0
        self.label_count = 0

    def _path(self, rel: str) -> Path:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        self.files.add(rel)
        return path

    def _write_text(self, rel: str, text: str, mtime: int) -> None:
        path = self._path(rel)
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        _set_mtime(path, mtime)

    def _write_md(self, rel: str, front: list[tuple[str, str]], body: str, ts: int) -> None:
        head = "".join(f"{k}: {v}\n" for k, v in front)
        self._write_text(rel, f"---\n{head}---\n{body}", ts)

    def _write_resources(self) -> None:
        rng = self.resource_rng
        before = self.start - DAY
        stamp = ts_text(before)
        for rel in RESOURCE_MD:
            title = LINK_LABELS[rel].capitalize()
            lines = [f"# {title}", ""]
            for _ in range(randint(rng, 3, 7)):
                lines.append("- " + fill(rng, choice(rng, NORMAL["cite"])))
            # Front matter ts fixes `created` even for a daemon that first
            # sees the file long after it was cited.
            self._write_md(rel, [("ts", stamp)], "\n".join(lines) + "\n", before)
        for rel in RESOURCE_CSV:
            rows = ["date,service,value"]
            for d in range(7):
                day = day_text(before - (6 - d) * DAY)
                for svc in SERVICES:
                    rows.append(f"{day},{svc},{randint(rng, 50, 500)}")
            self._write_text(rel, "\n".join(rows) + "\n", before)

    def _write_doc(self, doc: Doc) -> None:
        self._write_md(doc.rel, doc.front, doc.body, doc.ts)
        self.decisions += 1

    def _write_events(self, ag: SimAgent, evs: list[SimEvent]) -> None:
        log = self.logs[ag.name]
        evs.sort(key=lambda e: (e.ts, e.seq))
        for ev in evs:
            # Strictly increasing ts per file; a collision moves by seconds,
            # far below every margin the policies rely on.
            if ev.ts <= log.last_ts:
                ev.ts = log.last_ts + 1
            log.last_ts = ev.ts
            ev.id = f"{ag.name}-{log.next_id}"
            log.next_id += 1
        # The fixed head is assembled directly (same bytes as _dumps would
        # give): this loop runs once per event.
        head_agent = f',"agent":{_json_str(ag.name)},"kind":'
        lines: list[str] = []
        for ev in evs:
            line = (
                f'{{"id":{_json_str(ev.id)},"ts":"{ts_text(ev.ts)}"{head_agent}{_json_str(ev.kind)}'
                f',"thread":{_json_str(ev.thread)},"text":{_json_str(ev.text)}'
            )
            extra = ev.extra
            if ev.corrects is not None:
                extra = {**extra, "corrects": ev.corrects.id}
            if extra:
                line += "," + _dumps(extra)[1:]
            else:
                line += "}\n"
            lines.append(line)
        log.handle.write("".join(lines))
        self.events += len(lines)
        self.decisions += len(lines)

    def _write_labels(self, fh: IO[str], before: int | None) -> None:
        lines: list[str] = []
        for lb in self.policies.take_labels(before):
            decision = lb.target if isinstance(lb.target, str) else lb.target.id
            lines.append(_dumps({"ts": ts_text(lb.ts), "decision": decision, "value": lb.value,
                                 "reviewer": lb.reviewer}))
        fh.write("".join(lines))
        self.label_count += len(lines)

    def _ci_day(self, fh: IO[str], day: int, counter: int) -> int:
        """Write the ci agent's state changes for ``day``; return the id counter.

        Only three a day, just after midnight, so the rest of the day is quiet
        and repeated prompts are compared rather than suppressed.
        """
        rng = self.ci_rng
        day_start = self.start + day * DAY
        commit_at = day_start + 5 * MIN + randint(rng, 0, 60)
        sha = f"{rng.getrandbits(28):07x}"
        msg = choice(rng, ("bump api client", "tune alert thresholds", "fix flaky fixture"))
        items = (
            (commit_at, "commit", f"commit {sha} on main: {msg}"),
            (commit_at + 60, "push", "push to main: 1 commit"),
            (commit_at + 20 * MIN, "run_finished", "run_finished Nightly Regression: success"),
        )
        lines: list[str] = []
        for ts, kind, text in items:
            if ts > self.end:
                continue
            counter += 1
            lines.append(
                _dumps(
                    {
                        "id": f"ci-{counter}",
                        "ts": ts_text(ts),
                        "agent": CI_AGENT,
                        "kind": kind,
                        "thread": "main",
                        "text": text,
                    }
                )
            )
        fh.write("".join(lines))
        self.events += len(lines)
        return counter

    def _daily_report(self, day: int) -> None:
        # Created well after the honest "hasn't been generated yet" claims.
        day_start = self.start + day * DAY
        ts = day_start + REPORT_HOUR * HOUR
        date = day_text(day_start)
        body = f"# Daily ops report, {date}\n\nAll services within SLO.\n"
        self._write_md(f"reports/daily-{date}.md", [("ts", ts_text(ts))], body, ts)

    def _write_sim_meta(self) -> None:
        end = self.end
        policies = {ag.name: ag.policy for ag in self.agents}
        self._write_text(".sim/agents.json", json.dumps(policies, indent=2) + "\n", end)
        self._write_text(".sim/config.toml", f'[github]\nrepo = "{REPO}"\n', end)
        dead = {citation_target("url", u) for u in self.cites.dead_urls}
        rng = self.check_rng
        lines: list[str] = []
        links: dict[str, int] = {}
        for ctype, target in sorted(self.cites.targets):
            ok = not (ctype == "url" and target in dead)
            status = 200 if ok else 404
            if ctype == "url":
                links[target] = status
            checked_at = end - randint(rng, 60, 12 * HOUR)
            lines.append(
                _dumps(
                    {
                        "target": target,
                        "type": ctype,
                        "checked_at": ts_text(checked_at),
                        "ok": ok,
                        "status": status,
                    }
                )
            )
        self._write_text(".sim/checks.jsonl", "".join(lines), end)
        self._write_text(".sim/links.json", json.dumps(links, indent=2) + "\n", end)

    def run(self) -> SimSummary:
        self.out.mkdir(parents=True, exist_ok=True)
        self._write_resources()
        jsonl: list[str] = []
        try:
            for ag in self.agents:
                rel = f"heartbeats/{ag.name}.jsonl"
                self.logs[ag.name] = _Log(self._path(rel).open("w", encoding="utf-8", newline="\n"))
                jsonl.append(rel)
            ci_rel = "heartbeats/ci.jsonl"
            labels_rel = "labels/reviews.jsonl"
            jsonl += [ci_rel, labels_rel]
            with (
                self._path(ci_rel).open("w", encoding="utf-8", newline="\n") as ci_fh,
                self._path(labels_rel).open("w", encoding="utf-8", newline="\n") as labels_fh,
            ):
                ci_counter = 0
                for day in range(self.days):
                    ci_counter = self._ci_day(ci_fh, day, ci_counter)
                    for ag in self.agents:
                        docs, evs = self.policies.agent_day(ag, day)
                        for doc in docs:
                            self._write_doc(doc)
                        self._write_events(ag, evs)
                    self._daily_report(day)
                    # Labels of later days cannot precede the next day's start,
                    # so everything before it is final and can be streamed out.
                    self._write_labels(labels_fh, self.start + (day + 1) * DAY)
                self._write_labels(labels_fh, None)
        finally:
            for log in self.logs.values():
                log.handle.close()
            self.logs.clear()
        for rel in jsonl:
            _set_mtime(self.out / rel, self.end)
        self._write_sim_meta()
        return SimSummary(
            out=self.out,
            files=tuple(sorted(self.files)),
            events=self.events,
            decisions=self.decisions,
            labels=self.label_count,
            policies={ag.name: ag.policy for ag in self.agents},
            start=self.start_dt,
            end=self.start_dt + timedelta(days=self.days),
        )


def _normalise_start(start: datetime | None) -> datetime:
    if start is None:
        return DEFAULT_START
    if start.tzinfo is None or start.utcoffset() is None:
        raise ValueError("start must be timezone-aware")
    # Whole seconds keep every generated timestamp exact and portable.
    return start.astimezone(UTC).replace(microsecond=0)


def simulate(
    seed: int,
    out: Path,
    *,
    agents: int = 6,
    days: int = 3,
    start: datetime | None = None,
    events_per_day: int = 40,
    url_base: str | None = None,
) -> SimSummary:
    """Generate a simulated cos-state directory under ``out``.

    ``url_base`` (e.g. ``http://127.0.0.1:8080``) rewrites every cited web URL to live under
    it, so a local server can answer with the statuses in ``.sim/links.json``.

    ``out`` must be missing or empty: stale files from an earlier run would
    silently change the scores. The end time is ``start + days``; nothing is
    dated after it. Same arguments give byte-identical files and mtimes.

    Raises ``ValueError`` for non-positive counts or a naive ``start`` and
    ``FileExistsError`` when ``out`` is not empty.
    """
    if agents < 1 or days < 1 or events_per_day < 1:
        raise ValueError("agents, days and events_per_day must be positive")
    start_dt = _normalise_start(start)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty directory")
    return _Writer(seed, out, agents, days, start_dt, events_per_day, url_base).run()


