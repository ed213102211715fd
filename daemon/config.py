"""Configuration: ``config.toml`` → frozen dataclasses, every key validated and named on error.

Every key has a default (the spec's), so an empty file is a valid configuration; unknown
sections and keys are errors, because a typo that silently keeps a default is worse.
What the scorers read is defined in scorers/spec.py (:class:`Config` extends it), the source
globs in collectors/sources.py, each key's validator in daemon/configvalues.py; the schema
below names every key once, for parsing and for :func:`render_config` alike.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from collectors.rfc3339 import format_duration
from collectors.sources import Globs
from daemon import configvalues as valid
from scorers.spec import (
    COMPONENTS,
    DEFAULT_WEIGHTS,
    DEFAULT_WEIGHTS_VERSION,
    Phrases,
    Scoring,
    ScoringConfig,
    Signal,
)

__all__ = [
    "COMPONENTS", "DEFAULT_WEIGHTS", "DEFAULT_WEIGHTS_VERSION", "Alerts", "Api", "Config", "ConfigError",
    "DaemonSettings", "GitHub", "Globs", "Limits", "Phrases", "Scoring", "ScoringConfig", "Signal", "Verify",
    "config_from_dict", "load_config", "render_config",
]


class ConfigError(ValueError):
    """A configuration that cannot be used; ``errors`` lists ``key: reason`` lines."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True)
class Verify:
    """Source verification: the daily sample, the check cache and the HTTP client's limits."""

    rates: Mapping[str, float] = field(
        default_factory=lambda: {"url": 0.10, "path": 0.10, "run": 0.10, "issue": 0.10}
    )
    daily_at: str = "03:00"
    recheck_after: timedelta = timedelta(hours=24)
    connect_timeout: float = 5.0
    total_timeout: float = 15.0
    max_redirects: int = 5
    body_cap: int = 65536
    concurrency: int = 16
    per_host: int = 2
    per_host_interval: float = 0.0
    retries: int = 2
    backoff: float = 0.5
    max_retry_after: float = 60.0
    user_agent: str = "honestyd/0.1 (source verification; +https://github.com/honestyd/honestyd)"
    allow_networks: tuple[str, ...] = ()


@dataclass(frozen=True)
class GitHub:
    """The CI and issue API: base URL, default repository, and where the token comes from."""

    repo: str = ""
    api_url: str = "https://api.github.com"
    token_env: str = "GITHUB_TOKEN"
    token_file: str = ""


@dataclass(frozen=True)
class DaemonSettings:
    """``[daemon]``: where ``honestyd run`` listens and how often it looks again."""

    listen: str = "127.0.0.1:9478"
    debounce: float = 0.05
    rescan_interval: timedelta = timedelta(minutes=5)
    rescore_interval: timedelta = timedelta(minutes=1)
    drain_timeout: float = 10.0
    #: Keep the scoring model beside the database across restarts (daemon/modelcache.py).
    model_cache: bool = True
    #: How often the running daemon writes the model cache (and once after the catch-up at start): a crash then
    #: costs a load of the latest cache and a catch-up, not a rebuild (daemon/cachewriter.py).
    cache_every: timedelta = timedelta(minutes=10)


@dataclass(frozen=True)
class Api:
    """The HTTP API: who may post labels, how large a request may be, and how many may be answered at once."""

    reviewers_env: str = "HONESTYD_REVIEWERS"
    reviewers_file: str = ""
    max_body: int = 16384
    #: Audits, histories and pages answered at once; one more gets 429 with Retry-After (daemon/http/handling.py).
    max_concurrent_audits: int = 8
    #: Connections held open at once (fewer when the descriptor limit leaves less room: daemon/http/server.py).
    max_connections: int = 512
    #: Where reviewers reach the pages (say through a TLS proxy); https makes the sign-in cookie Secure.
    public_url: str = ""


@dataclass(frozen=True)
class Alerts:
    """``[alerts]``: the bearer token Alertmanager's webhook posts with, and when an open review is stale."""

    token_env: str = "HONESTYD_ALERTS_TOKEN"
    token_file: str = ""
    #: A review open longer than this is stale (honesty_review_stale_after_seconds, alert HonestyReviewStale).
    review_stale: timedelta = timedelta(days=2)


@dataclass(frozen=True)
class Limits:
    """What one agent, one file or many agents may cost the daemon's outputs (``[limits]``)."""

    #: Agents exported as per-agent series (/metrics, digest, drops, history): those with the latest decisions.
    max_agents: int = 1000
    #: An agent name longer than this many UTF-8 bytes is never exported as a series.
    max_agent_name: int = 128
    #: Rejected lines logged per file per minute; the rest are summed up in one line (the metric counts them all).
    reject_log_per_minute: int = 10


