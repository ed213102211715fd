"""/metrics with many distinct agents (not a test): series, body size, scrape time, the daemon's memory.

    python bench/cardinality.py [--agents 20000] [--decisions 3] [--max-agents N] [--keep DIR]

One heartbeat log holds ``--agents`` distinct agents with ``--decisions`` decisions each (agent i's
latest is i seconds old). A real ``honestyd run`` subprocess ingests it on loopback; once it is ready
the script scrapes /metrics twice (the first scrape of a snapshot renders it, the second is served
from the cache) while another thread times /healthz, and reads VmRSS/VmHWM from /proc. It prints one
JSON object; docs/performance.md quotes its figures.
"""

from __future__ import annotations

import argparse
import http.client
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Imported after the path set-up, so the script also runs from a checkout without an install.
from bench.parts.daemon import vm_status
from tests.daemon_harness import free_port


def write_state(root: Path, agents: int, decisions: int, now: datetime) -> None:
    """One log of ``agents`` × ``decisions`` decisions, agent i's latest ``i`` seconds before ``now``."""
    (root / "heartbeats").mkdir(parents=True)
    with (root / "heartbeats" / "fleet.jsonl").open("w", encoding="utf-8") as f:
        for i in range(agents):
            for k in range(decisions):
                ts = (now - timedelta(seconds=i, minutes=10 * k)).strftime("%Y-%m-%dT%H:%M:%SZ")
                f.write(json.dumps({"id": f"a{i}-{k}", "ts": ts, "agent": f"agent-{i:06d}", "kind": "dm",
                                    "thread": f"t{i}", "text": f"update {k} see https://docs.example.org/{k}"})
                        + "\n")


def get(port: int, path: str, timeout: float = 120.0) -> tuple[int, bytes, float]:
    """(status, body, seconds) of one GET on a fresh connection."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read(), time.perf_counter() - started
    finally:
        conn.close()


def scrape_with_probe(port: int) -> dict[str, Any]:
    """One /metrics scrape, /healthz polled meanwhile: the scrape's time and the slowest /healthz answer."""
    health: list[float] = []
    done = threading.Event()

    def probe() -> None:
        while not done.is_set():
            health.append(get(port, "/healthz", 60)[2])

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    time.sleep(0.05)  # the probe's first request is in flight before the scrape starts
    status, body, took = get(port, "/metrics")
    done.set()
    thread.join(60)
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return {"status": status, "bytes": len(body), "series": series, "seconds": round(took, 3),
            "healthz_answers": len(health), "healthz_max_s": round(max(health, default=0.0), 3)}


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    now = datetime.now(UTC).replace(microsecond=0)
    root = tmp / "state"
    write_state(root, args.agents, args.decisions, now)
    config = tmp / "config.toml"
    config.write_text('[daemon]\nrescore_interval = "1h"\nrescan_interval = "1h"\nmodel_cache = false\n'
                      + (f"[limits]\nmax_agents = {args.max_agents}\n" if args.max_agents is not None else ""))
    port = free_port()
    argv = [sys.executable, "-m", "daemon.cli", "run", "--config", str(config), "--state", str(root),
            "--db", str(tmp / "honestyd.db"), "--listen", f"127.0.0.1:{port}"]
    log = tmp / "daemon.log"
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parent.parent)
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the daemon exited ({proc.returncode}); see {log}")
            try:
                if get(port, "/readyz", 5)[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() - started > 600:
                raise SystemExit(f"not ready within 600 s; see {log}")
            time.sleep(0.1)
        ready = time.monotonic() - started
        before = vm_status(proc.pid)
        first = scrape_with_probe(port)
        second = scrape_with_probe(port)
        # The pages and JSON that list every agent, held back or not, are rendered per request.
        index, agents = get(port, "/"), get(port, "/v1/agents")
        after = vm_status(proc.pid)
        return {"agents": args.agents, "decisions_each": args.decisions, "max_agents": args.max_agents,
                "ready_s": round(ready, 1), "first_scrape": first, "second_scrape": second,
                "index": {"bytes": len(index[1]), "seconds": round(index[2], 3)},
                "v1_agents": {"bytes": len(agents[1]), "seconds": round(agents[2], 3)},
                "rss_mb_before_scrape": round(before["VmRSS"] / 1e6, 1),
                "rss_mb_after_scrapes": round(after["VmRSS"] / 1e6, 1), "hwm_mb": round(after["VmHWM"] / 1e6, 1),
                "log_lines": len(log.read_bytes().splitlines())}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=20_000)
    parser.add_argument("--decisions", type=int, default=3)
    parser.add_argument("--max-agents", type=int, help="[limits] max_agents (default: the daemon's default)")
    parser.add_argument("--keep", type=Path, help="work in this (new) directory and keep it")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True)
        result = run(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="honestyd-cardinality-") as tmp:
            result = run(args, Path(tmp))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
