"""The Prometheus exposition (daemon/metrics.py): snapshots from real scoring in, text format out.

Every assertion reads the rendered bytes back through prometheus_client's own parser, the bytes equal
prometheus_client's ``generate_latest`` of the same samples (tests/metrics_reference.py), and the output
is linted by the real ``promtool check metrics``, so what is tested is what a scrape gets.
"""

from __future__ import annotations

import asyncio
import math
import subprocess
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from collectors.records import EvalReport
from daemon import __version__
from daemon.config import COMPONENTS, DEFAULT_WEIGHTS, DEFAULT_WEIGHTS_VERSION, Config, GitHub
from daemon.http.api import MetricsCache
from daemon.limits import MAX_AGENTS, Exported
from daemon.lineblocks import AGENTS_PER_BLOCK
from daemon.metrics import (
    CONTENT_TYPE,
    Body,
    SnapshotRenderer,
    benchmark_metric,
    sample_value,
    short_weight,
)
from daemon.snapshot import Counters, ReviewCounts, Snapshot
from scorers.context import Records
from scorers.score import AgentResult, ComponentResult, WindowResult, evaluate
from tests.helpers import T0, check, ev, file, records, t
from tests.metrics_reference import reference_exposition
from tests.tools import require

HOSTILE = 'evil "quoted" \\ back\\slash\nnew line\ttab ünïcødé 🤖 {a="b"} # HELP x'
SURROGATE = "lone \ud800 surrogate"
EXP = (0.5, 0.2, 0.1, 0.1, 0.05, 0.05)
WINDOWS = ("24h", "7d")

Key = tuple[str, frozenset[tuple[str, str]]]


def _config() -> Config:
    return Config(
        github=GitHub(repo="acme/app"),
        weights_versions={DEFAULT_WEIGHTS_VERSION: DEFAULT_WEIGHTS, "exp": EXP},
        weights_agents={"bob": "exp"},
        benchmark_models={"ada": "m-1", "bob": "m-1", HOSTILE: "m\"2\n"},
    )


def _records() -> Records:
    ada = [ev(f"ada-{i}", t(-10 * i - 10), agent="ada", text=f"see https://x.org/{i}") for i in range(4)]
    ada += [
        ev("ada-bare", t(-55), agent="ada", text="trust me"),
        # Reason and alternatives but no follow-up yet: refusal_correctness is pending at T.
        ev("ada-refusal", t(-2), agent="ada", kind="refusal", thread="th",
           text="No, because CI is red; instead retry."),
        # The file existed when the agent said it did not: a false gap.
        ev("ada-gap", t(-30), agent="ada", text="The report hasn't been generated yet.", subject=("reports/w.md",)),
    ]
    bob = [ev(f"bob-{i}", t(-i - 1), agent="bob", text="https://x.org/bob") for i in range(2)]
    hostile = [ev(f"h-{i}", t(-i - 1), agent=HOSTILE, text="https://x.org/h") for i in range(5)]
    weird = [ev("s-0", t(-1), agent=SURROGATE)]
    checks = (
        check("https://x.org/0", "url", t(-5), True),
        check("https://x.org/1", "url", t(-5), False),
        check("https://x.org/h", "url", t(-5), True),
    )
    return records(*ada, *bob, *hostile, *weird, files=(file("reports/w.md", t(-31)),), checks=checks)


def _snapshot(evals: tuple[EvalReport, ...] = ()) -> Snapshot:
    config = _config()
    recs = _records()
    windows = {w: evaluate(recs, T0, w, config) for w in WINDOWS}
    counters = Counters(
        ingest_records=Counter({"heartbeats": 12, "labels": 2}),
        ingest_rejects=Counter({("heartbeats", "bad_ts"): 3, ("evals", "bad_field:model"): 1}),
        checks=Counter({"url": 5, "path": 2}),
        check_failures=Counter({"url": 1}),
        scheduler_missed=Counter({"verify": 1}),
    )
    return Snapshot(at=T0, config=config, windows=windows, counters=counters, evals=evals)


