"""The agents' policies: what each simulated agent decides, day by day, and how reviewers label it.

Every agent follows a *policy* that is good on every component of the honesty score (SCORING.md section 3)
except, deliberately, its own one (see :mod:`daemon.simulate`). :class:`Policies` holds what the agents share
(the source pools, the labels not written yet) and turns one agent-day into the documents (briefs, findings) and
heartbeat events the writer then writes; every draw comes from the agent's own seeded stream, in a fixed order.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from daemon.simulate.citations import Citations, Cite
from daemon.simulate.corpus import (
    ALL_PROMPTS,
    CORRECTIONS,
    DOUBLE_DOWNS,
    FABRICATED,
    FINDING_TOPICS,
    GAP_CLAIMS,
    KIND_WEIGHTS,
    NODATA,
    NODATA_CORRECTION,
    NODATA_REFUSAL,
    NORMAL,
    REFUSALS,
    RESOURCE_CSV,
    RESOURCE_MD,
    REVIEWERS,
    SERVICES,
    TOPICS,
    UNCITED_KIND_WEIGHTS,
)
from daemon.simulate.draws import DAY, HOUR, MIN, choice, day_text, fill, randint, ts_text, weighted

POLICY_CYCLE: tuple[str, ...] = (
    "honest",
    "fabricator",
    "bare_refuser",
    "drifter",
    "doubler",
    "sparse",
    "honest",
    "nocite",
    "nodata",
    "always_no",
)


def policy_for(index: int) -> str:
    """Return the policy of the agent at position ``index`` (round-robin)."""
    return POLICY_CYCLE[index % len(POLICY_CYCLE)]


# Refusals stay this far before the end so their follow-up (5 min) is decided.
REFUSAL_MARGIN = 7 * MIN
# Down labels stay this far before the end so self-correction (1 h) is decided.
DOWN_LABEL_MARGIN = 65 * MIN
# A gap claim about the daily report is only made before this hour; the report
# is created at REPORT_HOUR, well past the 5 min grace.
GAP_REPORT_LAST_HOUR = 19
REPORT_HOUR = 20


@dataclass
class SimEvent:
    """A heartbeat event before its id is known (ids follow file order)."""

    ts: int
    seq: int
    kind: str
    thread: str
    text: str
    extra: dict[str, object]
    corrects: SimEvent | None = None
    id: str = ""


@dataclass
class SimLabel:
    """A reviewer's label of a decision (an event, or a brief or finding by its path), written in time order."""

    ts: int
    seq: int
    target: SimEvent | str
    value: str
    reviewer: str


@dataclass
class SimAgent:
    """One agent: its policy, its own random stream and what it remembers between decisions."""

    name: str
    policy: str
    rng: random.Random
    prompts: list[tuple[str, str]]
    prompt_cites: list[tuple[Cite, ...]]
    thread_no: int = 100
    finding_no: int = 0
    drift_last: dict[int, Cite] = field(default_factory=dict)


@dataclass(frozen=True)
class Doc:
    """A Markdown decision (a brief or a finding) to write: its path, front matter, body and time."""

    rel: str
    front: list[tuple[str, str]]
    body: str
    ts: int


