"""Local HTTP 200 servers on 127.0.0.1 … 127.0.0.N that count concurrent requests per host.

``python -m bench.verify_server --hosts 50 --hold 0.002`` prints one JSON line
``{"hosts": {"127.0.0.1": PORT, ...}, "stats": URL}`` and serves until stdin closes or SIGTERM.
``POST <stats>?reset=1`` returns ``{"max_in_flight": {host: n}, "requests": {host: n}}`` and
starts counting afresh. Each answer is held ``--hold`` seconds, so requests to one host overlap
and a per-host limit is actually exercised rather than trivially met. Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections import Counter

from aiohttp import web


class Counts:
    """In-flight and total requests per host address."""

    def __init__(self) -> None:
        self.in_flight: Counter[str] = Counter()
        self.max_in_flight: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()

    def snapshot(self, reset: bool) -> dict[str, dict[str, int]]:
        data = {"max_in_flight": dict(self.max_in_flight), "requests": dict(self.requests)}
        if reset:
            self.max_in_flight = Counter(self.in_flight)  # still-running requests carry over
            self.requests = Counter()
        return data


async def serve(hosts: int, hold: float) -> None:
    counts = Counts()

    async def page(request: web.Request) -> web.Response:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        host = sockname[0] if sockname else "?"
        counts.in_flight[host] += 1
        counts.requests[host] += 1
        counts.max_in_flight[host] = max(counts.max_in_flight[host], counts.in_flight[host])
        try:
            if hold > 0:
                await asyncio.sleep(hold)
            return web.Response(text="ok")
        finally:
            counts.in_flight[host] -= 1

    async def stats(request: web.Request) -> web.Response:
        return web.json_response(counts.snapshot(request.query.get("reset") == "1"))

    app = web.Application()
    app.router.add_get("/{tail:.*}", page)
    control = web.Application()
    control.router.add_post("/_stats", stats)
    runners = [web.AppRunner(app, access_log=None), web.AppRunner(control, access_log=None)]
    for runner in runners:
        await runner.setup()
    ports: dict[str, int] = {}
    for i in range(1, hosts + 1):
        address = f"127.0.0.{i}"
        site = web.TCPSite(runners[0], address, 0)
        await site.start()
        ports[address] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    # The control endpoint has a port of its own, so its requests are never counted as a host's.
    control_site = web.TCPSite(runners[1], "127.0.0.1", 0)
    await control_site.start()
    control_port = control_site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    print(json.dumps({"hosts": ports, "stats": f"http://127.0.0.1:{control_port}/_stats"}), flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    stdin = sys.stdin.fileno()
    loop.add_reader(stdin, lambda: stop.set() if not os.read(stdin, 1024) else None)  # EOF: the parent is done
    try:
        await stop.wait()
    finally:
        for runner in runners:
            await runner.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--hold", type=float, default=0.002)
    args = parser.parse_args()
    if not 1 <= args.hosts <= 254:
        raise SystemExit("--hosts must be 1..254 (127.0.0.1 … 127.0.0.254)")
    asyncio.run(serve(args.hosts, args.hold))


if __name__ == "__main__":
    main()
