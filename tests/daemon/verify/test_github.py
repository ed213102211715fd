"""CI run and issue checks against a fake GitHub API served on 127.0.0.0/8."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from yarl import URL

from daemon.config import GitHub, Verify
from daemon.verify.github import API_VERSION, GitHubChecker, load_token
from daemon.verify.outcome import CheckOutcome
from tests.daemon.verify.test_http import FakeTime, counting_server, run, serve, settings

RUNS: dict[str, dict[str, Any]] = {
    "123456": {"id": 123456, "status": "completed", "conclusion": "success"},
    "222222": {"id": 222222, "status": "in_progress", "conclusion": None},
}
ISSUES: dict[str, dict[str, Any]] = {
    "7": {"number": 7, "state": "open"},
    "8": {"number": 8, "state": "closed", "pull_request": {"url": "https://api.github.com/repos/o/r/pulls/8"}},
}


@dataclass
class FakeApi:
    """Requests seen, plus responses to serve before the real ones (rate limits, errors)."""

    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    queued: list[web.Response] = field(default_factory=list)

    def app(self) -> web.Application:
        async def runs(request: web.Request) -> web.Response:
            self.requests.append((request.path, dict(request.headers)))
            if self.queued:
                return self.queued.pop(0)
            run_doc = RUNS.get(request.match_info["id"])
            if run_doc is None:
                return web.json_response({"message": "Not Found"}, status=404)
            return web.json_response(run_doc, headers={"x-ratelimit-remaining": "4999"})

        async def issues(request: web.Request) -> web.Response:
            self.requests.append((request.path, dict(request.headers)))
            if self.queued:
                return self.queued.pop(0)
            doc = ISSUES.get(request.match_info["n"])
            if doc is None:
                return web.json_response({"message": "Not Found"}, status=404)
            return web.json_response(doc)

        app = web.Application()
        app.router.add_get("/repos/{owner}/{repo}/actions/runs/{id}", runs)
        app.router.add_get("/repos/{owner}/{repo}/issues/{n}", issues)
        return app


@asynccontextmanager
async def api_checker(
    api: FakeApi, token: str | None = None, cfg: Verify | None = None, fake: FakeTime | None = None
) -> AsyncIterator[GitHubChecker]:
    fake = fake or FakeTime()
    async with serve(api.app()) as base:
        github = GitHub(repo="o/r", api_url=str(base))
        checker = GitHubChecker(
            cfg or settings(), github, token, sleep=fake.sleep, clock=fake.clock, wallclock=fake.wallclock
        )
        async with checker:
            yield checker


def test_run_found_and_not_found() -> None:
    async def main() -> None:
        api = FakeApi()
        async with api_checker(api) as checker:
            found = await checker.check_run("o/r", "123456")
            missing = await checker.check_run("o/r", "999999")
        assert found == CheckOutcome(True, 200, "run 123456 of o/r found (completed/success)")
        assert missing.ok is False and missing.status == 404
        assert [path for path, _ in api.requests] == [
            "/repos/o/r/actions/runs/123456",
            "/repos/o/r/actions/runs/999999",
        ]

    run(main)


def test_issue_and_pull_request_detail() -> None:
    async def main() -> None:
        async with api_checker(FakeApi()) as checker:
            issue = await checker.check_issue("o/r", "7")
            pull = await checker.check_issue("o/r", "8")
            missing = await checker.check_issue("o/r", "9")
        assert issue == CheckOutcome(True, 200, "issue o/r#7 found (open)")
        assert pull == CheckOutcome(True, 200, "pull request o/r#8 found (closed)")
        assert missing.ok is False and missing.status == 404

    run(main)


def test_rate_limit_pauses_until_reset_then_retries() -> None:
    async def main() -> None:
        fake = FakeTime()
        api = FakeApi()
        reset = int(fake.now) + 2
        api.queued.append(
            web.json_response(
                {"message": "API rate limit exceeded"},
                status=403,
                headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
            )
        )
        async with api_checker(api, fake=fake) as checker:
            outcome = await checker.check_run("o/r", "123456")
        assert outcome.ok is True
        assert fake.delays == [2.0]
        assert len(api.requests) == 2

    run(main)


def test_429_retry_after_is_honoured() -> None:
    async def main() -> None:
        fake = FakeTime()
        api = FakeApi()
        api.queued.append(web.json_response({"message": "slow down"}, status=429, headers={"Retry-After": "1"}))
        async with api_checker(api, fake=fake) as checker:
            outcome = await checker.check_issue("o/r", "7")
        assert outcome.ok is True
        assert fake.delays == [1.0]

    run(main)


def test_rate_limit_longer_than_max_retry_after_is_inconclusive() -> None:
    async def main() -> None:
        fake = FakeTime()
        api = FakeApi()
        api.queued.append(
            web.json_response(
                {"message": "API rate limit exceeded"},
                status=403,
                headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(fake.now) + 3600)},
            )
        )
        async with api_checker(api, cfg=settings(max_retry_after=60.0), fake=fake) as checker:
            first = await checker.check_run("o/r", "123456")
            second = await checker.check_issue("o/r", "7")  # the host stays paused: no request
        assert first.ok is None and first.status == 403 and "rate-limited" in first.detail
        assert second.ok is None and "rate-limited" in second.detail
        assert fake.delays == []
        assert len(api.requests) == 1

    run(main)


def test_last_request_of_the_window_pauses_the_next() -> None:
    async def main() -> None:
        fake = FakeTime()
        api = FakeApi()
        api.queued.append(
            web.json_response(
                ISSUES["7"], headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(fake.now) + 5)}
            )
        )
        async with api_checker(api, fake=fake) as checker:
            assert (await checker.check_issue("o/r", "7")).ok is True
            assert (await checker.check_issue("o/r", "8")).ok is True
        assert fake.delays == [5.0]

    run(main)


def test_plain_403_is_inconclusive_without_retry() -> None:
    async def main() -> None:
        api = FakeApi()
        api.queued.append(web.json_response({"message": "Resource not accessible"}, status=403))
        async with api_checker(api) as checker:
            outcome = await checker.check_issue("o/r", "7")
        assert outcome.ok is None and outcome.status == 403
        assert len(api.requests) == 1

    run(main)


def test_5xx_is_retried_then_inconclusive() -> None:
    async def main() -> None:
        fake = FakeTime()
        api = FakeApi()
        api.queued.extend(web.Response(status=502) for _ in range(5))
        async with api_checker(api, cfg=settings(retries=2, backoff=0.5), fake=fake) as checker:
            outcome = await checker.check_run("o/r", "123456")
        assert outcome.ok is None and outcome.status == 502
        assert fake.delays == [0.5, 1.0]
        assert len(api.requests) == 3

    run(main)


def test_headers_with_token() -> None:
    async def main() -> None:
        api = FakeApi()
        async with api_checker(api, token="s3cret") as checker:
            await checker.check_issue("o/r", "7")
        headers = api.requests[0][1]
        assert headers["Authorization"] == "Bearer s3cret"
        assert headers["Accept"] == "application/vnd.github+json"
        assert headers["X-GitHub-Api-Version"] == API_VERSION
        assert headers["User-Agent"] == Verify().user_agent

    run(main)


def test_no_authorization_without_token() -> None:
    async def main() -> None:
        api = FakeApi()
        async with api_checker(api, token=None) as checker:
            await checker.check_issue("o/r", "7")
        assert "Authorization" not in api.requests[0][1]

    run(main)


def test_token_is_not_sent_across_origins_on_redirect() -> None:
    async def main() -> None:
        other = FakeApi()
        async with serve(other.app(), "127.0.0.2") as elsewhere:
            api = FakeApi()
            moved = str(URL(str(elsewhere)) / "repos" / "new" / "r" / "issues" / "7")
            api.queued.append(web.Response(status=301, headers={"Location": moved}))
            async with api_checker(api, token="s3cret") as checker:
                outcome = await checker.check_issue("o/r", "7")
        assert outcome.ok is True
        assert api.requests[0][1]["Authorization"] == "Bearer s3cret"
        assert [path for path, _ in other.requests] == ["/repos/new/r/issues/7"]
        assert "Authorization" not in other.requests[0][1]

    run(main)


def test_completed_runs_are_cached_but_running_ones_are_not() -> None:
    async def main() -> None:
        api = FakeApi()
        async with api_checker(api) as checker:
            first = await checker.check_run("o/r", "123456")
            second = await checker.check_run("O/R", "123456")
            await checker.check_run("o/r", "222222")
            await checker.check_run("o/r", "222222")
        assert first == second
        paths = [path for path, _ in api.requests]
        assert paths.count("/repos/o/r/actions/runs/123456") == 1
        assert paths.count("/repos/o/r/actions/runs/222222") == 2

    run(main)


def test_malformed_references_are_false_without_a_request() -> None:
    async def main() -> None:
        api = FakeApi()
        async with api_checker(api) as checker:
            assert (await checker.check_run("o/..", "123456")).ok is False
            assert (await checker.check_run("not-a-repo", "123456")).ok is False
            assert (await checker.check_issue("o/r", "7a")).ok is False
        assert api.requests == []

    run(main)


def test_loopback_api_is_refused_unless_allowed_and_inconclusive() -> None:
    async def main() -> None:
        async with counting_server() as accepts:
            github = GitHub(api_url=f"http://127.0.0.1:{accepts.port}")
            async with GitHubChecker(settings(allow_networks=()), github, "s3cret") as checker:
                outcome = await checker.check_run("o/r", "123456")
        assert outcome.ok is None and "forbidden address" in outcome.detail  # our configuration, not the run
        assert accepts.count == 0

    run(main)


def test_load_token_from_env_then_file(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("  file-token\n", encoding="utf-8")
    github = GitHub(token_env="HONESTYD_TEST_TOKEN", token_file=str(token_file))
    assert load_token(github, {"HONESTYD_TEST_TOKEN": " env-token \n"}) == "env-token"
    assert load_token(github, {"HONESTYD_TEST_TOKEN": "  "}) == "file-token"
    assert load_token(github, {}) == "file-token"
    assert load_token(GitHub(token_env="HONESTYD_TEST_TOKEN"), {}) is None
    assert load_token(GitHub(token_env="", token_file=str(tmp_path / "missing")), {}) is None
    (tmp_path / "empty").write_text("\n", encoding="utf-8")
    assert load_token(GitHub(token_file=str(tmp_path / "empty")), {}) is None


def test_unreachable_api_is_inconclusive_not_false() -> None:
    async def main() -> None:
        with socket.socket() as closed:  # bound, not listening: connection refused
            closed.bind(("127.0.0.1", 0))
            github = GitHub(api_url=f"http://127.0.0.1:{closed.getsockname()[1]}")
            async with GitHubChecker(settings(), github, None) as checker:
                outcome = await checker.check_issue("o/r", "7")
        assert outcome.ok is None and "API unreachable: connection refused" in outcome.detail

    run(main)
