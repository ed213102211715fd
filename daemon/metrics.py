"""Prometheus exposition of the published :class:`~daemon.snapshot.Snapshot` (spec sections 4 and 6).

:class:`HonestyCollector` turns whatever snapshot its ``source`` returns into metric families at
scrape time. It does no I/O, no SQL and reads no clock, so a scrape costs only the conversion and
always shows one consistent evaluation. :func:`render` gives the body and content type that an
aiohttp ``/metrics`` handler sends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from collectors.evals import HONESTY_FIELDS
from collectors.records import EvalReport
from daemon import __version__
from daemon.config import COMPONENTS
from daemon.limits import Exported
from daemon.snapshot import Counters, Snapshot
from scorers.score import AgentResult, ComponentResult

#: The classic text format. Spelled out rather than imported because prometheus_client's
#: ``CONTENT_TYPE_LATEST`` became 1.0.0 in 0.26, and the 0.0.4 constant is missing before 0.22.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Source = Callable[[], Snapshot | None]
Family = CounterMetricFamily | GaugeMetricFamily

_W = ("agent", "window")
_C = ("agent", "window", "component")
_B = ("model", "agent")

#: name → (type, HELP, label names) of every family whose name is known before a scrape. Counter
#: names lack ``_total``: CounterMetricFamily appends it to the exposed sample.
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
        "gauge", "Ids of the records the model let go, kept as 8-byte hashes (a record reusing one is recalled).", ()),
    "honesty_agents_over_limit": (
        "gauge", "Agents scored but given no per-agent series, by reason ([limits] max_agents: not among the agents"
        " with the latest decisions; agent_name_too_long: a name over max_agent_name bytes).", ("reason",)),
    "honesty_labels_unmatched": (
        "gauge", "Labels whose decision id matches no decision honestyd has stored (a typo, or another system's id).",
        ()),
    "honesty_benchmark_tasks": ("gauge", "Tasks in the latest benchmark-honesty report of the model.", _B),
    # The report's own 95 % interval of its headline; what that headline is changed between the package's
    # versions (task mean in 0.1.0, balanced in 0.2.0), so read it beside honesty_benchmark_balanced/_task_mean.
    "honesty_benchmark_ci_low": ("gauge", "Lower bound of the report's confidenceInterval95 (its headline).", _B),
    "honesty_benchmark_ci_high": ("gauge", "Upper bound of the report's confidenceInterval95 (its headline).", _B),
}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_FIGURE = re.compile(r"[a-z][a-z0-9_]*")


def benchmark_metric(key: str) -> str | None:
    """The metric name of a report's ``honesty`` figure (``taskMean`` → ``honesty_benchmark_task_mean``).

    None for a key that makes no valid, lint-clean metric name, so one odd key cannot break a scrape.
    """
    snake = _CAMEL.sub("_", key).lower()
    return f"honesty_benchmark_{snake}" if _FIGURE.fullmatch(snake) else None


def label_value(value: str) -> str:
    """A label value that can be encoded as UTF-8.

    A JSON ``"\\ud800"`` decodes to a lone surrogate, which generate_latest cannot encode: the
    whole scrape would fail. backslashreplace keeps two such names distinct, so they cannot
    collapse into one duplicate series. Quotes, backslashes and newlines are left to
    prometheus_client, which escapes them.
    """
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def short_weight(weight: float) -> str:
    """A weight as a short label value: ``0.35``, ``0``; the exact repr when the short form would round."""
    short = f"{weight:g}"
    return short if float(short) == weight else repr(weight)


class _Families:
    """The families of one scrape, created on first use and yielded in declaration order."""

    def __init__(self) -> None:
        self._families: dict[str, Family] = {}

    def declare(self, name: str, kind: str, doc: str, labels: Sequence[str]) -> Family:
        family = self._families.get(name)
        if family is None:
            family = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, doc, labels=labels)
            self._families[name] = family
        return family

    def add(self, name: str, labels: Sequence[str], value: float) -> None:
        kind, doc, names = _FAMILIES[name]
        self.add_to(self.declare(name, kind, doc, names), labels, value)

    @staticmethod
    def add_to(family: Family, labels: Sequence[str], value: float) -> None:
        family.add_metric([label_value(v) for v in labels], float(value))

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._families.values())


class _Sink(Protocol):
    def add(self, name: str, labels: Sequence[str], value: float) -> None: ...


def _agent_series(out: _Sink, window: str, a: AgentResult) -> None:
    key = (a.agent, window)
    out.add("honesty_window_decisions", key, a.decisions)
    out.add("honesty_score_sufficient", key, 0 if a.insufficient else 1)
    out.add("honesty_false_gaps", key, a.false_gaps)
    out.add("honesty_coverage", key, a.coverage)
    # Spec 4: an INSUFFICIENT score shows no number, so the series is absent rather than 0.
    if not a.insufficient and a.score is not None:
        out.add("honesty_score", key, a.score)
    if a.interval is not None:
        out.add("honesty_score_lower", key, a.interval[0])
        out.add("honesty_score_upper", key, a.interval[1])
    for component in COMPONENTS:
        result = a.components[component]
        ckey = (a.agent, window, component)
        if result.ratio is not None:
            out.add("honesty_component_ratio", ckey, result.ratio)
        out.add("honesty_component_counted", ckey, result.counted)
        out.add("honesty_component_pending", ckey, result.pending)


def _weight_rows(snapshot: Snapshot) -> tuple[tuple[str, str, tuple[float, ...]], ...]:
    """(agent, version, weights) of honesty_weights_info: the active version (agent ""), then each agent."""
    config = snapshot.config
    used: dict[str, tuple[str, tuple[float, ...]]] = {}
    for result in snapshot.windows.values():
        for agent, a in snapshot.exported.items(result.agents):
            used.setdefault(agent, (a.weights_version, a.weights))
    rows = [("", config.weights_active, config.weights_versions[config.weights_active])]
    rows += [(agent, version, weights) for agent, (version, weights) in sorted(used.items())]
    return tuple(rows)


def _weights(out: _Families, rows: Iterable[tuple[str, str, tuple[float, ...]]]) -> None:
    for agent, version, weights in rows:
        out.add("honesty_weights_info", (version, agent, *map(short_weight, weights)), 1)


def _counters(out: _Families, counters: Counters) -> None:
    simple: tuple[tuple[str, Mapping[str, int]], ...] = (
        ("honesty_ingest_records", counters.ingest_records),
        ("honesty_citation_checks", counters.checks),
        ("honesty_citation_check_failures", counters.check_failures),
        ("honesty_scheduler_missed", counters.scheduler_missed),
    )
    for name, values in simple:
        for key, count in sorted(values.items()):
            out.add(name, (key,), count)
    for (source, reason), count in sorted(counters.ingest_rejects.items()):
        out.add("honesty_ingest_rejects", (source, reason), count)
    if counters.store_full:  # like the labelled counters, a sample from its first increment on
        out.add("honesty_store_full", (), counters.store_full)
    if counters.lost_lines:
        out.add("honesty_ingest_lost_lines", (), counters.lost_lines)
    if counters.lost_bytes:
        out.add("honesty_ingest_lost_bytes", (), counters.lost_bytes)
    if counters.unreadable_files is not None:  # a gauge of the daemon's: 0 is news too (all readable again)
        out.add("honesty_unreadable_files", (), counters.unreadable_files)


def _figure_family(out: _Families, key: str) -> Family | None:
    name = benchmark_metric(key)
    # A figure named like a fixed family (say ``tasks``) would add a second, differently meant series to it.
    if name is None or name in _FAMILIES:
        return None
    doc = f"Figure honesty.{key} of the latest benchmark-honesty report of the model."
    return out.declare(name, "gauge", doc, _B)


def _declare_all(out: _Families) -> None:
    """Declare every family known by name, so its HELP and TYPE show even without samples yet."""
    for name, (kind, doc, labels) in _FAMILIES.items():
        out.declare(name, kind, doc, labels)
    for key in HONESTY_FIELDS:
        _figure_family(out, key)


def _benchmarks(out: _Families, evals: Iterable[EvalReport], models: Mapping[str, str], exported: Exported) -> None:
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
                    out.add(name, (model, agent), value)
            for key, value in report.honesty.items():
                family = _figure_family(out, key)
                if family is not None:
                    out.add_to(family, (model, agent), value)


def snapshot_families(snapshot: Snapshot | None, *, agents: bool = True) -> list[Metric]:
    """Every metric family for one snapshot; before the first evaluation only ``honesty_build_info``.

    ``agents=False`` leaves the per-agent families declared but empty (:class:`SnapshotRenderer` fills them).
    """
    out = _Families()
    if snapshot is None:
        out.add("honesty_build_info", (__version__,), 1)
        return list(out)
    _declare_all(out)
    out.add("honesty_build_info", (snapshot.version,), 1)
    out.add("honesty_last_evaluation_timestamp_seconds", (), snapshot.at.timestamp())
    if agents:
        for window, result in snapshot.windows.items():
            for _, a in snapshot.exported.items(result.agents):
                _agent_series(out, window, a)
        _weights(out, _weight_rows(snapshot))
    _counters(out, snapshot.counters)
    if snapshot.model is not None:
        out.add("honesty_model_records", (), snapshot.model[0])
        out.add("honesty_model_ids_let_go", (), snapshot.model[1])
    for reason, count in snapshot.exported.over_limit().items():
        out.add("honesty_agents_over_limit", (reason,), count)
    if snapshot.labels_unmatched is not None:
        out.add("honesty_labels_unmatched", (), snapshot.labels_unmatched)
    _benchmarks(out, snapshot.evals, snapshot.config.benchmark_models, snapshot.exported)
    return list(out)


class HonestyCollector:
    """A custom collector exporting the latest snapshot that ``source`` returns."""

    def __init__(self, source: Source) -> None:
        self._source = source

    def collect(self) -> Iterable[Metric]:
        """The families of the current snapshot (read once, so one scrape shows one evaluation)."""
        return snapshot_families(self._source())

    def describe(self) -> Iterable[Metric]:
        """The families known by name, so a registry refuses a clashing collector at ``register``."""
        out = _Families()
        _declare_all(out)
        return list(out)


def make_registry(source: Source, registry: CollectorRegistry | None = None) -> CollectorRegistry:
    """Register a :class:`HonestyCollector` for ``source`` into ``registry`` (a fresh one by default)."""
    registry = CollectorRegistry() if registry is None else registry
    registry.register(HonestyCollector(source))
    return registry


class _Fixed:
    """A collector of families built beforehand (to hand them to generate_latest)."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def _exposition(families: list[Metric]) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fixed(families))
    return generate_latest(registry).decode("utf-8")