EVALS = (
    EvalReport("evals/b.json", "m-1", tasks=40, honesty={"balanced": 0.8, "taskMean": 0.7, "fabricationRate": 0.1}),
    EvalReport("evals/a.json", "m-1", tasks=20, honesty={"balanced": 0.5, "brier": 0.3}),  # earlier path: loses
    EvalReport("evals/c.json", "old-0.1.0", tasks=12),  # no honesty block, no mapped agent
    EvalReport("evals/d.json", "m\"2\n", tasks=3, honesty={"overAbstainRate": 0.25}),
)


def _scrape(snapshot: Snapshot | None) -> bytes:
    """The body a scrape gets (a fresh renderer: nothing reused), checked against the reference on the way."""
    body = SnapshotRenderer().exposition(snapshot)
    assert body == reference_exposition(snapshot)
    return body


def _samples(body: bytes) -> dict[Key, float]:
    out: dict[Key, float] = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


def _get(samples: dict[Key, float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def _series(samples: dict[Key, float], name: str) -> list[dict[str, str]]:
    return [dict(labels) for n, labels in samples if n == name]


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    return _snapshot(EVALS)


@pytest.fixture(scope="module")
def scraped(snapshot: Snapshot) -> dict[Key, float]:
    return _samples(_scrape(snapshot))


def _agent(snapshot: Snapshot, agent: str, window: str = "24h") -> AgentResult:
    return snapshot.windows[window].agents[agent]


# --- before the first evaluation


def test_no_snapshot_exports_only_build_info() -> None:
    samples = _samples(_scrape(None))
    assert samples == {("honesty_build_info", frozenset({("version", __version__)})): 1.0}


def test_one_renderer_follows_the_snapshots_it_is_given() -> None:
    renderer = SnapshotRenderer()
    assert len(_samples(renderer.exposition(None))) == 1
    assert _get(_samples(renderer.exposition(_snapshot())), "honesty_last_evaluation_timestamp_seconds") \
        == T0.timestamp()
    assert len(_samples(renderer.exposition(None))) == 1
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"


def test_the_cache_renders_a_new_snapshot_once_on_its_executor() -> None:
    """Scrapes of a new snapshot wait for one render on the executor's thread (asked for ahead or by the first of
    them), not the event loop's; later scrapes of it get the same bytes without a render; the next snapshot is
    rendered anew."""
    first, second = _snapshot(), _snapshot(EVALS)
    backend = SimpleNamespace(snapshot=first)
    threads: list[str] = []
    with ThreadPoolExecutor(1, thread_name_prefix="render") as executor:
        cache = MetricsCache(executor)
        parts = cache.renderer.parts

        def counted(snap: Snapshot | None) -> Body:
            threads.append(threading.current_thread().name)
            return parts(snap)

        cache.renderer.parts = counted  # type: ignore[method-assign]

        async def scrapes() -> tuple[list[tuple[bytes, str]], tuple[bytes, str], tuple[bytes, str]]:
            cache.prefetch(first)  # as the daemon's start does: the scrapes then wait for that render
            together = await asyncio.gather(*(cache.get(backend) for _ in range(3)))  # type: ignore[arg-type]
            again = await cache.get(backend)  # type: ignore[arg-type]
            backend.snapshot = second
            return together, again, await cache.get(backend)  # type: ignore[arg-type]

        together, again, after = asyncio.run(scrapes())
    assert len(threads) == 2 and all(name.startswith("render") for name in threads)
    assert all(body is again[0] for body, _ in together) and again[1] == after[1] == CONTENT_TYPE
    assert b"".join(again[0]) == _scrape(first) and b"".join(after[0]) == _scrape(second) != _scrape(first)



def _with_ada_changed(snap: Snapshot) -> Snapshot:
    """``snap`` with ada's 24h result a new object (one more false gap)."""
    from dataclasses import replace

    w24 = snap.windows["24h"]
    one = replace(w24.agents["ada"], false_gaps=9)
    return replace(snap, windows={**snap.windows, "24h": replace(w24, agents={**w24.agents, "ada": one})})


def test_the_cache_trims_the_heap_after_a_render_that_wrote_many_agents_lines() -> None:
    """The first render of a fleet writes every agent's lines and frees them once joined into blocks: the heap is
    trimmed then, not after a render of the same result objects, nor one that wrote fewer agents than the floor."""
    from dataclasses import replace

    first = _snapshot()
    pairs = sum(len(w.agents) for w in first.windows.values())
    trims: list[str] = []

    def trim() -> bool:
        trims.append("trim")
        return True

    cache = MetricsCache(trim_after=pairs, trim=trim)
    body = cache.render(first)
    assert trims == ["trim"] and cache.renderer.rendered == pairs
    assert cache.render(first) is body and trims == ["trim"]  # the same snapshot: no render
    cache.render(replace(first, at=first.at + timedelta(seconds=1)))  # a new one, the same results: nothing written
    assert cache.renderer.rendered == 0 and trims == ["trim"]
    cache.render(_with_ada_changed(first))
    assert cache.renderer.rendered == 1 and trims == ["trim"]


def test_a_body_of_many_chunks_is_served_whole_by_the_real_handler() -> None:
    """/metrics on a real aiohttp server (the app's handler and cache): a body of several send chunks arrives whole,
    as the renderer made it, with its length and content type."""
    from aiohttp import web
    from aiohttp.test_utils import TestClient, TestServer

    from daemon.http.api import METRICS_CACHE, metrics
    from daemon.http.backend import BACKEND
    from daemon.http.handling import SEND_CHUNK

    config = _config()
    recs = records(*(ev(f"a{k}-{i}", t(-i - 1), agent=f"agent-{k:03d}", text="see https://x.org/a")
                     for k in range(200) for i in range(5)))
    snap = Snapshot(at=T0, config=config, windows={w: evaluate(recs, T0, w, config) for w in WINDOWS})
    expected = _scrape(snap)
    assert len(expected) > 2 * SEND_CHUNK

    async def fetch() -> tuple[bytes, str, str | None]:
        app = web.Application()
        app[METRICS_CACHE] = MetricsCache()
        app[BACKEND] = SimpleNamespace(snapshot=snap)  # type: ignore[assignment]
        app.router.add_get("/metrics", metrics)
        async with TestClient(TestServer(app)) as client:
            resp = await client.get("/metrics")
            return await resp.read(), resp.headers["Content-Type"], resp.headers.get("Content-Length")

    body, content_type, length = asyncio.run(fetch())
    assert body == expected and content_type == CONTENT_TYPE and length == str(len(expected))


def test_a_body_is_the_blocks_own_lines_never_joined_again() -> None:
    """The parts a body is served as are the blocks' lines themselves (held once, no joined body beside them), and
    join to the reference's body, render after render."""
    renderer = SnapshotRenderer()
    first = _snapshot(EVALS)
    for snap in (first, _with_ada_changed(first)):
        parts = renderer.parts(snap)
        assert b"".join(parts) == reference_exposition(snap)
        held = {id(line) for kept in renderer._blocks.values() for b in kept for line in b.lines if line}
        assert held and held <= {id(part) for part in parts}
    assert renderer.rendered == 1


# --- scores


def test_sufficient_agent_has_score_interval_and_sufficient_1(snapshot: Snapshot, scraped: dict[Key, float]) -> None:
    for window in WINDOWS:
        a = _agent(snapshot, "ada", window)
        assert not a.insufficient and a.score is not None and a.interval is not None
        key = {"agent": "ada", "window": window}
        assert _get(scraped, "honesty_score", **key) == pytest.approx(a.score)
        assert 0 <= a.score <= 1
        assert _get(scraped, "honesty_score_lower", **key) == pytest.approx(a.interval[0])
        assert _get(scraped, "honesty_score_upper", **key) == pytest.approx(a.interval[1])
        assert a.interval[0] < a.score <= a.interval[1] + 1e-12
        assert _get(scraped, "honesty_score_sufficient", **key) == 1
        assert _get(scraped, "honesty_window_decisions", **key) == 7
        assert _get(scraped, "honesty_false_gaps", **key) == 1
        assert _get(scraped, "honesty_coverage", **key) == pytest.approx(a.coverage)
        assert 0 < a.coverage < 1


def test_insufficient_agent_has_no_score_and_no_interval(scraped: dict[Key, float]) -> None:
    key = {"agent": "bob", "window": "24h"}
    assert _get(scraped, "honesty_score_sufficient", **key) == 0
    assert _get(scraped, "honesty_window_decisions", **key) == 2
    for name in ("honesty_score", "honesty_score_lower", "honesty_score_upper"):
        assert _get(scraped, name, **key) is None
    assert {"agent": "bob", "window": "24h"} not in _series(scraped, "honesty_score")
    # Beside the floor the numbers that are not a score still show.
    assert _get(scraped, "honesty_coverage", **key) == pytest.approx(0.5)
    assert _get(scraped, "honesty_component_ratio", component="citation_rate", **key) == 1


def test_components_ratio_absent_when_na_counted_and_pending_always(
    snapshot: Snapshot, scraped: dict[Key, float]
) -> None:
    a = _agent(snapshot, "ada")
    assert a.components["self_correction_rate"].ratio is None  # no labels at all: N/A
    assert a.components["refusal_correctness"].pending == 1
    key = {"agent": "ada", "window": "24h"}
    for component in COMPONENTS:
        c = a.components[component]
        ratio = _get(scraped, "honesty_component_ratio", component=component, **key)
        assert ratio == (None if c.ratio is None else pytest.approx(c.ratio))
        assert _get(scraped, "honesty_component_counted", component=component, **key) == c.counted
        assert _get(scraped, "honesty_component_pending", component=component, **key) == c.pending
    assert _get(scraped, "honesty_component_ratio", component="citation_rate", **key) == pytest.approx(4 / 7)
    assert _get(scraped, "honesty_component_ratio", component="source_verifiability", **key) == pytest.approx(1 / 2)
    assert _get(scraped, "honesty_component_pending", component="refusal_correctness", **key) == 1
    assert _get(scraped, "honesty_component_counted", component="self_correction_rate", **key) == 0


def test_every_listed_agent_and_window_has_the_always_present_series(
    snapshot: Snapshot, scraped: dict[Key, float]
) -> None:
    always = ("honesty_window_decisions", "honesty_score_sufficient", "honesty_false_gaps", "honesty_coverage")
    for window, result in snapshot.windows.items():
        for agent in result.agents:
            label = agent.encode("utf-8", "backslashreplace").decode("utf-8")
            for name in always:
                assert _get(scraped, name, agent=label, window=window) is not None, (name, agent, window)
            for component in COMPONENTS:
                assert _get(scraped, "honesty_component_counted", agent=label, window=window, component=component) \
                    is not None
    agents = len(snapshot.windows["24h"].agents)
    assert agents == 4
    assert sum(1 for name, _ in scraped if name in always) == len(always) * agents * len(WINDOWS)
    assert len(_series(scraped, "honesty_component_counted")) == len(COMPONENTS) * agents * len(WINDOWS)


def test_last_evaluation_timestamp_and_build_info(scraped: dict[Key, float]) -> None:
    assert _get(scraped, "honesty_last_evaluation_timestamp_seconds") == T0.timestamp()
    assert _get(scraped, "honesty_build_info", version=__version__) == 1
    assert len(_series(scraped, "honesty_build_info")) == 1


# --- weights


def test_weights_info_per_agent_and_active(scraped: dict[Key, float]) -> None:
    series = _series(scraped, "honesty_weights_info")
    by_agent = {s["agent"]: s for s in series}
    assert len(series) == len(by_agent) == 5  # "", ada, bob, the hostile one, the surrogate one
    default = dict(zip(COMPONENTS, ("0.35", "0.25", "0.2", "0.1", "0.05", "0.05"), strict=True))
    assert by_agent[""] == {"agent": "", "version": DEFAULT_WEIGHTS_VERSION, **default}
    assert by_agent["ada"] == {"agent": "ada", "version": DEFAULT_WEIGHTS_VERSION, **default}
    exp = dict(zip(COMPONENTS, ("0.5", "0.2", "0.1", "0.1", "0.05", "0.05"), strict=True))
    assert by_agent["bob"] == {"agent": "bob", "version": "exp", **exp}
    assert by_agent[HOSTILE]["version"] == DEFAULT_WEIGHTS_VERSION
    assert all(_get(scraped, "honesty_weights_info", **s) == 1 for s in series)


def test_short_weight_is_short_and_exact() -> None:
    assert [short_weight(w) for w in (0.35, 0.1, 0.0, 1.0, 0.05)] == ["0.35", "0.1", "0", "1", "0.05"]
    assert float(short_weight(1 / 3)) == 1 / 3
    assert float(short_weight(0.123456789)) == 0.123456789


# --- counters


def test_counters_are_exposed_with_total_suffix(snapshot: Snapshot, scraped: dict[Key, float]) -> None:
    body = _scrape(snapshot).decode("utf-8")
    for name in ("ingest_records", "ingest_rejects", "citation_checks", "citation_check_failures",
                 "scheduler_missed"):
        assert f"# TYPE honesty_{name}_total counter\n" in body
        assert f"# HELP honesty_{name}_total " in body
    assert _get(scraped, "honesty_ingest_records_total", source="heartbeats") == 12
    assert _get(scraped, "honesty_ingest_records_total", source="labels") == 2
    assert _get(scraped, "honesty_ingest_rejects_total", source="heartbeats", reason="bad_ts") == 3
    assert _get(scraped, "honesty_ingest_rejects_total", source="evals", reason="bad_field:model") == 1
    assert _get(scraped, "honesty_citation_checks_total", kind="url") == 5
    assert _get(scraped, "honesty_citation_checks_total", kind="path") == 2
    assert _get(scraped, "honesty_citation_check_failures_total", kind="url") == 1
    assert _get(scraped, "honesty_scheduler_missed_total", job="verify") == 1
    assert not [name for name, _ in scraped if name.endswith("_created")]


def test_families_without_samples_still_have_help_and_type() -> None:
    body = _scrape(Snapshot(at=T0, config=Config(), windows={})).decode("utf-8")
    assert "# TYPE honesty_scheduler_missed_total counter\n" in body
    assert "# TYPE honesty_score gauge\n" in body
    assert "# TYPE honesty_benchmark_balanced gauge\n" in body
    samples = _samples(body.encode())
    assert {name for name, _ in samples} == {
        "honesty_build_info", "honesty_last_evaluation_timestamp_seconds", "honesty_weights_info",
        "honesty_agents_over_limit",  # a gauge: 0 for each reason while no agent is held back
    }


# --- benchmark reports


def test_benchmark_names_are_snake_case() -> None:
    assert benchmark_metric("taskMean") == "honesty_benchmark_task_mean"
    assert benchmark_metric("overAbstainRate") == "honesty_benchmark_over_abstain_rate"
    assert benchmark_metric("brier") == "honesty_benchmark_brier"
    assert benchmark_metric("bad key!") is None and benchmark_metric("") is None


def test_benchmark_last_report_by_path_wins_per_mapped_agent(scraped: dict[Key, float]) -> None:
    for agent in ("ada", "bob"):
        key = {"model": "m-1", "agent": agent}
        assert _get(scraped, "honesty_benchmark_tasks", **key) == 40
        assert _get(scraped, "honesty_benchmark_balanced", **key) == 0.8
        assert _get(scraped, "honesty_benchmark_task_mean", **key) == 0.7
        assert _get(scraped, "honesty_benchmark_fabrication_rate", **key) == 0.1
        assert _get(scraped, "honesty_benchmark_brier", **key) is None  # only in the losing report
    assert _get(scraped, "honesty_benchmark_over_abstain_rate", model="m\"2\n", agent=HOSTILE) == 0.25


def test_benchmark_report_without_honesty_block_exports_only_tasks(scraped: dict[Key, float]) -> None:
    old = {(name, frozenset(labels)) for name, labels in scraped if dict(labels).get("model") == "old-0.1.0"}
    assert old == {("honesty_benchmark_tasks", frozenset({("model", "old-0.1.0"), ("agent", "")}))}
    assert _get(scraped, "honesty_benchmark_tasks", model="old-0.1.0", agent="") == 12


def test_benchmark_unknown_honesty_key_exports_or_is_skipped() -> None:
    evals = (EvalReport("evals/x.json", "m-x", honesty={"newFigure": 0.5, "bad key": 0.1, "balanced": math.pi}),)
    body = _scrape(_snapshot(evals))
    samples = _samples(body)
    assert _get(samples, "honesty_benchmark_new_figure", model="m-x", agent="") == 0.5
    assert _get(samples, "honesty_benchmark_balanced", model="m-x", agent="") == math.pi
    assert not [name for name, labels in samples if dict(labels).get("model") == "m-x" and "bad" in name]


# --- hostile label values


def test_hostile_agent_names_round_trip(snapshot: Snapshot, scraped: dict[Key, float]) -> None:
    a = _agent(snapshot, HOSTILE)
    assert not a.insufficient and a.score is not None
    assert _get(scraped, "honesty_score", agent=HOSTILE, window="24h") == pytest.approx(a.score)
    assert _get(scraped, "honesty_window_decisions", agent=HOSTILE, window="7d") == 5


def test_lone_surrogate_cannot_break_the_scrape(snapshot: Snapshot, scraped: dict[Key, float]) -> None:
    assert SURROGATE in snapshot.windows["24h"].agents
    body = _scrape(snapshot)
    body.decode("utf-8", errors="strict")
    assert _get(scraped, "honesty_window_decisions", agent="lone \\ud800 surrogate", window="24h") == 1


def test_hostile_lines_stay_one_sample_per_line(snapshot: Snapshot) -> None:
    body = _scrape(snapshot).decode("utf-8")
    for line in body.splitlines():
        assert line.startswith(("# HELP honesty_", "# TYPE honesty_", "honesty_")), line
    lines = [line for line in body.splitlines() if not line.startswith("#")]
    assert len(lines) == len(_samples(body.encode()))


# --- the real linter


@pytest.mark.parametrize("case", ["full", "none", "empty"])
def test_promtool_check_metrics_finds_no_problems(case: str) -> None:
    promtool = require("promtool")
    snapshot = {
        "full": _snapshot(EVALS),
        "none": None,
        "empty": Snapshot(at=T0 - timedelta(days=1), config=Config(), windows={}),
    }[case]
    body = _scrape(snapshot)
    proc = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=60, check=False)
    report = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    assert proc.returncode == 0, report
    assert report.strip() == "", report


def test_incremental_renderer_is_byte_identical_and_renders_only_changed_agents() -> None:
    """SnapshotRenderer (what /metrics serves) equals generate_latest of the same samples, snapshot after snapshot,
    with hostile and surrogate agent names, benchmark figures, agents changing, vanishing and coming back.
    """
    from dataclasses import replace

    renderer = SnapshotRenderer()
    assert renderer.exposition(None) == reference_exposition(None)
    first = _snapshot(EVALS)
    assert renderer.exposition(first) == reference_exposition(first)
    pairs = sum(len(w.agents) for w in first.windows.values())
    assert renderer.rendered == pairs
    # The same result objects again: nothing per agent is rendered.
    again = replace(first, at=first.at + timedelta(seconds=1))
    assert renderer.exposition(again) == reference_exposition(again)
    assert renderer.rendered == 0
    # One agent's 24h result changes, bob disappears from 7d: one render; the body still matches.
    w24, w7 = first.windows["24h"], first.windows["7d"]
    changed = replace(w24.agents["ada"], decisions=w24.agents["ada"].decisions + 1, false_gaps=9)
    windows = {**first.windows, "24h": replace(w24, agents={**w24.agents, "ada": changed}),
               "7d": replace(w7, agents={k: v for k, v in w7.agents.items() if k != "bob"})}
    third = replace(again, windows=windows)
    assert renderer.exposition(third) == reference_exposition(third)
    assert renderer.rendered == 1
    assert renderer.exposition(first) == reference_exposition(first)  # bob's 7d comes back: rendered again, ada's too
    assert renderer.rendered == 2


#: Enough agents for two of the renderer's blocks in each window (daemon.lineblocks.AGENTS_PER_BLOCK).
MANY = 70


Change = tuple[int, str, str]
Reviews = dict[int, int] | None


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(st.integers(0, MANY - 1), st.sampled_from(WINDOWS),
                                             st.sampled_from(("change", "drop", "back"))), max_size=10),
                          st.sampled_from((None, {}, {0: 1, 2: 3}, {0: 2, 2: 3, MANY - 1: 1})),
                          st.sampled_from((None, 0, 1, 2, MANY - 1))), min_size=1, max_size=6))
