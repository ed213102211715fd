"""[limits] max_agents / max_agent_name (daemon/limits.py): which agents get series, and what the sinks show.

The selection is pure and tested on its own; then real snapshots (scored by the real scorer and by the
daemon's live model) go through the real /metrics renderers, the changelog and the held-back log.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from datetime import datetime

import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.records import EvalReport
from daemon.changelog import digest_entry
from daemon.config import Config, ConfigError, GitHub, Limits, config_from_dict
from daemon.limits import MAX_AGENTS, NAME_TOO_LONG, Exported, HeldBackLog, name_bytes, select
from daemon.metrics import SnapshotRenderer
from daemon.reviews.rule import firing
from daemon.snapshot import Counters, Snapshot, build_snapshot
from scorers.context import Context
from scorers.live import LiveModel
from tests.helpers import T0, ev, records, review_entries, t
from tests.metrics_reference import reference_exposition


class Activity:
    """Latest-decision times by agent, counting how often the selection asks for them."""

    def __init__(self, latest: Mapping[str, datetime]) -> None:
        self.latest = latest
        self.asked: list[Collection[str]] = []

    def __call__(self, agents: Collection[str]) -> Mapping[str, datetime]:
        self.asked.append(agents)
        return {a: self.latest[a] for a in agents if a in self.latest}


# --- the selection (pure)


def test_under_the_limit_every_agent_is_exported_and_activity_is_not_read() -> None:
    activity = Activity({"ada": t(-1), "bob": t(-2)})
    exported = select({"ada", "bob"}, Limits(max_agents=2), activity)
    assert exported.held == {} and exported.agents == ("ada", "bob")
    assert "ada" in exported and "bob" in exported
    assert activity.asked == []  # the common case is one pass over the names
    assert exported.over_limit() == {MAX_AGENTS: 0, NAME_TOO_LONG: 0}


def test_over_the_limit_the_most_recent_agents_are_kept_ties_by_name() -> None:
    latest = {"old": t(-60), "new": t(-1), "tie-b": t(-5), "tie-a": t(-5), "mid": t(-10)}
    exported = select(set(latest), Limits(max_agents=3), Activity(latest))
    # new (1 min ago), then the two at 5 min; of those tie-a sorts first; mid and old are held back.
    assert exported.agents == ("new", "tie-a", "tie-b")
    assert exported.held == {"mid": MAX_AGENTS, "old": MAX_AGENTS}
    two = select(set(latest), Limits(max_agents=2), Activity(latest))
    assert two.agents == ("new", "tie-a") and two.held["tie-b"] == MAX_AGENTS  # the tie is broken by name
    assert two.over_limit() == {MAX_AGENTS: 3, NAME_TOO_LONG: 0}


def test_an_agent_without_a_decision_up_to_the_evaluation_ranks_last() -> None:
    exported = select({"seen", "unseen"}, Limits(max_agents=1), Activity({"seen": t(-600)}))
    assert exported.agents == ("seen",) and exported.held == {"unseen": MAX_AGENTS}


def test_name_length_is_counted_in_utf8_bytes_and_long_names_take_no_slot() -> None:
    fits, over = "a" * 128, "a" * 129
    e_fits, e_over = "é" * 64, "é" * 65  # 128 and 130 bytes: 64 and 65 characters, both under 128
    emoji = "🤖" * 33  # 132 bytes in 33 characters
    surrogate = "\ud800" * 43  # 129 bytes as surrogatepass writes it
    listed = {fits, over, e_fits, e_over, emoji, surrogate, "ada"}
    latest = dict.fromkeys(listed, t(-1)) | {"ada": t(-100)}
    exported = select(listed, Limits(max_agents=3, max_agent_name=128), Activity(latest))
    assert name_bytes(e_over) == 130 and name_bytes(surrogate) == 129
    assert exported.held == {over: NAME_TOO_LONG, e_over: NAME_TOO_LONG, emoji: NAME_TOO_LONG,
                             surrogate: NAME_TOO_LONG}
    # Three names fit, so the oldest of them (ada) keeps its slot: long names are not ranked at all.
    assert set(exported.agents or ()) == {fits, e_fits, "ada"}
    assert exported.over_limit() == {MAX_AGENTS: 0, NAME_TOO_LONG: 4}
    # Never exported, listed or not (a name only the config gives, say a benchmark's agent).
    assert ("b" * 129) not in exported and ("b" * 128) in exported


def test_max_agents_zero_holds_back_every_agent() -> None:
    exported = select({"ada", "bob"}, Limits(max_agents=0), Activity({"ada": t(-1), "bob": t(-1)}))
    assert exported.agents == () and exported.held == {"ada": MAX_AGENTS, "bob": MAX_AGENTS}
    assert dict(exported.items({"ada": 1, "bob": 2})) == {}


def test_limits_are_read_from_the_config_and_checked() -> None:
    cfg = config_from_dict({"limits": {"max_agents": 5, "max_agent_name": 64, "reject_log_per_minute": 0}})
    assert cfg.limits == Limits(max_agents=5, max_agent_name=64, reject_log_per_minute=0)
    assert Config().limits == Limits(max_agents=1000, max_agent_name=128, reject_log_per_minute=10)
    with pytest.raises(ConfigError) as err:
        config_from_dict({"limits": {"max_agents": -1, "max_agent_name": 0, "reject_log_per_minute": "x",
                                     "max_agnets": 3}})
    assert sorted(err.value.errors) == [
        "limits.max_agent_name: must be a positive integer", "limits.max_agents: must be an integer ≥ 0",
        "limits.max_agnets: unknown key", "limits.reject_log_per_minute: must be an integer ≥ 0"]


# --- the daemon's model ranks by the same times as the batch scorer


def test_live_model_latest_decisions_match_the_batch_context() -> None:
    events = [ev(f"{a}-{i}", t(-7 * i - a_i), agent=a) for a_i, a in enumerate(("ada", "bob", "cy")) for i in range(4)]
    events.append(ev("cy-future", t(30), agent="cy"))  # after the evaluation time: not activity yet
    config = Config(github=GitHub(repo="acme/app"))
    model = LiveModel(config)
    model.add_events(events)
    model.evaluate(T0)
    ctx = Context(records(*events), T0, config)
    expected = {a: ds[-1].ts for a, ds in ctx.by_agent.items()}
    assert model.latest_decisions(["ada", "bob", "cy", "nobody"]) == expected
    assert expected["cy"] == t(-2)


# --- what the sinks show


def _fleet(n: int, config: Config) -> Snapshot:
    """``n`` agents, agent i's decisions ending i minutes before T0, one name too long, and a benchmark report."""
    events = [ev(f"a{i}-{k}", t(-i - 30 * k), agent=f"agent{i:02d}", text="trust me")
              for i in range(n) for k in range(5)]
    events += [ev(f"long-{k}", t(-k), agent="L" * 200) for k in range(5)]
    report = EvalReport(path="evals/m.json", model="m-1", tasks=10, ci_low=0.1, ci_high=0.9,
                        honesty={"balanced": 0.5})
    return build_snapshot(records(*events), T0, config, Counters(), (report,))