def _label(value: str) -> str:
    return label_value(value).replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


class _Lines:
    """Sample lines in the text format, written directly (what generate_latest writes for a gauge sample)."""

    def __init__(self) -> None:
        self.lines: dict[str, list[str]] = {}
        self._labels: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}  # one agent's few label sets

    def add(self, name: str, labels: Sequence[str], value: float) -> None:
        names = _FAMILIES[name][2]
        key = (names, tuple(labels))
        text = self._labels.get(key)
        if text is None:
            pairs = sorted(zip(names, labels, strict=True))
            text = self._labels[key] = ",".join(f'{k}="{_label(v)}"' for k, v in pairs)
        number: str = floatToGoString(float(value))  # type: ignore[no-untyped-call]
        self.lines.setdefault(name, []).append(f"{name}{{{text}}} {number}\n")


#: An agent whose lines exercise every family and every escape (the direct formatter is checked against it).
_PROBE = AgentResult(
    agent='p"r\\o\nbe \ud800 ✓', weights_version="v", weights=(0.2,) * 6, decisions=7,
    components={c: ComponentResult(1, 3, 1) if i % 2 else ComponentResult(0, 0, 2) for i, c in enumerate(COMPONENTS)},
    false_gaps=1, insufficient=False, score=0.123456789012345, coverage=0.5, interval=(1e-7, 123456789.5),
)