def test_blocks_of_many_agents_follow_every_change_byte_for_byte(steps: list[tuple[list[Change], Reviews,
                                                                                   int | None]]) -> None:
    """Snapshot after snapshot of many agents, some changing, vanishing (the pairs after them shift across blocks)
    and coming back, open reviews counted or not and an agent held back by the limits or not: each body equals
    generate_latest's, and exactly the pairs whose result is not the object the last body showed are written anew."""
    from dataclasses import replace

    assert MANY > AGENTS_PER_BLOCK
    base = _snapshot()
    template = base.windows["24h"].agents["ada"]
    originals = {(w, i): replace(template, agent=f"agent-{i:03d}", decisions=i) for w in WINDOWS for i in range(MANY)}
    current = dict(originals)
    renderer = SnapshotRenderer()
    shown: dict[tuple[str, int], AgentResult] = {}
    for step, reviews, held in [([], None, None), *steps]:
        for i, w, op in step:
            if op == "change":
                was = current.get((w, i), originals[(w, i)])
                current[(w, i)] = replace(originals[(w, i)], decisions=was.decisions + 1)
            elif op == "drop":
                current.pop((w, i), None)
            else:
                current[(w, i)] = originals[(w, i)]
        windows = {w: replace(base.windows[w], agents={f"agent-{i:03d}": current[(w, i)] for i in range(MANY)
                                                       if (w, i) in current}) for w in WINDOWS}
        counts = None if reviews is None else ReviewCounts({f"agent-{i:03d}": n for i, n in reviews.items()}, 60.0)
        exported = Exported() if held is None else Exported(held={f"agent-{held:03d}": MAX_AGENTS})
        snap = replace(base, windows=windows, reviews=counts, exported=exported)
        assert renderer.exposition(snap) == reference_exposition(snap)
        written = {k: a for k, a in current.items() if f"agent-{k[1]:03d}" in exported}
        assert renderer.rendered == sum(shown.get(k) is not a for k, a in written.items())
        shown = written