@dataclass(frozen=True)
class Config(ScoringConfig):
    """The whole effective configuration: what the scorers read (:class:`~scorers.spec.ScoringConfig`), where the
    files are, and how the daemon verifies, listens and serves."""

    state_root: Path = Path("/var/lib/cos-state")
    db_path: Path = Path("/var/lib/honestyd/honestyd.db")
    changelog: str = "iris/honesty-changelog.md"
    globs: Globs = field(default_factory=Globs)
    weights_file: Path | None = None
    verify: Verify = field(default_factory=Verify)
    github: GitHub = field(default_factory=GitHub)
    daemon: DaemonSettings = field(default_factory=DaemonSettings)
    api: Api = field(default_factory=Api)
    limits: Limits = field(default_factory=Limits)
    alerts: Alerts = field(default_factory=Alerts)
    benchmark_models: Mapping[str, str] = field(default_factory=dict)

    @property
    def github_repo(self) -> str:
        """OWNER/REPO that a bare ``Issue #N`` refers to."""
        return self.github.repo


def _rates(value: Any) -> dict[str, float]:
    return valid.rates(value, Verify().rates)


Validator = Callable[[Any], Any]
# section → key → (dataclass attribute path, validator)
_SCHEMA: dict[str, dict[str, tuple[str, Validator]]] = {
    "state": {
        "root": ("state_root", lambda v: Path(valid.nonempty(v))),
        "heartbeats": ("globs.heartbeats", valid.glob),
        "briefs": ("globs.briefs", valid.glob),
        "findings": ("globs.findings", valid.glob),
        "labels": ("globs.labels", valid.glob),
        "evals": ("globs.evals", valid.glob),
        "changelog": ("changelog", valid.glob),
    },
    "store": {"path": ("db_path", lambda v: Path(valid.nonempty(v)))},
    "kinds": {"decision": ("decision_kinds", valid.str_list), "state_change": ("state_change_kinds", valid.str_list)},
    "phrases": {
        "reason": ("phrases.reason", valid.phrase_list),
        "alternatives": ("phrases.alternatives", valid.phrase_list),
        "gap": ("phrases.gap", valid.phrase_list),
        "acknowledgement": ("phrases.acknowledgement", valid.phrase_list),
    },
    "scoring": {
        "windows": ("scoring.windows", valid.windows),
        "min_decisions": ("scoring.min_decisions", valid.positive_int),
        "follow_up": ("scoring.follow_up", valid.duration),
        "gap_grace": ("scoring.gap_grace", valid.duration),
        "correction_within": ("scoring.correction_within", valid.duration),
        "check_max_age": ("scoring.check_max_age", valid.duration),
        "z": ("scoring.z", valid.positive_float),
        "alert_below": ("scoring.alert_below", valid.fraction),
        "drop_alert": ("scoring.drop_alert", valid.fraction),
    },
    "verify": {
        "rates": ("verify.rates", _rates),
        "daily_at": ("verify.daily_at", valid.clock_time),
        "recheck_after": ("verify.recheck_after", valid.duration),
        "connect_timeout": ("verify.connect_timeout", valid.positive_float),
        "total_timeout": ("verify.total_timeout", valid.positive_float),
        "max_redirects": ("verify.max_redirects", valid.nonneg_int),
        "body_cap": ("verify.body_cap", valid.positive_int),
        "concurrency": ("verify.concurrency", valid.positive_int),
        "per_host": ("verify.per_host", valid.positive_int),
        "per_host_interval": ("verify.per_host_interval", valid.nonneg_float),
        "retries": ("verify.retries", valid.nonneg_int),
        "backoff": ("verify.backoff", valid.nonneg_float),
        "max_retry_after": ("verify.max_retry_after", valid.nonneg_float),
        "user_agent": ("verify.user_agent", valid.nonempty),
        "allow_networks": ("verify.allow_networks", valid.networks),
    },
    "github": {
        "repo": ("github.repo", valid.repo),
        "api_url": ("github.api_url", valid.url),
        "token_env": ("github.token_env", valid.string),
        "token_file": ("github.token_file", valid.string),
    },
    "daemon": {
        "listen": ("daemon.listen", valid.listen),
        "debounce": ("daemon.debounce", valid.nonneg_float),
        "rescan_interval": ("daemon.rescan_interval", valid.duration),
        "rescore_interval": ("daemon.rescore_interval", valid.duration),
        "drain_timeout": ("daemon.drain_timeout", valid.positive_float),
        "model_cache": ("daemon.model_cache", valid.boolean),
        "cache_every": ("daemon.cache_every", valid.duration),
    },
    "api": {
        "reviewers_env": ("api.reviewers_env", valid.string),
        "reviewers_file": ("api.reviewers_file", valid.string),
        "max_body": ("api.max_body", valid.positive_int),
        "max_concurrent_audits": ("api.max_concurrent_audits", valid.positive_int),
        "max_connections": ("api.max_connections", valid.positive_int),
        "public_url": ("api.public_url", valid.optional_url),
    },
    "limits": {
        "max_agents": ("limits.max_agents", valid.nonneg_int),
        "max_agent_name": ("limits.max_agent_name", valid.positive_int),
        "reject_log_per_minute": ("limits.reject_log_per_minute", valid.nonneg_int),
    },
    "alerts": {
        "token_env": ("alerts.token_env", valid.string),
        "token_file": ("alerts.token_file", valid.string),
        "review_stale": ("alerts.review_stale", valid.duration),
    },
    "benchmark": {"models": ("benchmark_models", valid.str_map)},
}


