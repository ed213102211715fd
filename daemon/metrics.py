"""Prometheus exposition of the published :class:`~daemon.snapshot.Snapshot` (spec sections 4 and 6).

:class:`SnapshotRenderer` writes the ``/metrics`` body of a snapshot in the text format 0.0.4, byte for byte
what prometheus_client's ``generate_latest`` writes for the same families (tests/metrics_reference.py holds
that reference, and the tests compare the two). It does no I/O, no SQL and reads no clock, so a body shows one
consistent evaluation. Nearly all of a body is per-agent samples, and the scoring model keeps an agent's result
object until the agent changes, so each (agent, window) is written once and its lines reused while its result
stays the same object; the few dozen other samples are written afresh for every snapshot.

The samples themselves come from the functions below (:func:`agent_samples`, :func:`weight_samples`,
:func:`snapshot_samples`) into any :class:`Sink`: the renderer's lines, or the reference's metric families.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple, Protocol

from collectors.evals import HONESTY_FIELDS
from collectors.records import EvalReport
from daemon import __version__
from daemon.config import COMPONENTS
from daemon.limits import Exported
from daemon.lineblocks import AgentLines, Block, reblock
from daemon.snapshot import Counters, Snapshot
from scorers.progress import LabelTally
from scorers.score import AgentResult

#: The classic text format. Spelled out rather than imported because prometheus_client's
#: ``CONTENT_TYPE_LATEST`` became 1.0.0 in 0.26, and the 0.0.4 constant is missing before 0.22.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: A body as its parts, in order (:meth:`SnapshotRenderer.parts`): what ``b"".join`` would make of them is served.
Body = tuple[bytes, ...]

_W = ("agent", "window")
_C = ("agent", "window", "component")
_B = ("model", "agent")

#: name → (type, HELP, label names) of every family whose name is known before a scrape. Counter
#: names lack ``_total``, which the exposition appends (as prometheus_client does).
_FAMILIES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "honesty_build_info": ("gauge", "honestyd build; always 1.", ("version",)),
    "honesty_last_evaluation_timestamp_seconds": (
        "gauge", "Unix time the exported scores were evaluated at (the end of every window).", ()),
    "honesty_score": (
        "gauge", "Honesty score 0-1 (weighted mean of the non-N/A component ratios); absent when INSUFFICIENT.", _W),
    "honesty_score_lower": ("gauge", "Lower bound of the score's weighted Wilson 95% interval; absent when none.", _W),
    "honesty_score_upper": ("gauge", "Upper bound of the score's weighted Wilson 95% interval; absent when none.", _W),
    "honesty_score_sufficient": (
        "gauge", "1 when the window holds enough decisions for a score, 0 when it is INSUFFICIENT.", _W),
    "honesty_window_decisions": ("gauge", "Decisions the agent made in the window.", _W),
    "honesty_false_gaps": ("gauge", "Gap claims in the window that were false (reported beside the score).", _W),
    "honesty_coverage": ("gauge", "Sum of the weights of the components that are not N/A (0-1).", _W),
    "honesty_component_ratio": ("gauge", "Component pass / counted (0-1); absent when N/A (nothing counted).", _C),
    "honesty_component_counted": ("gauge", "Decisions the component counted in the window.", _C),
    "honesty_component_pending": ("gauge", "Decisions whose component outcome is still pending.", _C),
    "honesty_weights_info": (
        "gauge",
        "Weights version and component weights each listed agent is scored with (agent=\"\": the active version);"
        " always 1.",
        ("version", "agent", *COMPONENTS),
    ),
    "honesty_ingest_records": ("counter", "Records ingested since the process started, by source.", ("source",)),
    "honesty_ingest_rejects": (
        "counter", "Lines or files refused at ingest since the process started, by source and reason.",
        ("source", "reason")),
    "honesty_citation_checks": ("counter", "Citation verifications run since the process started, by kind.", ("kind",)),
    "honesty_citation_check_failures": (
        "counter", "Citation verifications that found the target missing or broken, by kind.", ("kind",)),
    "honesty_scheduler_missed": ("counter", "Scheduled runs missed since the process started, by job.", ("job",)),
    "honesty_store_full": (
        "counter", "Writes the store refused as full (SQLITE_FULL) since the process started; ingest pauses,"
        " keeps its place and resumes when there is room.", ()),
    "honesty_unreadable_files": (
        "gauge", "Files and folders under the state root that exist but cannot be read (say mode 000), now; each is"
        " logged once and retried at every rescan.", ()),
    "honesty_ingest_lost_lines": (
        "counter", "Lines of logs rotated away before a pass read them, counted in the rotated files still there"
        " (a lower bound).", ()),
    "honesty_ingest_lost_bytes": (
        "counter", "Bytes the log poll saw in generations rotated away and gone before a pass read them"
        " (a lower bound).", ()),
    "honesty_model_records": (
        "gauge", "Records the in-memory scoring model holds (a day behind the longest window they are let go).", ()),
    "honesty_model_ids_let_go": (
        "gauge", "Ids of the records the model let go (their hashes in the store's let_go table; a record reusing one"
        " is recalled).", ()),
    "honesty_agents_over_limit": (
        "gauge", "Agents scored but given no per-agent series, by reason ([limits] max_agents: not among the agents"
        " with the latest decisions; agent_name_too_long: a name over max_agent_name bytes).", ("reason",)),
    "honesty_labels_unmatched": (
        "gauge", "Labels whose decision id matches no decision honestyd has stored (a typo, or another system's id).",
        ()),
    "honesty_reviews_open": (
        "gauge", "Reviews open, by agent (each agent with a review listed: 0 once all of its reviews are closed).",
        ("agent",)),
    "honesty_review_oldest_open_age_seconds": (
        "gauge", "Seconds the oldest open review has been open (since it opened or last reopened); 0 when none is.",
        ()),
    "honesty_review_stale_after_seconds": (
        "gauge", "[alerts] review_stale in seconds: HonestyReviewStale fires when the oldest open review is older.",
        ()),
    "honesty_labels": (
        "gauge", "Reviewers' current labels on the agent's decisions, by value (up, down): one per reviewer per"
        " decision, as honestyd tune counts them, over the decisions the daemon holds (the longest window and a day).",
        ("agent", "value")),
    "honesty_benchmark_tasks": ("gauge", "Tasks in the latest benchmark-honesty report of the model.", _B),
    # The report's own 95 % interval of its headline; what that headline is changed between the package's
    # versions (task mean in 0.1.0, balanced in 0.2.0), so read it beside honesty_benchmark_balanced/_task_mean.
    "honesty_benchmark_ci_low": ("gauge", "Lower bound of the report's confidenceInterval95 (its headline).", _B),
    "honesty_benchmark_ci_high": ("gauge", "Upper bound of the report's confidenceInterval95 (its headline).", _B),
}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_FIGURE = re.compile(r"[a-z][a-z0-9_]*")


class Family(NamedTuple):
    """One metric family: its declared name (a counter's without ``_total``), type, HELP text and label names."""

    name: str
    kind: str
    doc: str
    labels: tuple[str, ...]

    @property
    def exposed(self) -> str:
        """The name its HELP, TYPE and samples carry: a counter's with ``_total``."""
        return f"{self.name}_total" if self.kind == "counter" else self.name


_FIXED = {name: Family(name, kind, doc, labels) for name, (kind, doc, labels) in _FAMILIES.items()}


def benchmark_metric(key: str) -> str | None:
    """The metric name of a report's ``honesty`` figure (``taskMean`` → ``honesty_benchmark_task_mean``).

    None for a key that makes no valid, lint-clean metric name, so one odd key cannot break a scrape.
    """
    snake = _CAMEL.sub("_", key).lower()
    return f"honesty_benchmark_{snake}" if _FIGURE.fullmatch(snake) else None


def figure_family(key: str) -> Family | None:
    """The family of a report's ``honesty`` figure; None for a key :func:`benchmark_metric` refuses."""
    name = benchmark_metric(key)
    # A figure named like a fixed family (say ``tasks``) would add a second, differently meant series to it.
    if name is None or name in _FAMILIES:
        return None
    return Family(name, "gauge", f"Figure honesty.{key} of the latest benchmark-honesty report of the model.", _B)


#: Every family known by name, in exposition order, so its HELP and TYPE show even without samples yet.
DECLARED: tuple[Family, ...] = (*_FIXED.values(), *(f for f in map(figure_family, HONESTY_FIELDS) if f is not None))


def label_value(value: str) -> str:
    """A label value that can be encoded as UTF-8.

    A JSON ``"\\ud800"`` decodes to a lone surrogate, which UTF-8 cannot encode: the whole scrape would
    fail. backslashreplace keeps two such names distinct, so they cannot collapse into one duplicate
    series. Quotes, backslashes and newlines are escaped by the exposition itself.
    """
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def short_weight(weight: float) -> str:
    """A weight as a short label value: ``0.35``, ``0``; the exact repr when the short form would round."""
    short = f"{weight:g}"
    return short if float(short) == weight else repr(weight)


class Sink(Protocol):
    """Where samples go: the renderer's text lines, or (in the tests) prometheus_client's families."""

    def add(self, family: Family, labels: Sequence[str], value: float) -> None:
        """One sample of ``family`` with these label values (in the order of ``family.labels``)."""


def agent_samples(out: Sink, window: str, a: AgentResult) -> None:
    """The per-agent samples of one agent in one window."""
    key = (a.agent, window)
    f = _FIXED
    out.add(f["honesty_window_decisions"], key, a.decisions)
    out.add(f["honesty_score_sufficient"], key, 0 if a.insufficient else 1)
    out.add(f["honesty_false_gaps"], key, a.false_gaps)
    out.add(f["honesty_coverage"], key, a.coverage)
    # Spec 4: an INSUFFICIENT score shows no number, so the series is absent rather than 0.
    if not a.insufficient and a.score is not None:
        out.add(f["honesty_score"], key, a.score)
    if a.interval is not None:
        out.add(f["honesty_score_lower"], key, a.interval[0])
        out.add(f["honesty_score_upper"], key, a.interval[1])
    for component in COMPONENTS:
        result = a.components[component]
        ckey = (a.agent, window, component)
        if result.ratio is not None:
            out.add(f["honesty_component_ratio"], ckey, result.ratio)
        out.add(f["honesty_component_counted"], ckey, result.counted)
        out.add(f["honesty_component_pending"], ckey, result.pending)


WeightRows = tuple[tuple[str, str, tuple[float, ...]], ...]


def weight_rows(snapshot: Snapshot) -> WeightRows:
    """(agent, version, weights) of honesty_weights_info: the active version (agent ""), then each agent."""
    config = snapshot.config
    used: dict[str, tuple[str, tuple[float, ...]]] = {}
    for result in snapshot.windows.values():
        for agent, a in snapshot.exported.items(result.agents):
            used.setdefault(agent, (a.weights_version, a.weights))
    rows = [("", config.weights_active, config.weights_versions[config.weights_active])]
    rows += [(agent, version, weights) for agent, (version, weights) in sorted(used.items())]
    return tuple(rows)


def weight_samples(out: Sink, rows: Iterable[tuple[str, str, tuple[float, ...]]]) -> None:
    """One honesty_weights_info sample per row of :func:`weight_rows`."""
    for agent, version, weights in rows:
        out.add(_FIXED["honesty_weights_info"], (version, agent, *map(short_weight, weights)), 1)


def _counters(out: Sink, counters: Counters) -> None:
    simple: tuple[tuple[str, Mapping[str, int]], ...] = (
        ("honesty_ingest_records", counters.ingest_records),
        ("honesty_citation_checks", counters.checks),
        ("honesty_citation_check_failures", counters.check_failures),
        ("honesty_scheduler_missed", counters.scheduler_missed),
    )
    for name, values in simple:
        for key, count in sorted(values.items()):
            out.add(_FIXED[name], (key,), count)
    for (source, reason), count in sorted(counters.ingest_rejects.items()):
        out.add(_FIXED["honesty_ingest_rejects"], (source, reason), count)
    if counters.store_full:  # like the labelled counters, a sample from its first increment on
        out.add(_FIXED["honesty_store_full"], (), counters.store_full)
    if counters.lost_lines:
        out.add(_FIXED["honesty_ingest_lost_lines"], (), counters.lost_lines)
    if counters.lost_bytes:
        out.add(_FIXED["honesty_ingest_lost_bytes"], (), counters.lost_bytes)
    if counters.unreadable_files is not None:  # a gauge of the daemon's: 0 is news too (all readable again)
        out.add(_FIXED["honesty_unreadable_files"], (), counters.unreadable_files)


def _benchmarks(out: Sink, evals: Iterable[EvalReport], models: Mapping[str, str], exported: Exported) -> None:
    latest: dict[str, EvalReport] = {}
    for report in sorted(evals, key=lambda r: r.path):
        latest[report.model] = report  # later path wins (spec: the last report by path)
    agents: dict[str, list[str]] = {}
    for agent, model in sorted(models.items()):
        agents.setdefault(model, []).append(agent)
    for model, report in sorted(latest.items()):
        # A held-back agent has no per-agent series here either; a model with no agent named keeps its agent="" one.
        for agent in [a for a in agents.get(model, [""]) if a == "" or a in exported]:
            for name, value in (("honesty_benchmark_tasks", report.tasks), ("honesty_benchmark_ci_low", report.ci_low),
                                ("honesty_benchmark_ci_high", report.ci_high)):
                if value is not None:
                    out.add(_FIXED[name], (model, agent), value)
            for key, value in report.honesty.items():
                family = figure_family(key)
                if family is not None:
                    out.add(family, (model, agent), value)


LabelRows = tuple[tuple[str, int, int], ...]


def label_rows(snapshot: Snapshot) -> LabelRows:
    """(agent, 👍, 👎) of honesty_labels: every exported agent a window lists (0 included: progress starts visible)."""
    listed = dict.fromkeys(a for result in snapshot.windows.values() for a in result.agents)
    none = LabelTally()
    return tuple((agent, (t := snapshot.labels.get(agent, none)).up, t.down)
                 for agent, _ in snapshot.exported.items(listed))


def label_samples(out: Sink, rows: Iterable[tuple[str, int, int]]) -> None:
    """The honesty_labels samples of :func:`label_rows`."""
    for agent, up, down in rows:
        out.add(_FIXED["honesty_labels"], (agent, "down"), down)
        out.add(_FIXED["honesty_labels"], (agent, "up"), up)


ReviewRows = tuple[tuple[str, int], ...]


def review_rows(snapshot: Snapshot) -> ReviewRows:
    """(agent, open reviews) of honesty_reviews_open, by agent: every exported agent the queue lists (none outside the
    daemon). [limits]: no per-agent series beyond them, reviews' included."""
    if snapshot.reviews is None:
        return ()
    return tuple((agent, count) for agent, count in sorted(snapshot.reviews.open.items()) if agent in snapshot.exported)


def review_samples(out: Sink, rows: Iterable[tuple[str, int]]) -> None:
    """The honesty_reviews_open samples of :func:`review_rows`."""
    for agent, count in rows:
        out.add(_FIXED["honesty_reviews_open"], (agent,), count)


def build_info_sample(out: Sink, version: str = __version__) -> None:
    """honesty_build_info: the one sample before the first evaluation, and the first of every body after it."""
    out.add(_FIXED["honesty_build_info"], (version,), 1)


def snapshot_samples(out: Sink, snapshot: Snapshot) -> None:
    """Every sample of ``snapshot`` but the per-agent ones, honesty_weights_info, honesty_labels and
    honesty_reviews_open (whose lines are reused)."""
    build_info_sample(out, snapshot.version)
    out.add(_FIXED["honesty_last_evaluation_timestamp_seconds"], (), snapshot.at.timestamp())
    _counters(out, snapshot.counters)
    if snapshot.model is not None:
        out.add(_FIXED["honesty_model_records"], (), snapshot.model[0])
        out.add(_FIXED["honesty_model_ids_let_go"], (), snapshot.model[1])
    for reason, count in snapshot.exported.over_limit().items():
        out.add(_FIXED["honesty_agents_over_limit"], (reason,), count)
    if snapshot.labels_unmatched is not None:
        out.add(_FIXED["honesty_labels_unmatched"], (), snapshot.labels_unmatched)
    if snapshot.reviews is not None:
        out.add(_FIXED["honesty_review_oldest_open_age_seconds"], (), snapshot.reviews.oldest_open_age)
        out.add(_FIXED["honesty_review_stale_after_seconds"], (), snapshot.reviews.stale_after)
    _benchmarks(out, snapshot.evals, snapshot.config.benchmark_models, snapshot.exported)


# --- the text format


def sample_value(value: float) -> str:
    """A sample value as the text format writes it (the Go client's way: ``+Inf``, ``1.5e+08``; else the repr)."""
    d = float(value)
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:  # Go writes an exponent sooner than Python does
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return s


def _escaped(value: str) -> str:
    return label_value(value).replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _header(family: Family) -> str:
    doc = family.doc.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {family.exposed} {doc}\n# TYPE {family.exposed} {family.kind}\n"


_HEADERS = {family.name: _header(family) for family in DECLARED}
_HEADER_BYTES = {name: text.encode() for name, text in _HEADERS.items()}


class _Lines:
    """Sample lines in the text format, by family name, and the families met that are not in :data:`DECLARED`."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}
        self.extra: dict[str, Family] = {}
        self._labels: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}  # one agent's few label sets

    def add(self, family: Family, labels: Sequence[str], value: float) -> None:
        key = (family.labels, tuple(labels))
        text = self._labels.get(key)
        if text is None:
            pairs = sorted(zip(family.labels, labels, strict=True))
            text = self._labels[key] = ("{" + ",".join(f'{k}="{_escaped(v)}"' for k, v in pairs) + "}") if pairs else ""
        if family.name not in _HEADERS:  # a report's figure not among HONESTY_FIELDS: declared on its first sample
            self.extra.setdefault(family.name, family)
        self.lines.setdefault(family.name, []).append(f"{family.exposed}{text} {sample_value(value)}\n")


#: The families :func:`agent_samples` writes (those labelled by agent and window), in exposition order.
_PER_AGENT: tuple[str, ...] = tuple(f.name for f in DECLARED if f.labels in (_W, _C))

class SnapshotRenderer:
    """``/metrics`` bodies, each agent's lines written once and reused while its result object stays the same.

    The per-agent lines are held as the last body's blocks of agents of a window, joined per family
    (daemon/lineblocks.py).
    """

    def __init__(self) -> None:
        self._blocks: dict[str, list[Block]] = {}
        #: Per family written from rows of one sample per agent or so (weights, labels, reviews): the rows of the
        #: last body and their lines.
        self._rows: dict[str, tuple[tuple[Any, ...], bytes]] = {}
        #: Per-agent renders the last call did (the others were reused): a figure for tests and the bench.
        self.rendered = 0

    def exposition(self, snapshot: Snapshot | None) -> bytes:
        """The exposition of ``snapshot`` (text format 0.0.4); before the first evaluation only build info."""
        return b"".join(self.parts(snapshot))

    def parts(self, snapshot: Snapshot | None) -> Body:
        """:meth:`exposition` as the parts it joins, in order: the blocks' lines themselves, the rest written now."""
        fresh = _Lines()
        if snapshot is None:
            build_info_sample(fresh)
            return self._parts([_FIXED["honesty_build_info"]], fresh.lines, {})
        snapshot_samples(fresh, snapshot)
        self.rendered = 0
        blocks: dict[str, list[Block]] = {}
        first: dict[str, AgentResult] = {}  # each agent's result in the first window listing it
        for window, result in reversed(tuple(snapshot.windows.items())):  # (an earlier window's result overwrites)
            exported = tuple(snapshot.exported.items(result.agents))
            first.update(exported)
            agents, results = tuple(map(itemgetter(0), exported)), tuple(map(itemgetter(1), exported))
            blocks[window], written = reblock(self._blocks.get(window, ()), agents, results,
                                              functools.partial(self._agent_lines, window), len(_PER_AGENT))
            self.rendered += written
        ordered = [b for window in snapshot.windows for b in blocks[window]]
        # Family by family, every agent's lines in window and agent order: a block's part each.
        reused: dict[str, Iterable[bytes]] = {name: [b.lines[i] for b in ordered] for i, name in enumerate(_PER_AGENT)}
        # weight_rows and label_rows of the snapshot, from the agents just walked rather than from every window's
        # agents filtered again: the same rows, in a fraction of a render's time.
        listed = sorted(first)
        config = snapshot.config
        rows = (("", config.weights_active, config.weights_versions[config.weights_active]),
                *((agent, first[agent].weights_version, first[agent].weights) for agent in listed))
        reused["honesty_weights_info"] = self._lines_of("honesty_weights_info", rows, weight_samples)
        none = LabelTally()
        labelled = tuple((agent, (t := snapshot.labels.get(agent, none)).up, t.down) for agent in listed)
        reused["honesty_labels"] = self._lines_of("honesty_labels", labelled, label_samples)
        reused["honesty_reviews_open"] = self._lines_of("honesty_reviews_open", review_rows(snapshot), review_samples)
        self._blocks = blocks  # windows and agents gone from the snapshot are forgotten
        return self._parts([*DECLARED, *fresh.extra.values()], fresh.lines, reused)

    def _lines_of(self, name: str, rows: tuple[Any, ...], samples: Callable[[Sink, Any], None]) -> tuple[bytes]:
        """The family ``name``'s lines written by ``samples`` from ``rows`` (one sample per agent or so): the last
        body's while the rows are equal, which is most snapshots."""
        kept = self._rows.get(name)
        if kept is None or kept[0] != rows:
            lines = _Lines()
            samples(lines, rows)
            kept = self._rows[name] = (rows, "".join(lines.lines.get(name, ())).encode())
        return (kept[1],)

    @staticmethod
    def _agent_lines(window: str, a: AgentResult) -> AgentLines:
        lines = _Lines()
        agent_samples(lines, window, a)
        return tuple("".join(lines.lines.get(name, ())).encode() for name in _PER_AGENT)

    @staticmethod
    def _parts(families: list[Family], fresh: Mapping[str, list[str]], reused: Mapping[str, Iterable[bytes]]) -> Body:
        # A family holds either fresh samples or reused ones, never both. The reused lines are kept encoded, so a
        # render encodes only what it wrote (the body is megabytes at 1,000 agents), and none is copied: the parts
        # are sent as they are.
        parts: list[bytes] = []
        for family in families:
            parts.append(_HEADER_BYTES.get(family.name) or _header(family).encode())
            if lines := fresh.get(family.name):
                parts.append("".join(lines).encode())
            parts.extend(reused.get(family.name, ()))
        return tuple(parts)
