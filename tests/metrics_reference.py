"""The reference exposition: the samples of daemon/metrics.py as prometheus_client families, by ``generate_latest``.

The daemon writes the text format itself (:class:`daemon.metrics.SnapshotRenderer`); the tests and the scrape
bench compare its bytes with what prometheus_client writes for the same samples, so a difference in escaping,
number format or family order shows as a failed comparison, with any version of prometheus_client installed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from daemon.metrics import (
    DECLARED,
    Family,
    agent_samples,
    build_info_sample,
    label_rows,
    label_samples,
    label_value,
    review_rows,
    review_samples,
    snapshot_samples,
    weight_rows,
    weight_samples,
)
from daemon.snapshot import Snapshot


class _Families:
    """A :class:`daemon.metrics.Sink` of prometheus_client families, created on first use, kept in order."""

    def __init__(self, declared: Iterable[Family] = ()) -> None:
        self.families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}
        for family in declared:
            self._family(family)

    def _family(self, family: Family) -> CounterMetricFamily | GaugeMetricFamily:
        found = self.families.get(family.name)
        if found is None:
            kind = CounterMetricFamily if family.kind == "counter" else GaugeMetricFamily
            found = self.families[family.name] = kind(family.name, family.doc, labels=family.labels)
        return found

    def add(self, family: Family, labels: Sequence[str], value: float) -> None:
        self._family(family).add_metric([label_value(v) for v in labels], float(value))

    def collect(self) -> Iterable[Metric]:
        return list(self.families.values())


def _filled(snapshot: Snapshot | None) -> _Families:
    """Every family of ``snapshot`` with all its samples; before the first evaluation only build info."""
    if snapshot is None:
        out = _Families()
        build_info_sample(out)
        return out
    out = _Families(DECLARED)
    snapshot_samples(out, snapshot)
    for window, result in snapshot.windows.items():
        for _, a in snapshot.exported.items(result.agents):
            agent_samples(out, window, a)
    weight_samples(out, weight_rows(snapshot))
    label_samples(out, label_rows(snapshot))
    review_samples(out, review_rows(snapshot))
    return out


def reference_exposition(snapshot: Snapshot | None) -> bytes:
    """``generate_latest`` of every family of ``snapshot``: what ``/metrics`` must serve for it."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_filled(snapshot))
    return generate_latest(registry)