def _samples(body: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for f in text_string_to_metric_families(body.decode("utf-8")) for s in f.samples}


def test_metrics_show_only_the_exported_agents_and_count_the_rest() -> None:
    config = Config(github=GitHub(repo="acme/app"), limits=Limits(max_agents=3),
                    benchmark_models={"agent00": "m-1", "agent07": "m-1"})
    snap = _fleet(8, config)
    assert all(len(w.agents) == 9 for w in snap.windows.values())  # every agent is still scored
    body = SnapshotRenderer().exposition(snap)
    assert body == reference_exposition(snap)  # the daemon's renderer and generate_latest agree
    samples = _samples(body)
    agents = {dict(labels).get("agent") for name, labels in samples if name == "honesty_window_decisions"}
    assert agents == {"agent00", "agent01", "agent02"}  # the three with the latest decisions
    weights = {dict(labels)["agent"] for name, labels in samples if name == "honesty_weights_info"}
    assert weights == {"", "agent00", "agent01", "agent02"}
    bench = {dict(labels)["agent"] for name, labels in samples if name == "honesty_benchmark_tasks"}
    assert bench == {"agent00"}  # agent07's model figures are per-agent series too
    labelled = {dict(labels)["agent"] for name, labels in samples if name == "honesty_labels"}
    assert labelled == {"agent00", "agent01", "agent02"}  # label progress is a per-agent series like the others
    assert samples[("honesty_agents_over_limit", frozenset({("reason", "max_agents")}))] == 5
    assert samples[("honesty_agents_over_limit", frozenset({("reason", "agent_name_too_long")}))] == 1


