"""URL-check throughput against a local HTTP 200 server (not a test): prints checks per second.

    python bench/http_throughput.py [--checks 500] [--per-host 2] [--concurrency 16] [--distinct]

Every check is a full UrlChecker.check() (URL pre-check, limiter, guarded connection, GET,
headers, body handling) against one aiohttp server on 127.0.0.1; loopback is allowed for it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Imported after the path set-up, so the script also runs from a checkout without an install.
from daemon.config import Verify
from daemon.verify.http import UrlChecker


async def bench(checks: int, per_host: int, concurrency: int, distinct: bool) -> float:
    """Run ``checks`` checks and return checks per second."""

    async def page(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    settings = Verify(allow_networks=("127.0.0.0/8",), per_host=per_host, concurrency=concurrency)
    urls = [f"http://127.0.0.1:{port}/page/{i if distinct else 0}" for i in range(checks)]
    try:
        async with UrlChecker(settings) as checker:
            await checker.check(urls[0])  # warm-up: first connection
            started = time.perf_counter()
            outcomes = await asyncio.gather(*(checker.check(u) for u in urls))
            elapsed = time.perf_counter() - started
    finally:
        await runner.cleanup()
    bad = [o for o in outcomes if o.ok is not True]
    if bad:
        raise SystemExit(f"{len(bad)} checks did not pass, e.g. {bad[0]}")
    return checks / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=500)
    parser.add_argument("--per-host", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--distinct", action="store_true", help="a different path per check")
    args = parser.parse_args()
    rate = asyncio.run(bench(args.checks, args.per_host, args.concurrency, args.distinct))
    print(f"{args.checks} checks, per_host={args.per_host}, concurrency={args.concurrency}: {rate:.0f} checks/s")


if __name__ == "__main__":
    main()
