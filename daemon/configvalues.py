"""The values of config.toml's keys: each validator returns the parsed value or raises ValueError with the reason
(daemon/config.py names the key)."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from collectors.rfc3339 import parse_duration
from scorers.spec import COMPONENTS, Signal


def string(value: Any) -> str:
    """A string."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string, not {type(value).__name__}")
    return value


def boolean(value: Any) -> bool:
    """true or false."""
    if not isinstance(value, bool):
        raise ValueError(f"must be true or false, not {type(value).__name__}")
    return value


def nonempty(value: Any) -> str:
    """A string with more than white space."""
    if not string(value).strip():
        raise ValueError("must not be empty")
    return str(value)


def glob(value: Any) -> str:
    """A relative glob inside the state root."""
    text = nonempty(value)
    if text.startswith("/") or ".." in text.split("/"):
        raise ValueError("must be a relative glob inside the state root")
    return text


def str_list(value: Any) -> tuple[str, ...]:
    """A list of non-empty strings."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError("must be a list of non-empty strings")
    return tuple(value)


def phrase_list(value: Any) -> tuple[str, ...]:
    """A list of phrases, lower-cased."""
    return tuple(v.lower() for v in str_list(value))


def positive_int(value: Any) -> int:
    """An integer ≥ 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError("must be a positive integer")
    return value


def finite(value: int | float) -> bool:
    """math.isfinite that also says no to an integer beyond float range (tomllib reads any size)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def nonneg_int(value: Any) -> int:
    """An integer ≥ 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError("must be an integer ≥ 0")
    return value


def fraction(value: Any) -> float:
    """A number between 0 and 1."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not finite(value) or not 0 <= value <= 1:
        raise ValueError("must be a number between 0 and 1")
    return float(value)


def positive_float(value: Any) -> float:
    """A finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (value > 0 and finite(value)):
        raise ValueError("must be a positive number")
    return float(value)


def duration(value: Any) -> timedelta:
    """A duration like ``5m`` longer than zero."""
    delta = parse_duration(value)
    if delta <= timedelta(0):
        raise ValueError("must be longer than zero")
    return delta


def windows(value: Any) -> tuple[tuple[str, timedelta], ...]:
    """Window names, each a duration, none repeated."""
    names = str_list(value)
    if not names:
        raise ValueError("must name at least one window")
    if len(set(names)) != len(names):
        raise ValueError("must not repeat a window")
    return tuple((name, duration(name)) for name in names)


def str_map(value: Any) -> dict[str, str]:
    """A table of name = "string"."""
    if not isinstance(value, dict) or not all(isinstance(v, str) and v for v in value.values()):
        raise ValueError("must be a table of name = \"string\"")
    return dict(value)


def weight_vector(value: Any) -> tuple[float, ...]:
    """A weight for each of the six components, summing to 1."""
    if not isinstance(value, dict):
        raise ValueError("must be a table of component = weight")
    unknown = sorted(set(value) - set(COMPONENTS))
    if unknown:
        raise ValueError(f"unknown component {unknown[0]!r}")
    missing = [c for c in COMPONENTS if c not in value]
    if missing:
        raise ValueError(f"must name all six components; {missing[0]!r} is missing")
    weights = []
    for c in COMPONENTS:
        w = value[c]
        if isinstance(w, bool) or not isinstance(w, int | float) or not finite(w) or w < 0:
            raise ValueError(f"{c} must be a number ≥ 0")
        weights.append(float(w))
    if abs(math.fsum(weights) - 1.0) > 1e-9:
        raise ValueError(f"weights must sum to 1 (±1e-9), not {math.fsum(weights)!r}")
    return tuple(weights)


def signals(value: Any) -> tuple[Signal, ...]:
    """The ``[[signals]]`` tables {phrase, glob, within}."""
    if not isinstance(value, list):
        raise ValueError("must be an array of tables {phrase, glob, within}")
    signals = []
    for i, item in enumerate(value):
        if not isinstance(item, dict) or set(item) != {"phrase", "glob", "within"}:
            raise ValueError(f"entry {i} must have exactly the keys phrase, glob, within")
        try:
            phrase = nonempty(item["phrase"]).lower()
            signals.append(Signal(phrase, glob(item["glob"]), duration(item["within"])))
        except ValueError as exc:
            raise ValueError(f"entry {i}: {exc}") from exc
    return tuple(signals)


def nonneg_float(value: Any) -> float:
    """A finite number ≥ 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not (value >= 0 and finite(value)):
        raise ValueError("must be a number ≥ 0")
    return float(value)


def rates(value: Any, defaults: Mapping[str, float]) -> dict[str, float]:
    """Sampling rates per citation type, over ``defaults`` (which name every type)."""
    if not isinstance(value, dict):
        raise ValueError("must be a table of type = rate")
    rates = dict(defaults)
    for key, rate in value.items():
        if key not in rates:
            raise ValueError(f"unknown citation type {key!r} (url, path, run, issue)")
        try:
            rates[key] = fraction(rate)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from exc
    return rates


def clock_time(value: Any) -> str:
    """A UTC time of day like ``03:00``."""
    text = string(value)
    hh, sep, mm = text.partition(":")
    if not (sep and hh.isdigit() and mm.isdigit() and len(mm) == 2 and int(hh) < 24 and int(mm) < 60):
        raise ValueError("must be a UTC time of day like \"03:00\"")
    return f"{int(hh):02d}:{mm}"


def networks(value: Any) -> tuple[str, ...]:
    """A list of IP networks."""
    items = str_list(value)
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError as exc:
            raise ValueError(f"{item!r} is not a network: {exc}") from exc
    return tuple(items)


def url(value: Any) -> str:
    """An http(s) URL, without a trailing ``/``."""
    text = nonempty(value)
    if not text.startswith(("http://", "https://")):
        raise ValueError("must be an http(s) URL")
    return text.rstrip("/")


def optional_url(value: Any) -> str:
    """An http(s) URL without a trailing ``/``, or empty."""
    return url(value) if string(value) else ""


def repo(value: Any) -> str:
    """OWNER/REPO, or empty."""
    text = string(value)
    if text and (text.count("/") != 1 or not all(text.split("/"))):
        raise ValueError("must be OWNER/REPO or empty")
    return text


def listen(value: Any) -> str:
    """HOST:PORT."""
    host, sep, port = nonempty(value).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:9478")
    return str(value)
