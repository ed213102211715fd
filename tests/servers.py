"""Real HTTP servers on 127.0.0.1, run on a background thread, for tests that drive subprocesses."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web


@contextmanager
def serve_in_thread(app: web.Application, host: str = "127.0.0.1") -> Iterator[int]:
    """Serve ``app`` on ``host`` at a free port from a daemon thread; yields the port, stops on exit."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    port: list[int] = []
    runner = web.AppRunner(app, access_log=None)

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        port.append(server.sockets[0].getsockname()[1])
        ready.set()

    def main() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("test server did not start")
    try:
        yield port[0]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
