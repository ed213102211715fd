"""``honestyd demo`` with its defaults (what ``make demo`` runs): the slipping agent's review opens by itself, the
banner prints the queue's URL and the reviewer's sign-in, and with them a person closes the review from its page in
real headless Chromium (the token in the banner's curl line is the same reviewer's).

Prints the time from the demo's start and from zoe's first failing decision to her open review (the issue asks
for the figure; it is not asserted, only waited for with a deadline).
"""

from __future__ import annotations

import json
import re
import signal
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from collectors.rfc3339 import parse_ts
from tests.cdp import Browser
from tests.daemon_harness import free_port, start_demo, wait_for
from tests.system.test_browser import chromium, parse

#: Generous: the demo generates three days of ten agents before it serves, on a machine other suites share.
DEADLINE = 240.0


def _get(base: str, path: str) -> Any:
    with urllib.request.urlopen(base + path, timeout=5) as resp:
        return json.loads(resp.read())


def _first_failure(root: Path) -> datetime:
    """The time of zoe's first decision that cites nothing (a failing citation_rate)."""
    for line in (root / "heartbeats" / "live-zoe.jsonl").read_text().splitlines():
        obj = json.loads(line)
        if "citations" not in obj:
            return parse_ts(obj["ts"])
    raise AssertionError("zoe never slipped")


@pytest.mark.timeout(DEADLINE + 60)
def test_the_demo_opens_the_slipping_agents_review_and_its_sign_in_closes_it_from_its_page(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    proc, text = start_demo(tmp_path / "demo", port)
    try:
        serving = time.monotonic() - started
        assert f"reviews:     {base}/reviews   (" in text and "close it with a note from its page" in text
        found = re.search(r"sign in: +(\S+) +reviewer: (\S+) +token: (\S+)", text)
        assert found, text
        login, reviewer, token = found.groups()
        assert login == f"{base}/login" and f"reviews API: {base}/v1/reviews   (" in text
        assert f"Authorization: Bearer {token}'" in text

        def zoe_review() -> dict[str, Any] | None:
            found = [r for r in _get(base, "/v1/reviews?state=open")["reviews"] if r["agent"] == "zoe"]
            return found[0] if found else None

        review = wait_for(zoe_review, DEADLINE, "zoe's review to open")
        opened_after = time.monotonic() - started
        first = _first_failure(tmp_path / "demo" / "state")
        lag = (parse_ts(review["opened_at"]) - first).total_seconds()
        print(f"\ndemo: serving after {serving:.1f} s; zoe's review open {opened_after:.1f} s after the start, "
              f"{lag:.1f} s after her first failing decision ({review['why']}, {review['progress']['text']})")
        assert review["reason"] == "below" and review["by"] == "honestyd" and review["progress"]["decisions"] > 0
        assert [r["agent"] for r in _get(base, "/v1/reviews?state=open")["reviews"]].count("zoe") == 1
        with Browser(chromium(), tmp_path / "profile") as b:  # what the banner says: sign in, open it, close it
            b.goto(login + "?next=/reviews")
            b.type("#reviewer", reviewer)
            b.type("#token", token)
            b.click_and_load("form.login button")
            b.click_and_load(f'td.id a[href="/reviews/{review["id"]}"]')
            b.type("#close-note", "demo: zoe stopped citing")
            b.click_and_load("form.close-form button")
            assert f"Review {review['id']} closed." in parse(b.html()).all_text()
        closed = _get(base, f"/v1/reviews/{review['id']}")["closed"]
        assert (closed["reviewer"], closed["note"]) == ("demo", "demo: zoe stopped citing")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
    assert proc.returncode == 0
