"""What the scoring contract (SCORING.md) fixes and the scorers read: the components in order, the default
weights, the phrase lists, the signals, the durations, and the weights an agent is scored with.

:class:`ScoringConfig` is every setting a scorer may read; the daemon's ``Config`` (daemon/config.py) extends it
with where files are and how the daemon runs, so a setting the scorers never read cannot change a score.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta

#: The six components of spec section 3, in the order sums and weight vectors follow (scorers/rules.py holds the
#: rule of each).
COMPONENTS = (
    "citation_rate",
    "refusal_correctness",
    "source_verifiability",
    "gap_surfacing_rate",
    "consistency_under_repeat",
    "self_correction_rate",
)
DEFAULT_WEIGHTS_VERSION = "v2026.Q3"
DEFAULT_WEIGHTS = (0.35, 0.25, 0.20, 0.10, 0.05, 0.05)


@dataclass(frozen=True)
class Signal:
    """A gap phrase made checkable by a glob of files that should have appeared ``within``."""

    phrase: str
    glob: str
    within: timedelta


@dataclass(frozen=True)
class Phrases:
    """Phrase lists of spec section 3 (matched case-insensitively on word boundaries)."""

    reason: tuple[str, ...] = ("because", "due to", "since", "reason:")
    alternatives: tuple[str, ...] = ("instead", "alternatively", "you could", "alternative", "alternatives", "option:")
    gap: tuple[str, ...] = (
        "hasn't been generated yet",
        "has not been generated yet",
        "not generated yet",
        "no recent findings",
        "no data",
        "not available yet",
        "does not exist yet",
        "doesn't exist yet",
    )
    acknowledgement: tuple[str, ...] = (
        "you're right",
        "you are right",
        "i was wrong",
        "my mistake",
        "correction:",
        "i stand corrected",
        "i got that wrong",
        "i retract",
        "retracting",
    )


@dataclass(frozen=True)
class Scoring:
    """Windows, the floor and the durations the component rules use."""

    windows: tuple[tuple[str, timedelta], ...] = (
        ("24h", timedelta(hours=24)),
        ("7d", timedelta(days=7)),
        ("30d", timedelta(days=30)),
    )
    min_decisions: int = 5
    follow_up: timedelta = timedelta(minutes=5)
    gap_grace: timedelta = timedelta(minutes=5)
    correction_within: timedelta = timedelta(hours=1)
    check_max_age: timedelta = timedelta(days=30)
    z: float = 1.96
    alert_below: float = 0.70
    drop_alert: float = 0.15

    @property
    def longest_window(self) -> timedelta:
        """The longest configured window (an agent is listed iff it has a decision in it)."""
        return max(delta for _, delta in self.windows)


@dataclass(frozen=True)
class ScoringConfig:
    """Every setting the scorers read: which records are decisions and state changes, the phrases, the signals,
    the durations and windows, and the weights versions."""

    decision_kinds: tuple[str, ...] = ("dm", "resolution", "brief", "cite", "refusal", "ack", "tool_call", "finding")
    state_change_kinds: tuple[str, ...] = ("commit", "push", "run_finished", "state_change")
    phrases: Phrases = field(default_factory=Phrases)
    signals: tuple[Signal, ...] = (Signal("no recent findings", "findings/*.md", timedelta(hours=24)),)
    scoring: Scoring = field(default_factory=Scoring)
    weights_active: str = DEFAULT_WEIGHTS_VERSION
    weights_versions: Mapping[str, tuple[float, ...]] = field(
        default_factory=lambda: {DEFAULT_WEIGHTS_VERSION: DEFAULT_WEIGHTS}
    )
    weights_agents: Mapping[str, str] = field(default_factory=dict)

    def weights_for(self, agent: str) -> tuple[str, tuple[float, ...]]:
        """The (version, weights) an agent is scored with: its own version, else the active one."""
        version = self.weights_agents.get(agent, self.weights_active)
        return version, self.weights_versions[version]


#: Fields read only where a window's counts are summed and summarised (weights, the windows, the floor, z, the alert
#: levels), never by a rule: the per-decision outcomes do not depend on them.
SUMMARY_ONLY = frozenset({"weights_active", "weights_versions", "weights_agents"})
#: The same, inside ``[scoring]``.
SUMMARY_ONLY_SCORING = frozenset({"windows", "min_decisions", "z", "alert_below", "drop_alert"})


def outcome_part(config: ScoringConfig) -> ScoringConfig:
    """What every decision's outcome depends on: the scorers' settings of ``config`` (whatever class extends them)
    with the summary-only ones at their defaults. Two configs with equal parts give every decision the same
    outcomes; any setting added to :class:`ScoringConfig` later is compared too."""
    defaults = ScoringConfig()
    values = {f.name: getattr(defaults if f.name in SUMMARY_ONLY else config, f.name) for f in fields(ScoringConfig)}
    values["scoring"] = replace(config.scoring, **{n: getattr(defaults.scoring, n) for n in SUMMARY_ONLY_SCORING})
    return ScoringConfig(**values)
