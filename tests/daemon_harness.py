"""Running the real daemon as a subprocess on a temp state, and talking to it over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from prometheus_client.parser import text_string_to_metric_families

from collectors.rfc3339 import format_ts
from tests.conftest import ROOT
from tests.tools import require

if TYPE_CHECKING:
    from daemon.app import Daemon

T = TypeVar("T")

FAST_CONFIG = """
[daemon]
debounce = 0.05
rescan_interval = "{rescan}"
rescore_interval = "{rescore}"
drain_timeout = 5.0
[github]
repo = "acme/app"
[verify]
daily_at = "03:00"
"""


def free_port() -> int:
    """A port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], T | None], timeout: float = 10.0, what: str = "condition") -> T:
    """Poll ``predicate`` until it returns a truthy value (an event we wait for, not time passing)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except (OSError, ValueError) as exc:  # not up yet (URLError is an OSError)
            last = exc
        else:
            if value:
                return value
            last = value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


@dataclass
class Running:
    """A started daemon: its process, address and files."""

    proc: subprocess.Popen[str]
    port: int
    root: Path
    db: Path
    config: Path
    log: Path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        req = urllib.request.Request(self.base + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, resp.read().decode("utf-8")
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode("utf-8")

    def post(self, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(self.base + path, data=body, method="POST", headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            text = err.read()
            return err.code, json.loads(text) if text.startswith(b"{") else {"raw": text.decode()}

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample of /metrics keyed by (name, sorted labels)."""
        status, text = self.get("/metrics")
        assert status == 200
        out = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return out

    def metric(self, name: str, **labels: str) -> float | None:
        return self.metrics().get((name, tuple(sorted(labels.items()))))

    def logs(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def write_config(path: Path, extra: str = "", *, rescan: str = "2s", rescore: str = "1s") -> Path:
    path.write_text(FAST_CONFIG.format(rescan=rescan, rescore=rescore) + extra)
    return path


@contextmanager
def daemon(tmp: Path, root: Path, *, config: Path | None = None, clock_file: Path | None = None,
           env: dict[str, str] | None = None, db: Path | None = None, user: str | None = None,
           preexec_fn: Callable[[], object] | None = None, port: int | None = None) -> Iterator[Running]:
    """Start ``honestyd run`` on ``root``; wait until /readyz answers; SIGKILL it if the test fails.

    ``port``: listen there (a restart that Prometheus and Alertmanager must find again); default: a free one.

    ``user``: run it as this user (its own group, no other): a test run as root drops privileges this way.
    ``preexec_fn`` runs in the child before the daemon starts (e.g. to lower its descriptor limit).
    """
    config = config or write_config(tmp / "config.toml")
    db = db or tmp / "honestyd.db"
    port = port or free_port()
    log = tmp / f"daemon-{port}-{time.monotonic_ns()}.log"
    # setpriv (util-linux), not Popen(user=...): the latter failed to exec an interpreter under root's home here.
    account = None if user is None else pwd.getpwnam(user)
    as_user = [] if account is None else [
        require("setpriv"), f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--clear-groups", "--"]
    args = [*as_user, sys.executable, "-m", "daemon.cli", "run", "--config", str(config), "--state", str(root),
            "--db", str(db), "--listen", f"127.0.0.1:{port}"]
    if clock_file is not None:
        args += ["--clock-file", str(clock_file)]
    environ = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    environ.update(env or {})
    with log.open("w") as log_fh:
        proc = subprocess.Popen(args, cwd=ROOT, stdout=log_fh, stderr=subprocess.STDOUT, text=True, env=environ,
                                preexec_fn=preexec_fn)
    running = Running(proc, port, root, db, config, log)
    try:
        wait_for(lambda: proc.poll() is not None or running.get("/readyz")[0] == 200, 30, "readiness")
        assert proc.poll() is None, running.logs()
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)


def start_demo(directory: Path, port: int) -> tuple[subprocess.Popen[str], str]:
    """``honestyd demo`` as ``make demo`` runs it, on loopback at ``port``: the process and its banner (the lines up
    to "Ctrl-C stops"). The caller stops the process."""
    proc = subprocess.Popen([sys.executable, "-m", "daemon.cli", "demo", "--dir", str(directory), "--listen",
                             f"127.0.0.1:{port}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env={k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"})
    assert proc.stdout is not None
    banner = []
    for line in proc.stdout:
        banner.append(line)
        if line.startswith("Ctrl-C stops"):
            break
    return proc, "".join(banner)


def end(proc: subprocess.Popen[Any]) -> None:
    """Terminate a helper process (Prometheus, Alertmanager) whatever happened: killed if it does not go in 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def stop(running: Running, timeout: float = 10.0) -> tuple[int, float]:
    """SIGTERM; returns (exit code, seconds taken)."""
    start = time.monotonic()
    running.proc.send_signal(signal.SIGTERM)
    code = running.proc.wait(timeout)
    return code, time.monotonic() - start


def probe(root: Path, rel: str, agent: str) -> IO[str]:
    """Rewrite the Markdown file ``rel`` through a descriptor kept open: no file event, so only a rescan finds it."""
    f = (root / rel).open("r+")
    f.write(f"---\nagent: {agent}\nts: {format_ts(datetime.now(UTC))}\n---\nprobe {agent}\n")
    f.flush()
    return f


def agents(d: Running) -> set[str]:
    """The agents the running daemon lists (none while it cannot answer)."""
    status, text = d.get("/v1/agents")
    return set(json.loads(text)["agents"]) if status == 200 else set()


@asynccontextmanager
async def in_process(d: Daemon) -> AsyncIterator[Daemon]:
    """Serve ``d`` in this process's loop until the block ends (its serve() error, if any, is raised)."""
    task = asyncio.create_task(d.serve())
    ready = asyncio.create_task(d.started.wait())
    await asyncio.wait({task, ready}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()  # serve() failed: raise its error
    assert d.started.is_set(), "the daemon did not start within 30 s"
    try:
        yield d
    finally:
        ready.cancel()
        d.handle_exit()
        await asyncio.wait_for(task, 30)
