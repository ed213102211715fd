"""The OpenAPI 3.0 description of the HTTP API, served at ``GET /openapi.json``.

Written by hand as a dict (no generator, no extra dependency) and built per request from the config in
force, so the ``window`` enum and the ``weights`` versions follow a SIGHUP reload. Every route of
:func:`daemon.http.app.make_app` is here, with the error statuses it can answer; ``tests/system/test_api_hardening.py``
checks that the two lists agree and runs schemathesis against a live daemon with this document.
"""

from __future__ import annotations

from typing import Any

from daemon import __version__
from daemon.config import COMPONENTS, Config
from daemon.http import openapi_reviews

JSON = "application/json"
TEXT = "text/plain"
HTML = "text/html"

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _content(schema: Schema, *media: str) -> dict[str, Any]:
    return {m: {"schema": schema} for m in media or (JSON,)}


def _response(description: str, schema: Schema | None = None, *media: str) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description}
    if schema is not None:
        out["content"] = _content(schema, *media)
    return out


_STRING: Schema = {"type": "string"}
# Errors raised by aiohttp itself (an unmatched route, for one) are plain text; the handlers' are JSON.
_NOT_FOUND = {"description": "Unknown agent (JSON) or no such route (text)",
              "content": {JSON: {"schema": _ref("Error")}, TEXT: {"schema": _STRING}}}