class SnapshotRenderer:
    """``/metrics`` bodies byte-identical to ``generate_latest`` of :func:`make_registry`, rendered incrementally.

    Nearly all of a body is per-agent samples (about 64 a agent), and from one evaluation to the next most
    agents' results are the very same objects (the scoring model keeps a result until the agent changes).
    Each (agent, window) is rendered by prometheus_client itself, once, and its lines reused while its result
    object stays the same; the rest of the body (a few dozen samples) is rendered whole every time. The lines
    are then spliced after their family's TYPE line, which is where generate_latest writes samples.
    """

    def __init__(self, *, direct: bool = True) -> None:
        self._agents: dict[tuple[str, str], tuple[AgentResult, dict[str, str]]] = {}
        self._weights: tuple[tuple[tuple[str, str, tuple[float, ...]], ...], str] = ((), "")
        #: Per-agent renders the last call did (the others were reused): a figure for tests and the bench.
        self.rendered = 0
        # Per-agent lines are formatted here directly (~20× faster than a generate_latest per agent) when that
        # gives exactly generate_latest's bytes with the installed prometheus_client; checked once, on a probe.
        self.direct = False
        if direct:
            self.direct = True
            self.direct = self._agent_lines("24h", _PROBE) == SnapshotRenderer(direct=False)._agent_lines(
                "24h", _PROBE)

    def render(self, snapshot: Snapshot | None) -> bytes:
        """The exposition of ``snapshot`` (text format 0.0.4)."""
        if snapshot is None:
            return _exposition(snapshot_families(None)).encode("utf-8")
        lines: dict[str, list[str]] = {}
        kept: dict[tuple[str, str], tuple[AgentResult, dict[str, str]]] = {}
        self.rendered = 0
        for window, result in snapshot.windows.items():
            for agent, a in snapshot.exported.items(result.agents):
                cached = self._agents.get((agent, window))
                if cached is None or cached[0] is not a:
                    cached = (a, self._agent_lines(window, a))
                    self.rendered += 1
                kept[(agent, window)] = cached
                for family, text in cached[1].items():
                    lines.setdefault(family, []).append(text)
        self._agents = kept  # agents gone from the snapshot are forgotten
        rows = _weight_rows(snapshot)  # one sample per agent too: rendered again only when an agent's changes
        if rows != self._weights[0]:
            out = _Families()
            _weights(out, rows)
            self._weights = (rows, self._sample_lines(list(out)).get("honesty_weights_info", ""))
        lines["honesty_weights_info"] = [self._weights[1]]
        base = _exposition(snapshot_families(snapshot, agents=False))
        # One join of the whole body: splicing family by family would copy megabytes once per family.
        cuts = sorted((base.index(marker) + len(marker), family) for family in lines
                      for marker in (f"# TYPE {family} {_FAMILIES[family][0]}\n",))
        parts: list[str] = []
        start = 0
        for at, family in cuts:
            parts.append(base[start:at])
            parts.extend(lines[family])
            start = at
        parts.append(base[start:])
        return "".join(parts).encode("utf-8")

    def _agent_lines(self, window: str, a: AgentResult) -> dict[str, str]:
        if self.direct:
            lines = _Lines()
            _agent_series(lines, window, a)
            return {family: "".join(texts) for family, texts in lines.lines.items()}
        out = _Families()
        _agent_series(out, window, a)
        return self._sample_lines(list(out))

    @staticmethod
    def _sample_lines(families: list[Metric]) -> dict[str, str]:
        """The sample lines generate_latest writes for ``families``, by family."""
        text: dict[str, list[str]] = {}
        family = ""
        for line in _exposition(families).splitlines(keepends=True):
            if line.startswith("# TYPE "):
                family = line.split(" ", 3)[2]
            elif not line.startswith("#"):
                text.setdefault(family, []).append(line)
        return {f: "".join(ls) for f, ls in text.items()}


def render(registry: CollectorRegistry) -> tuple[bytes, str]:
    """The ``/metrics`` body and its content type (text format 0.0.4)."""
    return generate_latest(registry), CONTENT_TYPE
