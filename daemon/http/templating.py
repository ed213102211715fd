"""The pages' templates: one Jinja2 environment (autoescape on, undefined names an error), its filters, and rendering.

The app gets it through ``aiohttp_jinja2.setup`` (:func:`setup`); the pure page functions of
:mod:`daemon.http.pages` render with :func:`environment`, the same options. Every value a template prints is escaped
unless it is a :class:`~markupsafe.Markup` made here (the charts, rendered by their own template).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web
from markupsafe import Markup

from collectors.citations import Citation
from collectors.rfc3339 import format_ts
from daemon.http.charts import Chart
from daemon.http.urls import agent_href

TEMPLATES = Path(__file__).parent / "templates"
STATIC = Path(__file__).parent / "static"
#: The stylesheet every page links (served by honestyd itself: no external asset).
STYLESHEET = "/static/honestyd.css"


def when(ts: datetime) -> str:
    """A time as the pages show it: RFC 3339 in UTC, to the second."""
    return format_ts(ts.replace(microsecond=0))


def anchor(decision_id: str) -> str:
    """The fragment id of a decision's row: a hash, since an id may hold any character."""
    return "d-" + hashlib.blake2b(decision_id.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


#: What a citation link may point at: http(s) with a host, and no character a URL must not hold bare.
_URL_SAFE = ":/?#[]@!$&'()*+,;=%-._~"


def cite_href(c: Citation) -> str | None:
    """The link of a ``url`` citation (http or https with a host), percent-encoded; None for anything else."""
    if c.type != "url":
        return None
    try:
        parts = urlsplit(c.target)
    except ValueError:  # an invalid IPv6 literal, say
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return quote(c.target, safe=_URL_SAFE, errors="backslashreplace")


def percent(score: float | None) -> str:
    """A fraction as a whole percent (``87 %``), ``—`` for none."""
    return "—" if score is None else f"{score * 100:.0f} %"


FILTERS: Mapping[str, Callable[..., Any]] = {
    "when": when, "anchor": anchor, "cite_href": cite_href, "agent_href": agent_href, "percent": percent,
}


def _options() -> dict[str, Any]:
    return {"loader": jinja2.FileSystemLoader(TEMPLATES), "autoescape": True, "undefined": jinja2.StrictUndefined,
            "trim_blocks": True, "lstrip_blocks": True}


def _globals(env: jinja2.Environment) -> jinja2.Environment:
    env.globals["stylesheet"] = STYLESHEET
    env.globals["svg"] = functools.partial(svg, env)
    return env


@functools.cache
def environment() -> jinja2.Environment:
    """The environment of the pure page functions (the app's is made by :func:`setup`, with the same options)."""
    env = jinja2.Environment(**_options())
    env.filters.update(FILTERS)
    return _globals(env)


def setup(app: web.Application) -> None:
    """Give ``app`` the templates (``aiohttp_jinja2.get_env(app)`` then returns them)."""
    _globals(aiohttp_jinja2.setup(app, filters=dict(FILTERS), default_helpers=False, **_options()))


def render(env: jinja2.Environment, name: str, context: Mapping[str, Any]) -> str:
    """The page ``name`` rendered with ``context``, sendable as UTF-8.

    A lone surrogate (an agent's JSON "\\ud800" escape) cannot be sent as UTF-8: the response would fail with a 500;
    backslashreplace keeps it visible and distinct, as the metrics do (tests/daemon/test_hostile.py).
    """
    page = env.get_template(name).render(context)
    return page.encode("utf-8", "backslashreplace").decode("utf-8")


def svg(env: jinja2.Environment, c: Chart, css: str = "chart") -> Markup:
    """A chart as inline SVG (its own template; every text in it escaped)."""
    return Markup(env.get_template("_chart.svg").render(c=c, css=css))