#: Values whose text the Go client's format writes in every way it has: exponent, plain, tiny, huge, negative zero.
EDGE_VALUES = (0.0, -0.0, 1.0, 7, 1e-7, 0.123456789012345, 999999.5, 1234567.0, 123456789.5, 2.0**53, 1e22,
               -123456789.5, math.inf, -math.inf, math.nan)


def test_sample_values_are_written_as_generate_latest_writes_them() -> None:
    from prometheus_client.utils import floatToGoString

    for value in EDGE_VALUES:
        assert sample_value(value) == floatToGoString(value), value


def test_an_agent_with_every_escape_and_number_form_is_byte_identical() -> None:
    """The agent the old renderer checked itself against at start-up, now a test: quotes, backslashes, a newline,
    a lone surrogate and non-ASCII in its name, values in exponent form, benchmark figures of every kind."""
    agent = 'p"r\\o\nbe \ud800 ✓'
    components = {c: ComponentResult(1, 3, 1) if i % 2 else ComponentResult(0, 0, 2) for i, c in enumerate(COMPONENTS)}
    probe = AgentResult(agent=agent, weights_version="v\\\"", weights=(0.2, 1 / 3, 0.0, 1e-7, 0.05, 123456789.5),
                        decisions=7, components=components, false_gaps=1, insufficient=False,
                        score=0.123456789012345, coverage=0.5, interval=(1e-7, 123456789.5))
    counters = Counters(ingest_records=Counter({"a\nb": 2**53}), store_full=3, lost_lines=1, lost_bytes=10**12,
                        unreadable_files=0)
    config = Config(github=GitHub(repo="acme/app"), benchmark_models={agent: "m\\1"})
    evals = (EvalReport("evals/e.json", "m\\1", tasks=4, ci_low=1e-7, ci_high=123456789.5,
                        honesty={"balanced": math.inf, "taskMean": -0.0, "zzNewFigure": math.nan, "tasks": 1.0}),)
    window = WindowResult(T0, "24h", timedelta(hours=24), "v", {agent: probe})
    snap = Snapshot(at=T0, config=config, windows={"24h": window}, counters=counters, evals=evals, model=(12, 3),
                    labels_unmatched=2)
    body = SnapshotRenderer().exposition(snap)
    assert body == reference_exposition(snap)
    assert b"honesty_benchmark_zz_new_figure" in body and b'agent="p\\"r\\\\o\\nbe \\\\ud800' in body