class Policies:
    """The decisions of every agent of one simulation from ``start`` for ``days`` days, ``per_day`` a day each."""

    def __init__(self, cites: Citations, start: int, days: int, per_day: int) -> None:
        self.cites = cites
        self.start = start
        self.days = days
        self.per_day = per_day
        self.end = start + days * DAY
        self.label_seq = 0
        self.pending_labels: list[SimLabel] = []

    def new_agent(self, name: str, index: int, rng: random.Random) -> SimAgent:
        """The agent at position ``index``, drawing from ``rng``: its policy, and the prompts it answers."""
        policy = policy_for(index)
        # Few prompts, so repeats land inside the 24 h window.
        n_prompts = 3 if policy == "drifter" else 6
        prompts = rng.sample(ALL_PROMPTS, n_prompts)
        prompt_cites = [self.cites.pick(rng, policy) for _ in prompts]
        return SimAgent(name, policy, rng, prompts, prompt_cites)

    def take_labels(self, before: int | None) -> list[SimLabel]:
        """The labels dated before ``before`` (all with None), in time order; they are forgotten here."""
        self.pending_labels.sort(key=lambda lb: (lb.ts, lb.seq))
        if before is None:
            taken, self.pending_labels = self.pending_labels, []
            return taken
        taken = [lb for lb in self.pending_labels if lb.ts < before]
        self.pending_labels = [lb for lb in self.pending_labels if lb.ts >= before]
        return taken

    def agent_day(self, ag: SimAgent, day: int) -> tuple[list[Doc], list[SimEvent]]:
        """The documents and heartbeat events of ``ag`` on simulated day ``day`` (0 is the first)."""
        rng = ag.rng
        day_start = self.start + day * DAY
        day_end = day_start + DAY
        evs: list[SimEvent] = []
        if ag.policy == "sparse":
            if day == self.days - 1:
                # Three decisions, all in the last 12 h before the end.
                for offset in sorted(rng.sample(range(HOUR, 11 * HOUR), 3), reverse=True):
                    ts = self.end - offset
                    extra: dict[str, object] = {}
                    kind = ("dm", "cite", "resolution")[len(evs)]
                    text = fill(rng, choice(rng, NORMAL[kind]))
                    text = self.cites.attach(rng, text, self.cites.pick(rng, "honest"), extra)
                    evs.append(self._event(ts, kind, self._new_thread(ag), text, extra))
            return [], evs

        jitter = max(1, self.per_day // 10)
        total = max(1, self.per_day + randint(rng, -jitter, jitter + 1))
        n_findings = min(3, total // 20)
        n_events = max(0, total - 1 - n_findings)
        docs = [self._brief(ag, day_start)]
        # Sorted, so finding numbers follow time.
        for at in sorted(randint(rng, 30 * MIN, DAY - 30 * MIN) for _ in range(n_findings)):
            docs.append(self._finding(ag, day_start + at))

        # Slots spread evenly with jitter, 30 s clear of the day's edges.
        span = DAY - 60
        down_rate = max(0.08, 6 / max(1, n_events)) if ag.policy == "doubler" else 0.015
        for i in range(n_events):
            ts = day_start + 30 + int((i + rng.uniform(0.05, 0.95)) * span / max(1, n_events))
            group = self._decision(ag, ts, day_start)
            evs.extend(group)
            primary = group[0]
            if len(group) > 1 or primary.kind == "refusal":
                self._maybe_up(ag, primary.ts, primary)
                continue
            if rng.random() < down_rate:
                label_at = ts + randint(rng, 5 * MIN, 40 * MIN)
                reply_at = label_at + randint(rng, 2 * MIN, 30 * MIN)
                if label_at <= self.end - DOWN_LABEL_MARGIN and reply_at < day_end - 60:
                    self._label(label_at, primary, "down", choice(rng, REVIEWERS))
                    evs.append(self._reply(ag, primary, reply_at))
                    continue
            self._maybe_up(ag, primary.ts, primary)
        return docs, evs

    def _new_thread(self, ag: SimAgent) -> str:
        # Threads are unique per agent, so the only later decision of the
        # agent in a labelled decision's thread is the deliberate reply.
        ag.thread_no += 1
        return f"{choice(ag.rng, TOPICS)}-{ag.thread_no}"

    def _event(
        self,
        ts: int,
        kind: str,
        thread: str,
        text: str,
        extra: dict[str, object] | None = None,
    ) -> SimEvent:
        self.label_seq += 1
        return SimEvent(ts, self.label_seq, kind, thread, text, extra if extra is not None else {})

    def _decision(self, ag: SimAgent, ts: int, day_start: int) -> list[SimEvent]:
        """One primary decision at ``ts`` plus any follow-up it triggers."""
        rng = ag.rng
        policy = ag.policy
        thread = self._new_thread(ag)
        extra: dict[str, object] = {}
        roll = rng.random()
        roll2 = rng.random()
        can_refuse = ts <= self.end - REFUSAL_MARGIN

        if policy == "always_no" or (policy == "bare_refuser" and can_refuse and roll < 0.30):
            if policy == "always_no":
                return [self._event(ts, "refusal", thread, "No.")]
            # Bare (no reason, no alternatives) but still citing the request it refuses, so only
            # refusal_correctness suffers and citation_rate stays the honest agents'.
            text = self.cites.attach(rng, "No.", self.cites.pick(rng, "honest"), extra)
            return [self._event(ts, "refusal", thread, text, extra)]
        if policy != "bare_refuser" and can_refuse and roll < 0.10:
            return self._refusal(ag, ts, thread)

        if policy == "nodata":
            text = fill(rng, choice(rng, NODATA))
            if rng.random() < 0.7:
                # The data does exist: these are false gaps, not surfaced ones.
                extra["subject"] = [choice(rng, RESOURCE_CSV + RESOURCE_MD)]
            kind = weighted(rng, UNCITED_KIND_WEIGHTS)
            if kind == "tool_call":
                text = f"tool_call query_metrics {choice(rng, SERVICES)}: no data returned."
            self._maybe_prompt(ag, extra, uncited=True)
            return [self._event(ts, kind, thread, text, extra)]

        if policy != "fabricator" and roll2 < 0.05:
            gap = self._gap_claim(ag, ts, day_start, thread)
            if gap is not None:
                return [gap]

        if policy == "fabricator" and roll2 < 0.45:
            text = fill(rng, choice(rng, FABRICATED))
            cites: tuple[Cite, ...] = (choice(rng, self.cites.bad_pool),)
            if rng.random() < 0.3:
                cites += (choice(rng, self.cites.live_pool),)
            kind = choice(rng, ("dm", "cite", "resolution"))
            text = self.cites.attach(rng, text, cites, extra)
            return [self._event(ts, kind, thread, text, extra)]

        uncited = policy == "nocite"
        if rng.random() < (0.6 if policy == "drifter" else 0.2):
            idx = randint(rng, 0, len(ag.prompts))
            question, answer = ag.prompts[idx]
            kind = choice(rng, ("dm", "resolution") if uncited else ("dm", "cite", "resolution"))
            text = fill(rng, answer)
            extra["prompt"] = self._prompt_variant(rng, question)
            # Honest-like agents always give a prompt the same sources; the
            # drifter picks a fresh one every time.
            cites = (self._drift_cite(ag, idx),) if policy == "drifter" else ag.prompt_cites[idx]
        else:
            kind = weighted(rng, UNCITED_KIND_WEIGHTS if uncited else KIND_WEIGHTS)
            text = fill(rng, choice(rng, NORMAL[kind]))
            cites = () if uncited else self.cites.pick(rng, policy)
        text = self.cites.attach(rng, text, cites, extra)
        return [self._event(ts, kind, thread, text, extra)]

    def _maybe_prompt(self, ag: SimAgent, extra: dict[str, object], *, uncited: bool) -> None:
        # Uncited agents answer repeats "consistently" (both sets empty).
        if uncited and ag.rng.random() < 0.3:
            extra["prompt"] = self._prompt_variant(ag.rng, choice(ag.rng, ag.prompts)[0])

    @staticmethod
    def _prompt_variant(rng: random.Random, prompt: str) -> str:
        # Case and white-space variants hash to the same key (spec 3.5).
        roll = randint(rng, 0, 5)
        if roll == 0:
            return prompt.capitalize()
        if roll == 1:
            return prompt.replace(" ", "  ", 1)
        if roll == 2:
            return f" {prompt} "
        return prompt

    def _drift_cite(self, ag: SimAgent, idx: int) -> Cite:
        previous = ag.drift_last.get(idx)
        pick = choice(ag.rng, self.cites.live_pool)
        while previous is not None and self.cites.target(pick) == self.cites.target(previous):
            pick = choice(ag.rng, self.cites.live_pool)
        ag.drift_last[idx] = pick
        return pick

    def _refusal(self, ag: SimAgent, ts: int, thread: str) -> list[SimEvent]:
        rng = ag.rng
        extra: dict[str, object] = {}
        if ag.policy == "nodata":
            text = fill(rng, NODATA_REFUSAL)
            extra["reason"] = "no data to check"
            extra["alternatives"] = ["wait for the next export"]
        else:
            template, reason, alternatives = choice(rng, REFUSALS)
            text = fill(rng, template)
            extra["reason"] = reason
            extra["alternatives"] = list(alternatives)
        if ag.policy in ("nocite", "nodata"):
            # An agent that never cites leaves no follow-up artifact either: no issue, no file.
            return [self._event(ts, "refusal", thread, text, extra)]
        issue = Cite("issue", choice(rng, self.cites.issues))
        self.cites.targets.add(self.cites.target(issue))
        text = f"{text} Tracking in {issue.value}."
        if rng.random() < 0.5:
            extra["citations"] = [issue.value]
        return [self._event(ts, "refusal", thread, text, extra)]

    def _gap_claim(self, ag: SimAgent, ts: int, day_start: int, thread: str) -> SimEvent | None:
        rng = ag.rng
        template, subject, is_report = choice(rng, GAP_CLAIMS)
        if is_report and ts >= day_start + GAP_REPORT_LAST_HOUR * HOUR:
            return None
        date = day_text(day_start)
        extra: dict[str, object] = {"subject": [subject.format(date=date)]}
        text = template.format(date=date)
        if ag.policy != "nocite":
            text = self.cites.attach(rng, text, self.cites.pick(rng, ag.policy), extra)
        return self._event(ts, choice(rng, ("dm", "resolution")), thread, text, extra)

    def _reply(self, ag: SimAgent, target: SimEvent, ts: int) -> SimEvent:
        """The agent's reply to a ``down`` label on ``target``."""
        rng = ag.rng
        extra: dict[str, object] = {}
        if ag.policy == "doubler":
            text = fill(rng, choice(rng, DOUBLE_DOWNS))
            text = self.cites.attach(rng, text, self.cites.pick(rng, ag.policy), extra)
            return self._event(ts, "dm", target.thread, text, extra)
        if ag.policy == "nodata":
            text = fill(rng, NODATA_CORRECTION)
        else:
            text = fill(rng, choice(rng, CORRECTIONS))
            text = self.cites.attach(rng, text, self.cites.pick(rng, ag.policy), extra)
        ev = self._event(ts, "dm", target.thread, text, extra)
        ev.corrects = target
        return ev

    def _label(self, ts: int, target: SimEvent | str, value: str, reviewer: str) -> None:
        self.label_seq += 1
        self.pending_labels.append(SimLabel(ts, self.label_seq, target, value, reviewer))

    def _maybe_up(self, ag: SimAgent, ts: int, target: SimEvent | str) -> None:
        rng = ag.rng
        rate = 0.12
        if ag.policy == "honest" and ts > self.end - DAY:
            rate = 0.30
        if rng.random() < rate:
            at = ts + randint(rng, 60, 3 * HOUR)
            if at <= self.end:
                self._label(at, target, "up", choice(rng, REVIEWERS))

    def _md_lines(self, ag: SimAgent, count: int) -> tuple[list[str], list[str]]:
        """Bullet lines for a brief or finding, and its subject paths."""
        rng = ag.rng
        lines: list[str] = []
        subjects: list[str] = []
        for _ in range(count):
            scratch: dict[str, object] = {}
            if ag.policy == "nodata":
                lines.append("- " + fill(rng, choice(rng, NODATA)))
                if not subjects:
                    subjects.append(choice(rng, RESOURCE_CSV))
                continue
            if ag.policy == "fabricator" and rng.random() < 0.5:
                text = fill(rng, choice(rng, FABRICATED))
                cites: tuple[Cite, ...] = (choice(rng, self.cites.bad_pool),)
            else:
                text = fill(rng, choice(rng, NORMAL["cite"]))
                cites = self.cites.pick(rng, ag.policy)
            # A Markdown body has no citations field: always cite in the text.
            lines.append("- " + self.cites.attach(rng, text, cites, scratch, in_text=True))
        return lines, subjects

    def _brief(self, ag: SimAgent, day_start: int) -> Doc:
        rng = ag.rng
        ts = day_start + 7 * HOUR + randint(rng, 0, HOUR)
        date = day_text(day_start)
        rel = f"briefs/{ag.name}-{date}.md"
        lines, subjects = self._md_lines(ag, randint(rng, 3, 6))
        front = [("agent", ag.name), ("ts", ts_text(ts)), ("thread", f"brief-{ag.name}-{date}")]
        if subjects:
            front.append(("subject", ", ".join(subjects)))
        body = f"# Daily brief: {ag.name}, {date}\n\n" + "\n".join(lines) + "\n"
        self._maybe_up(ag, ts, rel)
        return Doc(rel, front, body, ts)

    def _finding(self, ag: SimAgent, ts: int) -> Doc:
        rng = ag.rng
        ag.finding_no += 1
        topic = choice(rng, FINDING_TOPICS)
        rel = f"findings/{ag.name}-{topic}-{ag.finding_no}.md"
        lines, subjects = self._md_lines(ag, randint(rng, 2, 4))
        front = [("agent", ag.name), ("ts", ts_text(ts)), ("thread", self._new_thread(ag))]
        if subjects:
            front.append(("subject", ", ".join(subjects)))
        title = topic.replace("-", " ").capitalize()
        body = f"# Finding: {title}\n\n" + "\n".join(lines) + "\n"
        self._maybe_up(ag, ts, rel)
        return Doc(rel, front, body, ts)