def test_the_renderer_follows_the_exported_set_from_one_snapshot_to_the_next() -> None:
    config = Config(github=GitHub(repo="acme/app"), limits=Limits(max_agents=2))
    renderer = SnapshotRenderer()
    first = _fleet(4, config)
    renderer.exposition(first)
    # Same results, a different set: the lines of agents held back now are not reused.
    moved = Snapshot(at=first.at, config=config, windows=first.windows,
                     exported=Exported({"agent00": MAX_AGENTS}, 128, ("agent01", "agent03")))
    agents = {dict(labels).get("agent") for name, labels in _samples(renderer.exposition(moved))
              if name == "honesty_window_decisions"}
    assert agents == {"agent01", "agent03"}


def test_digest_and_reviews_list_only_the_exported_agents() -> None:
    config = Config(github=GitHub(repo="acme/app"), limits=Limits(max_agents=2))
    snap = _fleet(5, config)  # nothing is cited: every agent scores 0 %, below the alert level, so each has a drop
    digest = digest_entry(snap).markdown
    assert "agent00" in digest and "agent01" in digest and "agent02" not in digest and "LLLL" not in digest
    assert digest.endswith("4 agents more scored but not listed here ([limits]: 3 beyond max_agents, 1 with a name"
                           " over max_agent_name bytes); every agent's scores are in `/v1/agents`.")
    assert {c.agent for c in firing(snap).values()} == {"agent00", "agent01"}  # reviews, and their entries
    assert len(review_entries(snap)) == 2
    unlimited = _fleet(5, Config(github=GitHub(repo="acme/app"), limits=Limits(max_agent_name=1000)))
    assert "more scored but not listed" not in digest_entry(unlimited).markdown
    assert len(review_entries(unlimited)) == 6


def test_held_back_agents_are_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.limits")
    held = HeldBackLog(names=2, logger=logger)
    latest = {f"a{i}": t(-i) for i in range(6)}
    caplog.set_level(logging.WARNING, "test.limits")
    first = select(set(latest), Limits(max_agents=2), Activity(latest))
    assert held.note(first, set(latest)) == ["a2", "a3", "a4", "a5"]
    assert [r.getMessage() for r in caplog.records] == [
        "agent 'a2' is not exported to /metrics (max_agents); its scores stay in the API and pages",
        "agent 'a3' is not exported to /metrics (max_agents); its scores stay in the API and pages",
        "2 more agents are not exported to /metrics (max_agents 2); see honesty_agents_over_limit",
    ]
    caplog.clear()
    assert held.note(first, set(latest)) == [] and caplog.records == []  # the next evaluation logs nothing
    # a5 stops being listed (its decisions left the windows), then comes back held back: named again.
    assert held.note(select(set(latest) - {"a5"}, Limits(max_agents=2), Activity(latest)), set(latest) - {"a5"}) == []
    assert held.note(first, set(latest)) == ["a5"]


def test_a_long_name_is_logged_cut_short() -> None:
    records_: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records_.append(record)

    logger = logging.getLogger("test.limits.long")
    logger.addHandler(Keep())
    name = "x" * 70_000
    HeldBackLog(logger=logger).note(select({name}, Limits(), Activity({})), {name})
    (record,) = records_
    assert len(record.getMessage()) < 400 and "(70000 bytes)" in record.getMessage()
    assert record.levelno == logging.WARNING


def test_snapshots_built_without_limits_export_everyone() -> None:
    snap = Snapshot(at=T0, config=Config(), windows={})
    assert snap.exported == Exported() and "x" * 10_000 in snap.exported
    assert list(Exported().items({"b": 2, "a": 1})) == [("a", 1), ("b", 2)]
