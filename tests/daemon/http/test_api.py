"""daemon/http/api.py: the audit's body, built a row at a time into one buffer, is audit_json's, byte for byte."""

from __future__ import annotations

import json

from daemon.http.api import _audit_body
from scorers.audit import audit_json
from tests.helpers import T0, ev, records, score, t


def test_the_audit_body_is_audit_json_encoded() -> None:
    recs = records(
        ev("ok", t(-50), text="see https://x.org/a — ünïcode"),
        ev("bare", t(-40), text='trust me "quoted"'),
        ev("refused", t(-30), kind="refusal", text="No."),
    )
    result = score(recs, T0)
    a = result.agents["ada"]
    body = bytes(_audit_body(a, result))
    assert body == json.dumps(audit_json(a, result), ensure_ascii=False).encode()
    assert len(json.loads(body)["decision_rows"]) == 3
