"""``honestyd demo``: a generated state, the real daemon on it, and live agents writing to it.

One of the live agents starts slipping after a while: two decisions in three cite nothing (citation_rate fails at
once, so the slip shows without waiting for the gap grace) and the third cites a file that does not exist (which
fails once the grace is over). Its 24 h score crosses the alert threshold within about a minute of the start, and
honestyd opens a review of it by itself: the demo prints the queue's URL and a reviewer's sign-in, to label its
decisions and close it from its page.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import secrets
import shutil
import signal
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from collectors.batch import scan_state
from collectors.checks import load_checks
from collectors.rfc3339 import format_ts
from daemon import logescape
from daemon.cliargs import UsageError
from daemon.config import load_config
from daemon.simulate import simulate
from daemon.store import Store
from scorers.context import Records
from scorers.history import counts_at

log = logging.getLogger("honestyd.demo")

DEMO_CONFIG = """# honestyd demo configuration (generated)
[github]
repo = "acme/app"

[daemon]
listen = "{listen}"
rescore_interval = "5s"
rescan_interval = "1m"

[api]
# The demo's reviewer (the file holds "demo:TOKEN"; the demo prints the token).
reviewers_file = "{reviewers}"
"""
#: The reviewer the demo configures, so a newcomer can sign in and label at once.
DEMO_REVIEWER = "demo"

HONEST_LINES = (
    ("Deploy of api finished; runbook followed.", "https://docs.acme.example/runbooks/deploy"),
    ("Latency back under budget, see the SLO page.", "https://docs.acme.example/slo/latency"),
    ("On-call handover done.", "docs/oncall.md"),
)
SLIPPING_LINES = (
    ("Q3 revenue closed 14% above plan.", None),
    ("The postmortem lists every action item as done.", None),
    ("Board deck numbers are final.", "reports/board-deck-final.md"),
)


@dataclass(frozen=True)
class LiveAgent:
    """A simulated agent that keeps writing; ``slips_after`` seconds in, it turns dishonest."""

    name: str
    slips_after: float | None = None


def _event(agent: LiveAgent, n: int, now: datetime, slipping: int | None) -> str:
    """The ``n``-th event; ``slipping``: how many slipping ones came before it (None: not slipping)."""
    text, source = SLIPPING_LINES[slipping % 3] if slipping is not None else HONEST_LINES[n % 3]
    obj: dict[str, object] = {"id": f"live-{agent.name}-{n}", "ts": format_ts(now), "agent": agent.name,
                              "kind": "dm", "thread": f"live-{agent.name}-{n}", "text": text}
    if source is not None:
        obj["citations"] = [source]
    return json.dumps(obj) + "\n"


async def live_agents(root: Path, agents: list[LiveAgent], interval: float, stop: asyncio.Event) -> None:
    """Append one event per agent every ``interval`` seconds until ``stop`` is set."""
    started = asyncio.get_running_loop().time()
    n = 0
    slipped = dict.fromkeys((a.name for a in agents), 0)
    while not stop.is_set():
        elapsed = asyncio.get_running_loop().time() - started
        now = datetime.now(UTC)
        for agent in agents:
            slipping = agent.slips_after is not None and elapsed >= agent.slips_after
            with (root / "heartbeats" / f"live-{agent.name}.jsonl").open("a", encoding="utf-8") as f:
                f.write(_event(agent, n, now, slipped[agent.name] if slipping else None))
            slipped[agent.name] += slipping
        n += 1
        with contextlib.suppress(TimeoutError):  # the interval passed without a stop: write again
            await asyncio.wait_for(stop.wait(), interval)


def prepare(directory: Path, seed: int, listen: str) -> tuple[Path, Path, Path, str]:
    """Generate the demo state ending now, its config and reviewer (the token is returned), and a database holding
    the planted link checks and the daily history of the generated days (the charts have days to show at once)."""
    if directory.exists():
        if not (directory / "state" / ".sim").exists():
            raise UsageError(f"--dir {directory}: exists and is not a demo directory; choose another --dir")
        shutil.rmtree(directory)
    root, db, config = directory / "state", directory / "honestyd.db", directory / "config.toml"
    now = datetime.now(UTC)
    start = (now - timedelta(days=3)).replace(second=0, microsecond=0)
    simulate(seed, root, agents=10, days=3, start=start)
    token = secrets.token_urlsafe(12)
    reviewers = directory / "reviewers"
    reviewers.touch(mode=0o600)
    reviewers.write_text(f"{DEMO_REVIEWER}:{token}\n")
    config.write_text(DEMO_CONFIG.format(listen=listen, reviewers=json.dumps(str(reviewers.resolve()))[1:-1]))
    checks, _ = load_checks((root / ".sim" / "checks.jsonl").read_bytes(), "checks.jsonl")
    cfg = load_config(config)
    scan = scan_state(root, cfg)
    records = Records(scan.events, scan.labels, scan.files, checks, scan.links)
    history = [c for n in range(1, 4) for c in counts_at(records, (now - timedelta(days=n)).date(), cfg)]
    with Store.open(db) as store, store.transaction():
        store.add_checks(checks)
        store.put_history(history)
    return root, db, config, token


async def run_demo(args: argparse.Namespace) -> int:
    """Claim the port, prepare, start the daemon and the live agents, print the URLs, run until stopped.

    The port is bound first, so a busy one is one line and exit status 4 before anything is generated; a signal at
    any point stops the demo (during the preparation, once it is done: it runs in a worker thread).
    """
    from daemon.app import Daemon, Overrides  # the daemon's dependencies load only when it runs
    from daemon.lifecycle import StartupError, StoreLock, bind_listeners

    directory = Path(args.dir)
    try:
        listeners = bind_listeners(args.listen)
        if (directory / "honestyd.db").exists():  # a demo running there would lose its files to the wipe below
            StoreLock.acquire(directory / "honestyd.db").release()
    except StartupError as exc:
        log.error("%s", exc)
        return exc.status
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    running: list[Daemon] = []

    def on_signal() -> None:
        stopping.set()
        for d in running:  # until serve() installs the daemon's own handlers
            d.handle_exit()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    try:
        preparing = asyncio.create_task(asyncio.to_thread(prepare, directory, args.seed, args.listen))
        signalled = asyncio.create_task(stopping.wait())
        await asyncio.wait({preparing, signalled}, return_when=asyncio.FIRST_COMPLETED)
        signalled.cancel()
        if stopping.is_set():
            for sock in listeners:
                sock.close()
            return 0
        root, db, config_path, token = await preparing
    except BaseException:
        for sock in listeners:
            sock.close()
        raise
    daemon = Daemon(load_config(config_path), config_path=config_path, overrides=Overrides(state=root, db=db),
                    listeners=listeners)
    running.append(daemon)
    serving = asyncio.create_task(daemon.serve())
    started = asyncio.create_task(daemon.started.wait())
    await asyncio.wait({serving, started}, return_when=asyncio.FIRST_COMPLETED)
    if not daemon.started.is_set():  # it failed to start (logged), or a signal stopped it during the start
        started.cancel()
        await serving
        return daemon.exit_status
    stop = asyncio.Event()
    agents = [LiveAgent("ada"), LiveAgent("gus"), LiveAgent("zoe", slips_after=args.slip_after)]
    writers = asyncio.create_task(live_agents(root, agents, args.interval, stop))
    base = f"http://{args.listen}"
    print(f"honestyd demo on {root}\n  metrics:     {base}/metrics\n  agents:      {base}/\n"
          f"  audit page:  {base}/agents/zoe?window=24h   (zoe starts slipping after {args.slip_after:.0f}s)\n"
          f"  reviews:     {base}/reviews   (the queue: zoe's review opens about a minute in; sign in, open it,"
          " label its decisions 👍/👎 and close it with a note from its page)\n"
          f"  reviews API: {base}/v1/reviews   (a script closes one with: curl -H 'Authorization: Bearer {token}'"
          f" -d '{{\"note\": \"what you found\"}}' {base}/v1/reviews/ID/close)\n"
          f"  methodology: {base}/methodology\n"
          f"  sign in:     {base}/login   reviewer: {DEMO_REVIEWER}   token: {token}   (then 👍/👎 on any row, and"
          " close zoe's review from /reviews)\n"
          "Ctrl-C stops.", flush=True)
    try:
        if args.duration:
            await asyncio.wait({serving}, timeout=args.duration)
            daemon.handle_exit()
        await serving
    finally:
        stop.set()
        await writers
    return daemon.exit_status


def main(args: argparse.Namespace) -> int:
    """Run the demo."""
    logescape.configure(logging.INFO, logescape.DAEMON_FORMAT)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    try:
        return asyncio.run(run_demo(args))
    except KeyboardInterrupt:  # a Ctrl-C once the daemon has stopped (its handlers are gone): no traceback
        return 130