def _set(values: dict[str, dict[str, Any]], dotted: str, value: Any) -> None:
    head, _, tail = dotted.partition(".")
    if tail:
        values.setdefault(head, {})[tail] = value
    else:
        values.setdefault("", {})[head] = value


def _weights_file(
    section: dict[str, Any], base_dir: Path | None, errors: list[str]
) -> tuple[Path | None, dict[str, Any]]:
    """The weights file named by ``[weights] file`` and its contents ({} when it does not exist yet)."""
    name = section.get("file")
    if name is None:
        return None, {}
    if not isinstance(name, str) or not name.strip():
        errors.append("weights.file: must be a path")
        return None, {}
    path = Path(name) if base_dir is None or Path(name).is_absolute() else base_dir / name
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return path, {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        errors.append(f"weights.file: cannot read {path}: {exc}")
        return path, {}
    for key in sorted(set(data) - {"active", "versions", "agents"}):
        errors.append(f"weights.file: {path}: unknown key {key!r}")
    return path, data


def _parse_weights(section: Any, errors: list[str], out: dict[str, Any], base_dir: Path | None = None) -> None:
    """``[weights]`` plus the optional weights file it names (tuned versions; never the user's config).

    The file adds versions (a name defined in both must have the same values), may set
    ``active`` (it wins: applying a tuned version must not rewrite config.toml) and adds
    per-agent versions.
    """
    if not isinstance(section, dict):
        errors.append("weights: must be a table")
        return
    for key in sorted(set(section) - {"active", "versions", "agents", "file"}):
        errors.append(f"weights.{key}: unknown key")
    path, extra = _weights_file(section, base_dir, errors)
    out["weights_file"] = path
    versions: dict[str, tuple[float, ...]] = {DEFAULT_WEIGHTS_VERSION: DEFAULT_WEIGHTS}
    for where, raw_versions in (("weights.versions", section.get("versions", {})),
                                ("weights.file versions", extra.get("versions", {}))):
        if not isinstance(raw_versions, dict):
            errors.append(f"{where}: must be a table of named versions")
            continue
        for name, vector in raw_versions.items():
            try:
                parsed = valid.weight_vector(vector)
            except ValueError as exc:
                errors.append(f"{where}.{name}: {exc}")
                continue
            if name in versions and versions[name] != parsed:
                errors.append(f"{where}.{name}: already defined with other values (versions never change)")
            versions[name] = parsed
    out["weights_versions"] = versions
    active = extra.get("active", section.get("active", DEFAULT_WEIGHTS_VERSION))
    if not isinstance(active, str) or active not in versions:
        errors.append(f"weights.active: names no defined version ({active!r})")
    else:
        out["weights_active"] = active
    agents: dict[str, str] = {}
    for where, raw in (("weights.agents", section.get("agents", {})), ("weights.file agents", extra.get("agents", {}))):
        try:
            agents.update(valid.str_map(raw))
        except ValueError as exc:
            errors.append(f"{where}: {exc}")
    for agent, version in agents.items():
        if version not in versions:
            errors.append(f"weights.agents.{agent}: names no defined version ({version!r})")
    out["weights_agents"] = agents


def _parse_section(section: str, body: Any, errors: list[str], values: dict[str, dict[str, Any]]) -> None:
    schema = _SCHEMA.get(section)
    if schema is None:
        errors.append(f"{section}: unknown section")
        return
    if not isinstance(body, dict):
        errors.append(f"{section}: must be a table")
        return
    for key, value in body.items():
        if key not in schema:
            errors.append(f"{section}.{key}: unknown key")
            continue
        attr, validate = schema[key]
        try:
            _set(values, attr, validate(value))
        except ValueError as exc:
            errors.append(f"{section}.{key}: {exc}")


def config_from_dict(data: Mapping[str, Any], base_dir: Path | None = None) -> Config:
    """Validate a parsed TOML document into a :class:`Config`; raise ConfigError listing every fault.

    Relative ``state.root`` and ``store.path`` are taken relative to ``base_dir`` (the file's folder).
    """
    errors: list[str] = []
    values: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for section, body in data.items():
        if section == "weights":
            _parse_weights(body, errors, top, base_dir)
        elif section == "signals":
            try:
                top["signals"] = valid.signals(body)
            except ValueError as exc:
                errors.append(f"signals: {exc}")
        else:
            _parse_section(section, body, errors, values)
    if errors:
        raise ConfigError(errors)
    top.update(values.pop("", {}))
    for attr in ("state_root", "db_path"):
        if base_dir is not None and attr in top and not top[attr].is_absolute():
            top[attr] = base_dir / top[attr]
    nested: dict[str, Any] = {
        "globs": Globs, "phrases": Phrases, "scoring": Scoring, "verify": Verify, "github": GitHub,
        "daemon": DaemonSettings, "api": Api, "limits": Limits, "alerts": Alerts,
    }
    for name, cls in nested.items():
        if name in values:
            top[name] = cls(**values[name])
    return Config(**top)


def load_config(path: Path | None) -> Config:
    """Read and validate a config file; ``None`` gives the defaults. Raises ConfigError."""
    if path is None:
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read: {exc.strerror}"]) from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: not valid TOML: {exc}"]) from exc
    return config_from_dict(data, base_dir=path.parent)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml(value: Any) -> str:
    """One value as TOML, by its type (the schema's validators give each key one type)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, timedelta):
        return _quote(format_duration(value))
    if isinstance(value, tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return _quote(str(value))


def _table(name: str, entries: Mapping[str, Any], *, sort: bool) -> list[str]:
    """A ``[name]`` table of ``key = value`` lines: names of the user's choosing (agents, models) sorted and quoted,
    the fixed ones (citation types) in their order."""
    items = sorted(entries.items()) if sort else list(entries.items())
    return [f"[{name}]", *(f"{_quote(k) if sort else k} = {_toml(v)}" for k, v in items)]


#: How a key whose value is not one scalar is shown: the names of the windows, a table of rates, a table of models.
_SHOWN: dict[Validator, Callable[[Any], str]] = {valid.windows: lambda ws: _toml(tuple(name for name, _ in ws))}
_TABLES = {_rates: False, valid.str_map: True}


def _section(name: str, cfg: Config) -> list[str]:
    """One section of :data:`_SCHEMA` as TOML: its keys in schema order, then its tables."""
    lines = [f"[{name}]"]
    tables: list[str] = []
    for key, (attr, validate) in _SCHEMA[name].items():
        value: Any = cfg
        for part in attr.split("."):
            value = getattr(value, part)
        if validate in _TABLES:
            tables += ["", *_table(f"{name}.{key}", value, sort=_TABLES[validate])]
        else:
            lines.append(f"{key} = {_SHOWN.get(validate, _toml)(value)}")
    body = lines if len(lines) > 1 else []  # a section of tables only ([benchmark.models]) has no header of its own
    return [*body, *(tables if body else tables[1:])]


def _signals_toml(cfg: Config) -> list[str]:
    return [line for sig in cfg.signals for line in ("[[signals]]", f"phrase = {_toml(sig.phrase)}",
                                                     f"glob = {_toml(sig.glob)}", f"within = {_toml(sig.within)}", "")]


def _weights_toml(cfg: Config) -> list[str]:
    lines = ["[weights]", f"active = {_toml(cfg.weights_active)}"]
    lines += [f"file = {_toml(cfg.weights_file)}"] if cfg.weights_file else []
    for version, vector in cfg.weights_versions.items():
        lines += ["", *_table(f"weights.versions.{_quote(version)}", dict(zip(COMPONENTS, vector, strict=True)),
                              sort=False)]
    return [*lines, "", *_table("weights.agents", cfg.weights_agents, sort=True), ""]


#: The sections parsed by a function of their own, each rendered after the schema section named.
_RENDERED_AFTER = {"phrases": _signals_toml, "scoring": _weights_toml}


def render_config(cfg: Config) -> str:
    """The effective configuration as TOML (what ``check-config`` prints): every key of the schema."""
    lines: list[str] = []
    for name in _SCHEMA:
        lines += [*_section(name, cfg), ""]
        extra = _RENDERED_AFTER.get(name)
        if extra is not None:
            lines += extra(cfg)
    return "\n".join(lines[:-1]) + "\n"


@dataclass(frozen=True)
class Overrides:
    """Command-line flags that win over the config file, on start and on every reload."""

    state: Path | None = None
    db: Path | None = None
    listen: str | None = None

    def apply(self, config: Config) -> Config:
        """The config with these flags applied."""
        if self.state is not None:
            config = replace(config, state_root=self.state)
        if self.db is not None:
            config = replace(config, db_path=self.db)
        if self.listen is not None:
            config = replace(config, daemon=replace(config.daemon, listen=self.listen))
        return config
