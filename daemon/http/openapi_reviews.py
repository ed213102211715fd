"""The review queue's and the Alertmanager webhook's part of the OpenAPI document (daemon/http/openapi.py)."""

from __future__ import annotations

from typing import Any

from daemon.config import Config

Schema = dict[str, Any]

_STRING: Schema = {"type": "string"}
_TIME: Schema = {"type": "string", "format": "date-time"}
_NUMBER_OR_NULL: Schema = {"type": "number", "nullable": True}
_INT_OR_NULL: Schema = {"type": "integer", "nullable": True}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _answer(description: str, schema: Schema) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _summary_fields() -> dict[str, Schema]:
    return {
        "id": _STRING, "agent": _STRING, "reason": {"type": "string", "enum": ["below", "drop"]},
        "why": {"type": "string", "description": "The reason in words, e.g. 'dropped from 92 % to 64 % in 24h'."},
        "state": {"type": "string", "enum": ["open", "closed"]}, "window": {"type": "string", "nullable": True},
        "opened_at": _TIME, "since": {**_TIME, "description": "When it last opened (reopened)."},
        "age_seconds": {"type": "number"}, "rounds": {"type": "integer"}, "by": _STRING,
        "progress": {"type": "object", "required": ["labelled", "decisions", "text"], "properties": {
            "labelled": {"type": "integer"}, "decisions": {"type": "integer"}, "text": _STRING}},
        "score": _NUMBER_OR_NULL, "percent": _INT_OR_NULL,
        "interval": {"type": "array", "nullable": True, "items": {"type": "number"}},
        "decisions": _INT_OR_NULL, "weights_version": {"type": "string", "nullable": True},
        "links": {"type": "object", "properties": {"page": _STRING, "api": _STRING,
                                                   "audit": {"type": "string", "nullable": True}}},
        "closed": {"type": "object", "nullable": True, "properties": {
            "at": _TIME, "reviewer": _STRING, "note": _STRING}},
    }


def schemas() -> dict[str, Schema]:
    """The schemas of the review routes' bodies."""
    fields = _summary_fields()
    failed = {"type": "object", "required": ["id", "components", "source", "label"], "properties": {
        "id": _STRING, "ts": _STRING, "kind": _STRING, "components": {"type": "array", "items": _STRING},
        "source": {"type": "string", "description": "file:line"},
        "label": {"type": "object", "nullable": True, "properties": {
            "value": _STRING, "reviewer": _STRING, "at": _TIME}}}}
    detail = {
        **fields, "threshold": _NUMBER_OR_NULL, "drop_alert": _NUMBER_OR_NULL,
        "reference": {"type": "object", "nullable": True}, "failed": {"type": "array", "items": failed},
        "failed_total": {"type": "integer"},
        "alerts": {"type": "array", "items": {"type": "object", "properties": {
            "alertname": _STRING, "status": _STRING, "fingerprint": _STRING, "starts_at": _STRING, "at": _TIME}}},
        "history": {"type": "array", "items": {"type": "object", "required": ["ts", "event"], "properties": {
            "ts": _TIME, "event": _STRING}}},
    }
    return {
        "ReviewSummary": {"type": "object", "required": list(fields), "properties": fields},
        "Review": {"type": "object", "required": list(detail), "properties": detail},
        "Reviews": {"type": "object", "required": ["at", "state", "reviews"], "properties": {
            "at": _TIME, "state": {"type": "string", "nullable": True},
            "reviews": {"type": "array", "items": _ref("ReviewSummary")}}},
        "CloseRequest": {"type": "object", "required": ["note"], "additionalProperties": False, "properties": {
            "note": {"type": "string", "minLength": 1, "maxLength": 4000, "pattern": "\\S",
                     "description": "What the review found."}}},
        "Closed": {"type": "object", "required": ["ok", "review"], "properties": {
            "ok": {"type": "boolean"}, "review": _ref("Review")}},
        "AlertmanagerPayload": {
            "type": "object", "required": ["version", "status", "alerts"],
            "description": "Alertmanager's webhook payload, version 4.",
            "properties": {
                "version": {"type": "string", "enum": ["4"]}, "status": {"type": "string",
                                                                         "enum": ["firing", "resolved"]},
                "receiver": _STRING, "groupKey": _STRING,
                "alerts": {"type": "array", "items": {
                    "type": "object", "required": ["status", "labels", "startsAt"], "properties": {
                        "status": {"type": "string", "enum": ["firing", "resolved"]},
                        "labels": {"type": "object", "additionalProperties": _STRING},
                        "startsAt": _TIME, "fingerprint": _STRING}}}}},
        "AlertsRecorded": {"type": "object", "required": ["ok", "alerts", "recorded", "ignored", "reviews"],
                           "properties": {"ok": {"type": "boolean"}, "alerts": {"type": "integer"},
                                          "recorded": {"type": "integer"}, "ignored": {"type": "integer"},
                                          "reviews": {"type": "array", "items": _STRING}}},
    }


def paths(config: Config) -> dict[str, Any]:
    """The review routes."""
    error = _ref("Error")
    review_param = {"name": "review", "in": "path", "required": True, "description": "The review's id.",
                    "schema": {"type": "string", "minLength": 1}}
    too_big = _answer(f"Body larger than [api] max_body ({config.api.max_body} bytes)", error)
    late = _answer("Body not received in time", error)
    return {
        "/v1/reviews": {"get": {
            "summary": "The review queue: open reviews first, oldest first, then the closed ones",
            "parameters": [{"name": "state", "in": "query", "required": False,
                            "schema": {"type": "string", "enum": ["open", "closed"]}}],
            "responses": {"200": _answer("The reviews", _ref("Reviews")),
                          "400": _answer("Unknown state; `allowed` lists the two", error)}}},
        "/v1/reviews/{review}": {"get": {
            "summary": "One review: the decisions that failed, with their labels, the alerts, the history",
            "parameters": [review_param],
            "responses": {"200": _answer("The review", _ref("Review")), "404": _answer("No such review", error)}}},
        "/v1/reviews/{review}/close": {"post": {
            "summary": "Close an open review with a note (appended to reviews/honestyd.jsonl)",
            "security": [{"reviewer": []}], "parameters": [review_param],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref("CloseRequest")}}},
            "responses": {
                "200": _answer("Closed", _ref("Closed")),
                "400": _answer("Not a JSON object, an unknown field, or no note", error),
                "401": _answer("No bearer token", error), "403": _answer("Token not authorised", error),
                "404": _answer("No such review", error), "408": late,
                "409": _answer("The review is closed already", error), "413": too_big,
                "500": _answer("Not written: reviews/honestyd.jsonl (or reviews/) is not a regular file (directory)"
                               " inside the state root, or the write failed; `path` names it", error)}}},
        "/v1/alerts/alertmanager": {"post": {
            "summary": "Alertmanager's webhook: a firing honesty alert opens or joins its agent's review",
            "security": [{"alerts": []}],
            "requestBody": {"required": True,
                            "content": {"application/json": {"schema": _ref("AlertmanagerPayload")}}},
            "responses": {
                "200": _answer("Recorded; alerts honestyd has no review for are acknowledged and ignored",
                               _ref("AlertsRecorded")),
                "400": _answer("Not an Alertmanager payload of version 4", error),
                "401": _answer("No bearer token", error),
                "403": _answer("Token not the alerts token, or none configured", error), "408": late, "413": too_big,
                "500": _answer("Not written: the review file was refused; Alertmanager retries", error)}}},
    }
