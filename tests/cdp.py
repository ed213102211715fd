"""Real headless Chromium driven over the DevTools protocol, for the tests that use the pages as a person would:
navigate, type, click a button, read the page the browser built, take a screenshot.

Only the DOM and Input domains drive the page (no ``Runtime.evaluate``), so a page works the same with its scripts
switched off (``scripts(False)``, Emulation.setScriptExecutionDisabled): what is tested is what a click does. The
protocol runs over aiohttp's WebSocket client, on a loop of this object's own.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from tests.system.test_browser import CHROMIUM_FLAGS

TIMEOUT = 30.0


class Browser:
    """One Chromium process with one page (tab); close() ends it."""

    def __init__(self, binary: str, profile: Path, size: tuple[int, int] = (1400, 1000)) -> None:
        profile.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
             f"--window-size={size[0]},{size[1]}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.size = size
        self.loop = asyncio.new_event_loop()
        self._next = 0
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + TIMEOUT
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"chromium did not open its DevTools port (exit {self.proc.poll()})")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self.loop.run_until_complete(self._connect(f"ws://127.0.0.1:{port}{path}"))
        target = self.browser_call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.browser_call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=size[0], height=size[1], deviceScaleFactor=1,
                  mobile=False)

    async def _connect(self, url: str) -> None:
        self.http = aiohttp.ClientSession()
        self.ws = await self.http.ws_connect(url, max_msg_size=0)
        self.reader = self.loop.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                future = self._waiting.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
            else:
                self.events.append(data)

    async def _send(self, method: str, params: dict[str, Any], session: str | None) -> dict[str, Any]:
        self._next += 1
        future: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self._waiting[self._next] = future
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        await self.ws.send_str(json.dumps(message))
        reply = await asyncio.wait_for(future, TIMEOUT)
        if "error" in reply:
            raise AssertionError(f"{method}: {reply['error']}")
        return dict(reply.get("result", {}))

    def browser_call(self, method: str, **params: Any) -> dict[str, Any]:
        """A command to the browser itself."""
        return self.loop.run_until_complete(self._send(method, params, None))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """A command to the page."""
        return self.loop.run_until_complete(self._send(method, params, self.session))

    def _loads(self) -> int:
        return sum(1 for e in self.events if e.get("method") == "Page.loadEventFired")

    def wait_until(self, done: Callable[[], bool], what: str) -> None:
        """Let the protocol run until ``done()`` (an event arrived, say)."""

        async def turn() -> None:
            deadline = self.loop.time() + TIMEOUT
            while not done():
                if self.loop.time() > deadline:
                    raise AssertionError(f"timed out after {TIMEOUT} s waiting for {what}")
                await asyncio.sleep(0.005)

        self.loop.run_until_complete(turn())

    def goto(self, url: str) -> None:
        """Open ``url`` and wait until it has loaded."""
        before = self._loads()
        self.call("Page.navigate", url=url)
        self.wait_until(lambda: self._loads() > before, f"{url} to load")

    def scripts(self, enabled: bool) -> None:
        """Switch the page's scripts on or off (as a browser with JavaScript disabled)."""
        self.call("Emulation.setScriptExecutionDisabled", value=not enabled)

    def html(self) -> str:
        """The DOM as the browser built it, serialised."""
        root = self.call("DOM.getDocument", depth=-1)["root"]["nodeId"]
        return str(self.call("DOM.getOuterHTML", nodeId=root)["outerHTML"])

    def node(self, selector: str) -> int:
        """The node id of the first element ``selector`` matches (an error when none does)."""
        root = self.call("DOM.getDocument", depth=0)["root"]["nodeId"]
        found = int(self.call("DOM.querySelector", nodeId=root, selector=selector)["nodeId"])
        if not found:
            raise AssertionError(f"nothing on the page matches {selector!r}")
        return found

    def type(self, selector: str, text: str) -> None:
        """Focus the field and type ``text`` into it."""
        self.call("DOM.focus", nodeId=self.node(selector))
        self.call("Input.insertText", text=text)

    def click(self, selector: str) -> None:
        """A left click in the middle of the element, as a mouse does it."""
        node = self.node(selector)
        self.call("DOM.scrollIntoViewIfNeeded", nodeId=node)
        quad = self.call("DOM.getContentQuads", nodeId=node)["quads"][0]
        x, y = sum(quad[0::2]) / 4, sum(quad[1::2]) / 4
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def click_and_load(self, selector: str) -> float:
        """Click (a submit button, a link) and wait for the page it leads to; the seconds from the click's release to
        that page's load event."""
        before = self._loads()
        self.click(selector)
        started = time.monotonic()
        self.wait_until(lambda: self._loads() > before, f"the page after clicking {selector}")
        return time.monotonic() - started

    def cookies(self) -> list[dict[str, Any]]:
        """Every cookie the browser holds."""
        return list(self.call("Network.getAllCookies")["cookies"])

    def screenshot(self, out: Path, full: bool = False) -> Path:
        """A PNG of the page (``full``: all of it, not only the viewport)."""
        params: dict[str, Any] = {"format": "png"}
        if full:
            metrics = self.call("Page.getLayoutMetrics")["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": self.size[0],
                                                            "height": min(metrics["height"], 4000), "scale": 1})
        out.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", **params)["data"]))
        return out

    def close(self) -> None:
        """End the browser."""
        with contextlib.suppress(AssertionError, aiohttp.ClientError, ConnectionError, TimeoutError):
            self.browser_call("Browser.close")
        self.reader.cancel()
        self.loop.run_until_complete(self.ws.close())
        self.loop.run_until_complete(self.http.close())
        self.loop.run_until_complete(asyncio.gather(self.reader, return_exceptions=True))
        self.loop.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