_BAD_WINDOW = _response("Unknown window; `allowed` lists the configured ones", _ref("Error"), JSON)
_STARTING = _response("No evaluation yet (the daemon is starting)", _STRING, TEXT)
_BUSY = {**_response("[api] max_concurrent_audits requests of this kind are being answered; retry after the"
                     " seconds `Retry-After` names", _ref("Error")),
         "headers": {"Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}}}


def _window_param(config: Config) -> dict[str, Any]:
    names = [name for name, _ in config.scoring.windows]
    return {"name": "window", "in": "query", "required": False,
            "description": f"Rolling window (default {names[0]!r}, the first configured).",
            "schema": {"type": "string", "enum": names}}


_AGENT_PARAM: dict[str, Any] = {
    "name": "agent", "in": "path", "required": True,
    "description": "Agent name as it appears in the events (looked up in the latest evaluation, never a path).",
    "schema": {"type": "string", "minLength": 1},
}


def _schemas(config: Config) -> dict[str, Schema]:
    number_or_null: Schema = {"type": "number", "nullable": True}
    counts = {"type": "object", "required": ["pass", "counted", "pending", "ratio"], "properties": {
        "pass": {"type": "integer"}, "counted": {"type": "integer"}, "pending": {"type": "integer"},
        "ratio": number_or_null}}
    score_fields: dict[str, Schema] = {
        "decisions": {"type": "integer"},
        "insufficient": {"type": "boolean"},
        "false_gaps": {"type": "integer"},
        "components": {"type": "object", "properties": {c: _ref("ComponentCounts") for c in COMPONENTS},
                       "required": list(COMPONENTS)},
        "score": number_or_null,
        "percent": {"type": "integer", "nullable": True},
        "coverage": {"type": "number"},
        "interval": {"type": "object", "nullable": True, "required": ["low", "high"],
                     "properties": {"low": {"type": "number"}, "high": {"type": "number"}}},
        "weights_version": _STRING,
    }
    head: dict[str, Schema] = {"at": {"type": "string", "format": "date-time"}, "window": _STRING, "agent": _STRING}
    outcome = {"type": "object", "required": ["mark", "why", "pass", "counted"], "properties": {
        "mark": _STRING, "why": _STRING, "pass": {"type": "integer"}, "counted": {"type": "integer"}}}
    decision_row = {"type": "object", "required": ["id", "ts", "kind", "source", "citations", "outcomes"],
                    "properties": {
                        "id": _STRING, "ts": _STRING, "kind": _STRING, "thread": {"type": "string", "nullable": True},
                        "source": {"type": "object", "properties": {
                            "path": _STRING, "line": {"type": "integer", "nullable": True}}},
                        "citations": {"type": "array", "items": {"type": "object", "properties": {
                            "type": _STRING, "target": _STRING}}},
                        "outcomes": {"type": "object", "additionalProperties": outcome}}}
    summary = {"type": "object", "required": ["score", "percent", "insufficient", "decisions", "weights_version",
                                              "audit"],
               "properties": {"score": number_or_null, "percent": {"type": "integer", "nullable": True},
                              "insufficient": {"type": "boolean"}, "decisions": {"type": "integer"},
                              "weights_version": _STRING, "audit": _STRING}}
    return {
        "Error": {"type": "object", "required": ["error"], "properties": {
            "error": _STRING, "allowed": {"type": "array", "items": _STRING}, "decision": _STRING,
            "path": _STRING}},
        "ComponentCounts": counts,
        "AgentScore": {"type": "object", "required": [*head, *score_fields],
                       "properties": {**head, **score_fields}},
        "Audit": {"type": "object", "required": [*head, *score_fields, "weights", "decision_rows"],
                  "properties": {**head, **score_fields,
                                 "weights": {"type": "object", "additionalProperties": {"type": "number"}},
                                 "decision_rows": {"type": "array", "items": decision_row}}},
        "Agents": {"type": "object", "required": ["at", "weights_version", "agents"], "properties": {
            "at": {"type": "string", "format": "date-time"}, "weights_version": _STRING,
            "agents": {"type": "object", "description": "agent → window → summary",
                       "additionalProperties": {"type": "object", "additionalProperties": summary}}}},
        "History": {"type": "object", "required": ["agent", "window", "weights_version", "points"], "properties": {
            "agent": _STRING, "window": _STRING, "weights_version": _STRING,
            "points": {"type": "array", "items": {"type": "object", "required": ["day", "decisions"], "properties": {
                "day": {"type": "string", "format": "date"}, "decisions": {"type": "integer"},
                "score": number_or_null, "percent": {"type": "integer", "nullable": True},
                "coverage": {"type": "number"}}}}}},
        "LabelRequest": {
            "type": "object", "required": ["decision", "value"], "additionalProperties": False,
            "properties": {
                "decision": {"type": "string", "minLength": 1, "maxLength": 1000,
                             "description": "The id of the labelled decision."},
                "value": {"type": "string", "enum": ["up", "down"]},
                "ts": {"type": "string", "format": "date-time",
                       "description": "RFC 3339 with an offset; the daemon's clock when absent."},
                "reviewer": {"type": "string", "description": "Must be the token's own reviewer when given."},
            },
        },
        "LabelCreated": {"type": "object", "required": ["ok", "label"], "properties": {
            "ok": {"type": "boolean"},
            "label": {"type": "object", "required": ["ts", "decision", "value", "reviewer"], "properties": {
                "ts": _STRING, "decision": _STRING, "value": _STRING, "reviewer": _STRING}}}},
    }


_PAGE_400 = _response("A bad query value: the page says which and what is allowed", _STRING, HTML)
_PAGE_404 = {"description": "Unknown agent (HTML) or no such route (text)",
             "content": {HTML: {"schema": _STRING}, TEXT: {"schema": _STRING}}}
_PAGE_PARAMS: list[dict[str, Any]] = [
    {"name": "page", "in": "query", "required": False, "description": "Page of 100 decisions, newest first.",
     "schema": {"type": "integer", "minimum": 1, "maximum": 1_000_000}},
    {"name": "only", "in": "query", "required": False, "description": "`failures`: rows failing a component.",
     "schema": {"type": "string", "enum": ["failures"]}},
    {"name": "component", "in": "query", "required": False,
     "description": "Rows the component applies to (with only=failures: rows failing it).",
     "schema": {"type": "string", "enum": list(COMPONENTS)}},
    {"name": "unlabelled", "in": "query", "required": False, "description": "1: rows no reviewer has labelled.",
     "schema": {"type": "string", "enum": ["0", "1"]}},
]
_SORT_PARAM = {"name": "sort", "in": "query", "required": False, "description": "Order of the agents.",
               "schema": {"type": "string", "enum": ["name", "score", "change"]}}
FORM = "application/x-www-form-urlencoded"
_SEE_OTHER = {"description": "Done: on to `Location` (a local path)",
              "headers": {"Location": {"description": "Where to go next", "schema": _STRING}}}
_REFUSED = _response("The form token is missing or wrong, or the form came from another site", _STRING, HTML)
_SLOW = _response("Form not received in time", _STRING, TEXT)


_REVIEW_404 = {"description": "No such review (HTML) or no such route (text)",
               "content": {HTML: {"schema": _STRING}, TEXT: {"schema": _STRING}}}
_REVIEW_PARAM = {"name": "review", "in": "path", "required": True, "description": "The review's id.",
                 "schema": {"type": "string", "minLength": 1}}


def _form(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:  # OpenAPI 3.0 takes no empty list here
        schema["required"] = required
    return {"required": True, "content": {FORM: {"schema": schema}}}


def _reviewer_paths(config: Config) -> dict[str, Any]:
    """The sign-in, labelling and review routes of the reviewer's pages (HTML forms, session cookie)."""
    large = _response(f"Form larger than [api] max_body ({config.api.max_body} bytes)", _STRING, TEXT)
    token = {"csrf_token": {**_STRING, "description": "The form token of the page the form is on (without it: 403)"}}
    unsupported = _response(f"Not a form ({FORM})", _STRING, TEXT)
    following = {"next": {**_STRING, "description": "Where to go after (a local path; anything else: /)"}}
    return {
        "/login": {
            "get": {"summary": "The sign-in form (HTML)",
                    "parameters": [{"name": "next", "in": "query", "required": False, "schema": _STRING}],
                    "responses": {"200": _response("Sign-in page", _STRING, HTML)}},
            "post": {"summary": "Sign a reviewer in with their token; a session cookie on success",
                     "requestBody": _form({"reviewer": _STRING, "token": _STRING, **token, **following},
                                          ["reviewer", "token"]),
                     "responses": {"303": _SEE_OTHER, "401": _response("Wrong reviewer or token", _STRING, HTML),
                                   "403": _REFUSED, "408": _SLOW, "413": large, "415": unsupported,
                                   "429": {**_response("Too many failed sign-ins", _STRING, HTML), "headers": {
                                       "Retry-After": {"description": "Seconds", "schema": {"type": "integer"}}}}}},
        },
        "/logout": {"post": {"summary": "End the session", "requestBody": _form(token, []),
                             "responses": {"303": _SEE_OTHER, "403": _REFUSED, "408": _SLOW, "413": large,
                                           "415": unsupported}}},
        "/labels": {"post": {
            "summary": "A signed-in reviewer's thumbs-up/down (and note) on a decision, appended to labels/api.jsonl",
            "requestBody": _form({"decision": {"type": "string", "minLength": 1, "maxLength": 1000},
                                  "value": {"type": "string", "enum": ["up", "down"]},
                                  "note": {"type": "string", "maxLength": 1000}, **token, **following},
                                 ["decision", "value"]),
            "responses": {"303": _SEE_OTHER, "400": _response("A bad field (the page says which)", _STRING, HTML),
                          "403": _REFUSED, "404": _response("No decision with this id was ever stored", _STRING,
                                                            HTML),
                          "408": _SLOW, "413": large, "415": unsupported,
                          "500": _response("Label not written", _STRING, HTML),
                          "503": _response("Decisions not loaded yet", _STRING, HTML)}}},
        "/reviews": {"get": {
            "summary": "The review queue (HTML): open reviews first, oldest first, then the closed ones",
            "parameters": [{"name": "state", "in": "query", "required": False,
                            "schema": {"type": "string", "enum": ["open", "closed"]}}],
            "responses": {"200": _response("Queue page", _STRING, HTML), "400": _PAGE_400, "429": _BUSY}}},
        "/reviews/{review}": {"get": {
            "summary": "One review (HTML): what it recorded beside the live audit of its decisions, the forms",
            "parameters": [_REVIEW_PARAM],
            "responses": {"200": _response("Review page", _STRING, HTML),
                          "404": _REVIEW_404, "429": _BUSY}}},
        "/reviews/{review}/close": {"post": {
            "summary": "A signed-in reviewer closes an open review with a note (appended to reviews/honestyd.jsonl)",
            "parameters": [_REVIEW_PARAM],
            "requestBody": _form({"note": {"type": "string", "minLength": 1, "maxLength": 4000, "pattern": "\\S",
                                           "description": "What the review found"}, **token}, ["note"]),
            "responses": {"303": _SEE_OTHER, "400": _response("No note, or one too long", _STRING, HTML),
                          "403": _REFUSED, "404": _REVIEW_404, "408": _SLOW,
                          "409": _response("The review is closed already", _STRING, HTML), "413": large,
                          "415": unsupported, "500": _response("Not written: the review stays open", _STRING, HTML)}}},
        "/static/honestyd.css": {"get": {"summary": "The pages' stylesheet",
                                         "responses": {"200": _response("CSS", _STRING, "text/css")}}},
    }


def _agent_get(config: Config, summary: str, ok: dict[str, Any], extra: list[dict[str, Any]] | None = None
               ) -> dict[str, Any]:
    return {"get": {
        "summary": summary,
        "parameters": [_AGENT_PARAM, _window_param(config), *(extra or [])],
        "responses": {"200": ok, "400": _BAD_WINDOW, "404": _NOT_FOUND, "503": _STARTING},
    }}


def document(config: Config) -> dict[str, Any]:
    """The OpenAPI 3.0.3 document for ``config`` (its windows and weights versions)."""
    versions = sorted(config.weights_versions)
    weights_param = {"name": "weights", "in": "query", "required": False,
                     "description": "Weights version to re-render the stored counts with (default: the agent's).",
                     "schema": {"type": "string", "enum": versions}}
    history_ok = _response("Daily points in the window", _ref("History"))
    history = _agent_get(config, "An agent's daily scores under any weights version", history_ok, [weights_param])
    history["get"]["responses"]["400"] = _response("Unknown window or weights version", _ref("Error"))
    audit = _agent_get(config, "Every decision, every outcome, the arithmetic", _response("Audit", _ref("Audit")))
    page = _agent_get(config, "The HTML agent page: score, chart, label progress, decisions a page at a time",
                      _response("Agent page", _STRING, HTML), _PAGE_PARAMS)
    page["get"]["responses"].update({"400": _PAGE_400, "404": _PAGE_404})
    for heavy in (history, audit, page):  # the requests capped by [api] max_concurrent_audits (daemon/http/handling.py)
        heavy["get"]["responses"]["429"] = _BUSY
    paths: dict[str, Any] = {
        "/metrics": {"get": {"summary": "Prometheus text exposition of the latest evaluation",
                             "responses": {"200": _response("Metrics (text format 0.0.4)", _STRING, TEXT)}}},
        "/healthz": {"get": {"summary": "Liveness: the event loop answers",
                             "responses": {"200": _response("ok", _STRING, TEXT)}}},
        "/readyz": {"get": {"summary": "Readiness: a first evaluation exists",
                            "responses": {"200": _response("ready", _STRING, TEXT),
                                          "503": _response("starting", _STRING, TEXT)}}},
        "/": {"get": {"summary": "Every agent in every window (HTML)", "parameters": [_SORT_PARAM],
                      "responses": {"200": _response("Index page", _STRING, HTML), "400": _PAGE_400, "429": _BUSY,
                                    "503": _STARTING}}},
        **_reviewer_paths(config),
        "/methodology": {"get": {"summary": "Formula, weights and changelog (HTML)",
                                 "responses": {"200": _response("Methodology page", _STRING, HTML), "429": _BUSY}}},
        "/openapi.json": {"get": {"summary": "This document",
                                  "responses": {"200": _response("OpenAPI 3.0 document", {"type": "object"})}}},
        "/v1/agents": {"get": {"summary": "Every agent's score in every window",
                               "responses": {"200": _response("Scores", _ref("Agents")), "503": _STARTING}}},
        "/v1/agents/{agent}": _agent_get(config, "One agent in one window, as `honestyd score --json` gives it",
                                         _response("Score", _ref("AgentScore"))),
        "/v1/agents/{agent}/audit": audit,
        "/v1/agents/{agent}/history": history,
        "/agents/{agent}": page,
        "/v1/labels": {"post": {
            "summary": "A thumbs-up/down from an authorised reviewer, appended to labels/api.jsonl",
            "security": [{"reviewer": []}],
            "requestBody": {"required": True, "content": _content(_ref("LabelRequest"))},
            "responses": {
                "201": _response("Appended", _ref("LabelCreated")),
                "400": _response("Not a JSON object, an unknown field or a bad value", _ref("Error")),
                "401": _response("No bearer token", _ref("Error")),
                "403": _response("Token not authorised, or labelling as another reviewer", _ref("Error")),
                "404": _response("No decision with this id was ever stored", _ref("Error")),
                "408": _response("Body not received in time", _ref("Error")),
                "413": _response(f"Body larger than [api] max_body ({config.api.max_body} bytes)", _ref("Error")),
                "503": _response("Decisions not loaded yet (the daemon is starting or rebuilding its model)",
                                 _ref("Error")),
                "500": _response("Label not written: labels/api.jsonl (or labels/) is not a regular file (directory)"
                                 " inside the state root, or the write failed; `path` names the file", _ref("Error")),
            },
        }},
        **openapi_reviews.paths(config),
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "honestyd", "version": __version__,
                 "description": "Honesty scores of AI agents: metrics, scores, audits, history, reviewer labels and"
                                " the review queue."},
        "paths": paths,
        "components": {
            "schemas": {**_schemas(config), **openapi_reviews.schemas()},
            "securitySchemes": {"reviewer": {"type": "http", "scheme": "bearer",
                                             "description": "A reviewer token from [api] reviewers_env/_file."},
                                "alerts": {"type": "http", "scheme": "bearer",
                                           "description": "The token of [alerts] token_env/_file."}},
        },
    }
