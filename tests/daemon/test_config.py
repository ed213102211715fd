"""Configuration: the shipped file is the defaults; every bad key is named; check-config exits non-zero."""

from __future__ import annotations

import tomllib
from datetime import timedelta
from pathlib import Path

import pytest

from daemon.config import Config, ConfigError, config_from_dict, load_config, render_config
from tests.conftest import ROOT, Run


def test_shipped_config_equals_defaults() -> None:
    assert load_config(ROOT / "config.toml") == Config()


def test_empty_file_gives_defaults(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text("")
    assert load_config(p) == Config()


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"nope": {}}, "nope: unknown section"),
        ({"state": {"rooot": "/x"}}, "state.rooot: unknown key"),
        ({"scoring": {"min_decisions": 0}}, "scoring.min_decisions"),
        ({"scoring": {"windows": ["24h", "1w"]}}, "scoring.windows"),
        ({"scoring": {"follow_up": 5}}, "scoring.follow_up"),
        ({"state": {"heartbeats": "../x/*.jsonl"}}, "state.heartbeats"),
        ({"weights": {"active": "v9"}}, "weights.active"),
        ({"weights": {"versions": {"v1": {"citation_rate": 1}}}}, "weights.versions.v1"),
        ({"weights": {"versions": {"v1": dict.fromkeys(
            ("citation_rate", "refusal_correctness", "source_verifiability", "gap_surfacing_rate",
             "consistency_under_repeat", "self_correction_rate"), 0.2)}}}, "weights.versions.v1: weights must sum"),
        ({"weights": {"versions": {"v1": {"citation_rate": 1.5, "refusal_correctness": -0.5,
                                          "source_verifiability": 0, "gap_surfacing_rate": 0,
                                          "consistency_under_repeat": 0, "self_correction_rate": 0}}}},
         "weights.versions.v1: refusal_correctness must be a number ≥ 0"),
        ({"weights": {"agents": {"bob": "v9"}}}, "weights.agents.bob"),
        ({"signals": [{"phrase": "x", "glob": "a/*"}]}, "signals: entry 0"),
        ({"kinds": {"decision": "dm"}}, "kinds.decision"),
        ({"daemon": {"model_cache": "yes"}}, "daemon.model_cache: must be true or false"),
    ],
)
def test_bad_values_are_named(data: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict(data)
    assert any(e.startswith(key) for e in err.value.errors), err.value.errors


def test_all_errors_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        config_from_dict({"state": {"x": 1}, "scoring": {"z": -1}})
    assert len(err.value.errors) == 2


def test_values_parsed(tmp_path: Path) -> None:
    p = tmp_path / "c.toml"
    p.write_text(
        '[state]\nroot = "cos"\n[scoring]\nwindows = ["1h", "45d"]\nmin_decisions = 3\n'
        '[weights]\nactive = "flat"\n[weights.versions.flat]\ncitation_rate = 0.5\nrefusal_correctness = 0.1\n'
        "source_verifiability = 0.1\ngap_surfacing_rate = 0.1\nconsistency_under_repeat = 0.1\n"
        "self_correction_rate = 0.1\n[weights.agents]\nbob = \"flat\"\n"
    )
    cfg = load_config(p)
    assert cfg.state_root == tmp_path / "cos"
    assert cfg.scoring.windows == (("1h", timedelta(hours=1)), ("45d", timedelta(days=45)))
    assert cfg.scoring.longest_window == timedelta(days=45)
    assert cfg.weights_for("bob") == ("flat", (0.5, 0.1, 0.1, 0.1, 0.1, 0.1))
    assert cfg.weights_for("ann")[0] == "flat"


def test_check_config_cli(honestyd: Run, tmp_path: Path) -> None:
    good = honestyd("check-config", ROOT / "config.toml")
    assert 'active = "v2026.Q3"' in good.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[scoring]\nmin_decisions = "five"\n[typo]\n')
    proc = honestyd("check-config", bad, check=False)
    assert proc.returncode == 2
    assert "scoring.min_decisions: must be a positive integer" in proc.stderr
    assert "typo: unknown section" in proc.stderr
    broken = tmp_path / "broken.toml"
    broken.write_text("[scoring\n")
    assert "not valid TOML" in honestyd("check-config", broken, check=False).stderr


def test_rendered_config_round_trips(honestyd: Run, tmp_path: Path) -> None:
    out = honestyd("check-config", ROOT / "config.toml").stdout
    p = tmp_path / "again.toml"
    p.write_text(out)
    assert load_config(p) == load_config(ROOT / "config.toml")


def test_every_key_of_the_schema_is_rendered_and_read_back() -> None:
    """render_config is derived from the schema: a configuration unlike the defaults in every section (tables,
    arrays of tables, weights versions and agents included) is rendered with every key and reads back equal."""
    from daemon.config import _SCHEMA

    weights = {"citation_rate": 0.5, "refusal_correctness": 0.1, "source_verifiability": 0.1,
               "gap_surfacing_rate": 0.1, "consistency_under_repeat": 0.1, "self_correction_rate": 0.1}
    data = {
        "state": {"root": "/x/y", "heartbeats": "hb/*.jsonl", "evals": "e/*.json", "changelog": "c/log.md"},
        "store": {"path": "/db/h.db"}, "kinds": {"decision": ["dm", "ask"]}, "phrases": {"gap": ["no", "nada"]},
        "signals": [{"phrase": "no data", "glob": "evals/*.json", "within": "2h"},
                    {"phrase": "x \"quoted\"", "glob": "a/*", "within": "1d"}],
        "scoring": {"windows": ["1h", "45d"], "z": 2, "follow_up": "90s", "min_decisions": 3},
        "weights": {"versions": {"x": weights}, "active": "x", "agents": {"bo": "x", "a\"b": "v2026.Q3"}},
        "verify": {"rates": {"url": 0.5}, "allow_networks": ["10.0.0.0/8"], "user_agent": "ua \\ back"},
        "github": {"repo": "a/b"}, "daemon": {"model_cache": False, "debounce": 0, "listen": "0.0.0.0:1"},
        "api": {"max_body": 99}, "limits": {"max_agents": 0}, "benchmark": {"models": {"m1": "gpt", "z": "q"}},
    }
    cfg = config_from_dict(data)
    rendered = tomllib.loads(render_config(cfg))
    assert [(s, k) for s, keys in _SCHEMA.items() for k in keys if k not in rendered.get(s, {})] == []
    assert config_from_dict(rendered) == cfg
