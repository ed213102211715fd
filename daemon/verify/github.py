"""CI run and issue checks against the GitHub REST API (or a compatible one at ``[github] api_url``).

The API base is treated like any cited URL: its connections go through the SSRF guard, so a
loopback or private API (GitHub Enterprise, a test server) is reachable only when its network
is in ``verify.allow_networks`` (and an unreachable API makes a check inconclusive, never False:
the API is not the cited source). Rate limits pause the API host until the reset instead of
failing checks; a pause longer than ``max_retry_after`` makes the check inconclusive.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import hdrs
from aiohttp.abc import AbstractResolver
from yarl import URL

from daemon.config import GitHub, Verify
from daemon.verify.http import (
    REDIRECT_STATUSES,
    Clock,
    GuardedClient,
    HostPaused,
    Sleep,
    classify_error,
    discard_body,
    parse_retry_after,
)
from daemon.verify.outcome import CheckOutcome

log = logging.getLogger("honestyd.verify.github")

API_VERSION = "2022-11-28"
# Same shapes as the citation grammar (spec section 2); "." and ".." would walk up the API path.
_OWNER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_REPO = re.compile(r"[A-Za-z0-9._-]+")
_NUMBER = re.compile(r"[0-9]+")
# A run or issue document is tens of KB; an issue with a huge body is still fine below this.
_JSON_CAP = 8 * 1024 * 1024
# Pauses for one request; if the limit is still in force after this many, something is off (clock skew).
_MAX_RATE_LIMIT_WAITS = 3


def load_token(github: GitHub, environ: Mapping[str, str] = os.environ) -> str | None:
    """The API token: the env var named by ``token_env``, else the file ``token_file`` (stripped), else None."""
    if github.token_env:
        value = environ.get(github.token_env, "").strip()
        if value:
            return value
    if github.token_file:
        try:
            value = Path(github.token_file).expanduser().read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            # Unauthenticated checks still work (with a lower rate limit), so warn rather than stop.
            log.warning("github token_file %s unreadable: %s", github.token_file, exc)
            return None
        return value or None
    return None


@dataclass(frozen=True)
class _Reply:
    status: int
    body: Any  # parsed JSON of a 200, else None


def _split_repo(repo: str) -> tuple[str, str] | None:
    owner, sep, name = repo.partition("/")
    if not sep or not _OWNER.fullmatch(owner) or not _REPO.fullmatch(name) or name in (".", ".."):
        return None
    return owner, name


def _not_found(status: int, what: str) -> CheckOutcome:
    if status in (404, 410):
        return CheckOutcome(False, status, f"{what} not found (HTTP {status})")
    return CheckOutcome(None, status, f"{what}: HTTP {status}")


class GitHubChecker(GuardedClient):
    """Checks ``run`` and ``issue`` citations; use as ``async with GitHubChecker(...) as api``.

    ``resolver``, ``sleep``, ``clock`` (monotonic) and ``wallclock`` (epoch, compared with
    ``x-ratelimit-reset``) are test hooks with production defaults.
    """

    def __init__(
        self,
        settings: Verify,
        github: GitHub,
        token: str | None,
        *,
        resolver: AbstractResolver | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.monotonic,
        wallclock: Clock = time.time,
    ) -> None:
        super().__init__(settings, resolver=resolver, sleep=sleep, clock=clock, wallclock=wallclock)
        self._base = URL(github.api_url.rstrip("/"))
        self._token = token
        # A completed run never changes, so one answer per run is enough for the checker's lifetime.
        self._completed_runs: dict[tuple[str, str], CheckOutcome] = {}

    def _headers(self) -> dict[str, str]:
        return {
            hdrs.USER_AGENT: self._settings.user_agent,
            hdrs.ACCEPT: "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
        }

    async def check_run(self, repo: str, run_id: str) -> CheckOutcome:
        """Does CI run ``run_id`` of ``OWNER/REPO`` exist? (``GET /repos/{owner}/{repo}/actions/runs/{id}``)."""
        parts = _split_repo(repo)
        if parts is None or not _NUMBER.fullmatch(run_id):
            return CheckOutcome(False, None, f"not a run reference: {repo} run {run_id}")
        key = (repo.lower(), run_id)
        cached = self._completed_runs.get(key)
        if cached is not None:
            return cached
        reply = await self._get(self._base / "repos" / parts[0] / parts[1] / "actions" / "runs" / run_id)
        if isinstance(reply, CheckOutcome):
            return reply
        if reply.status != 200:
            return _not_found(reply.status, f"run {run_id} of {repo}")
        body = reply.body if isinstance(reply.body, dict) else {}
        state = body.get("status")
        conclusion = body.get("conclusion")
        summary = "/".join(str(v) for v in (state, conclusion) if v) or "status unknown"
        outcome = CheckOutcome(True, 200, f"run {run_id} of {repo} found ({summary})")
        if state == "completed":
            self._completed_runs[key] = outcome
        return outcome

    async def check_issue(self, repo: str, number: str) -> CheckOutcome:
        """Does issue or pull request ``number`` of ``OWNER/REPO`` exist? (``GET /repos/{owner}/{repo}/issues/{n}``)."""
        parts = _split_repo(repo)
        if parts is None or not _NUMBER.fullmatch(number):
            return CheckOutcome(False, None, f"not an issue reference: {repo}#{number}")
        reply = await self._get(self._base / "repos" / parts[0] / parts[1] / "issues" / number)
        if isinstance(reply, CheckOutcome):
            return reply
        if reply.status != 200:
            return _not_found(reply.status, f"{repo}#{number}")
        body = reply.body if isinstance(reply.body, dict) else {}
        # The issues endpoint returns pull requests too, marked by a "pull_request" member.
        kind = "pull request" if "pull_request" in body else "issue"
        state = f" ({body['state']})" if isinstance(body.get("state"), str) else ""
        return CheckOutcome(True, 200, f"{kind} {repo}#{number} found{state}")

    def _headers_for(self, url: URL) -> dict[str, str]:
        # The token goes to the configured API origin only, never to wherever a redirect points.
        if self._token and url.origin() == self._base.origin():
            return {hdrs.AUTHORIZATION: f"Bearer {self._token}"}
        return {}

    def _rate_limit_wait(self, status: int, headers: Mapping[str, str], attempt: int) -> float | None:
        """Seconds until a rate-limited request may be retried, or None if the response is no rate limit."""
        if status not in (403, 429):
            return None
        retry_after = parse_retry_after(headers.get(hdrs.RETRY_AFTER), self._wallclock())
        if retry_after is not None:
            return retry_after
        reset = self._reset_in(headers)
        if reset is not None:
            return reset
        if status == 429:
            return self._backoff(attempt)
        return None  # a plain 403: a permission problem, not a limit

    def _reset_in(self, headers: Mapping[str, str]) -> float | None:
        """Seconds until ``x-ratelimit-reset`` when ``x-ratelimit-remaining`` is 0, else None."""
        if headers.get("x-ratelimit-remaining", "").strip() != "0":
            return None
        try:
            reset = float(headers.get("x-ratelimit-reset", ""))
        except ValueError:
            return None
        return max(0.0, reset - self._wallclock())

    def _backoff(self, attempt: int) -> float:
        return min(self._settings.backoff * 2.0**attempt, self._settings.max_retry_after)

    async def _get(self, url: URL) -> _Reply | CheckOutcome:
        """GET an API URL: the final reply, or an outcome when it cannot be had (rate limit, network, guard)."""
        if self._session is None:
            raise RuntimeError("GitHubChecker used outside 'async with GitHubChecker(...)'")
        attempt = waits = hops = 0
        while True:
            problem = self.guard.url_problem(url)
            if problem is not None:
                # The API is not the cited source: failing to reach it says nothing about the run or issue.
                return CheckOutcome(None, None, f"API URL refused: {problem}")
            host = (url.raw_host or "").lower()
            try:
                async with self._limiter.slot(host):
                    status, headers, location, body = await self._request(url)
            except HostPaused as paused:
                return CheckOutcome(None, None, f"API rate-limited for another {paused.remaining:.0f}s")
            except (aiohttp.ClientError, OSError) as exc:
                outcome, retry = classify_error(exc)
                if not retry or attempt >= self._settings.retries:
                    # Only the API's 404/410 says a run or issue does not exist; an unreachable API is ours.
                    return CheckOutcome(None, None, f"API unreachable: {outcome.detail}")
                await self._sleep(self._backoff(attempt))
                attempt += 1
                continue
            wait = self._rate_limit_wait(status, headers, attempt)
            if wait is not None:
                self._limiter.pause(host, wait)  # the next slot() for this host waits it out
                if wait > self._settings.max_retry_after or waits >= _MAX_RATE_LIMIT_WAITS:
                    return CheckOutcome(None, status, f"API rate-limited for {wait:.0f}s")
                waits += 1
                continue
            reset = self._reset_in(headers)
            if reset is not None:
                # This answer used the last request of the window: hold the next ones until the reset.
                self._limiter.pause(host, reset)
            if status in REDIRECT_STATUSES and location:
                # Renamed or transferred repositories answer 301 to their new API location.
                hops += 1
                if hops > self._settings.max_redirects:
                    return CheckOutcome(False, status, f"more than {self._settings.max_redirects} API redirects")
                try:
                    url = url.join(URL(location))
                except (ValueError, TypeError):
                    return CheckOutcome(False, status, f"API HTTP {status} with an invalid Location")
                continue
            if 500 <= status <= 599 and attempt < self._settings.retries:
                await self._sleep(self._backoff(attempt))
                attempt += 1
                continue
            return _Reply(status, body)

    async def _request(self, url: URL) -> tuple[int, Mapping[str, str], str | None, Any]:
        assert self._session is not None  # _get made sure
        async with self._session.get(url, allow_redirects=False, headers=self._headers_for(url)) as resp:
            body: Any = None
            if resp.status == 200:
                body = await _read_json(resp)
            else:
                await discard_body(resp, self._settings.body_cap)
            # resp.headers is case-insensitive and outlives the response; GitHub sends these in lower case.
            return resp.status, resp.headers, resp.headers.get(hdrs.LOCATION), body


async def _read_json(resp: aiohttp.ClientResponse) -> Any:
    """The JSON body, or None if it is too large or not JSON (the status alone still answers the check)."""
    if resp.content_length is not None and resp.content_length > _JSON_CAP:
        resp.close()
        return None
    data = bytearray()
    try:
        async for chunk in resp.content.iter_chunked(65536):
            data += chunk
            if len(data) > _JSON_CAP:
                resp.close()
                return None
    except (aiohttp.ClientError, TimeoutError):
        resp.close()
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