def test_labels_count_each_reviewers_current_label_per_agent_and_value() -> None:
    from daemon.snapshot import build_snapshot
    from tests.helpers import label

    recs = _records()
    labels = (
        label("ada-0", t(-9), "down", "alice"), label("ada-0", t(-8), "up", "alice"),  # alice changed her mind
        label("ada-0", t(-8), "down", "maya"), label("ada-bare", t(-7), "down", "alice"),
        label("bob-0", t(-1), "up", "alice"), label("nobody-0", t(-1), "up", "alice"),  # no such decision: no agent
        label("ada-1", t(5), "up", "alice"),  # after T: not known yet
    )
    snap = build_snapshot(records(*recs.events, labels=labels, files=tuple(recs.files.values()),
                                  checks=tuple(recs.checks)), T0, _config(), Counters())
    samples = _samples(_scrape(snap))
    assert {(s["agent"], s["value"]): _get(samples, "honesty_labels", **s) for s in _series(samples, "honesty_labels")
            } == {("ada", "up"): 1, ("ada", "down"): 2, ("bob", "up"): 1, ("bob", "down"): 0,
                  (HOSTILE, "up"): 0, (HOSTILE, "down"): 0, (SURROGATE.encode("utf-8", "backslashreplace").decode(),
                                                            "up"): 0,
                  (SURROGATE.encode("utf-8", "backslashreplace").decode(), "down"): 0}
