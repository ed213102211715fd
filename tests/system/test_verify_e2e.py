"""``honestyd verify`` end to end: a simulated state whose links live on a local web server and a
fake GitHub API, checked by the real CLI, stored, exported, and scored back to what was planted."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from collectors.citations import normalise_url
from daemon.simulate import simulate
from tests.conftest import Run
from tests.servers import serve_in_thread

END = "2026-05-02T00:00:00Z"


def link_server(planted: dict[str, int], base: list[str]) -> web.Application:
    """Answers every URL with the status the simulator planted for it (404 for unknown ones)."""

    async def handle(request: web.Request) -> web.Response:
        status = planted.get(normalise_url(base[0] + request.path_qs), 404)
        return web.Response(status=status, text="page")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app


def github_api(ok: dict[tuple[str, str], bool], seen: list[str]) -> web.Application:
    """A fake GitHub API: runs and issues exist iff the simulator planted them as resolving."""

    async def run(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        if ok.get(("run", f"run:{request.match_info['id']}")):
            return web.json_response({"id": int(request.match_info["id"]), "status": "completed"})
        return web.json_response({"message": "Not Found"}, status=404)

    async def issue(request: web.Request) -> web.Response:
        m = request.match_info
        if ok.get(("issue", f"{m['owner']}/{m['repo']}#{m['n']}".lower())):
            return web.json_response({"number": int(m["n"])})
        return web.json_response({"message": "Not Found"}, status=404)

    app = web.Application()
    app.router.add_get("/repos/{owner}/{repo}/actions/runs/{id}", run)
    app.router.add_get("/repos/{owner}/{repo}/issues/{n}", issue)
    return app


@contextmanager
def planted_state(tmp_path: Path, seed: int, *, config: str = "",
                  auth: list[str] | None = None) -> Iterator[tuple[Path, Path, list[dict[str, Any]]]]:
    """A simulated state (``tmp_path/state``), its links on a local web server and its runs and issues on a fake GitHub
    API, both answering as the simulator planted until the block ends, and a config for them (``config`` appended):
    (root, config file, the planted checks). ``auth`` collects the API requests' Authorization headers."""
    base: list[str] = []
    planted_links: dict[str, int] = {}
    planted_ok: dict[tuple[str, str], bool] = {}
    with serve_in_thread(link_server(planted_links, base)) as web_port, \
            serve_in_thread(github_api(planted_ok, [] if auth is None else auth)) as api_port:
        base.append(f"http://127.0.0.1:{web_port}")
        root = tmp_path / "state"
        simulate(seed, root, agents=6, days=1, url_base=base[0])
        planted_links.update(json.loads((root / ".sim" / "links.json").read_text()))
        planted = [json.loads(x) for x in (root / ".sim" / "checks.jsonl").read_text().splitlines()]
        planted_ok.update({(c["type"], c["target"]): c["ok"] for c in planted})
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[github]\nrepo = "acme/app"\napi_url = "http://127.0.0.1:{api_port}"\n'
                       f'[verify]\nallow_networks = ["127.0.0.0/8"]\nper_host = 8\n' + config)
        yield root, cfg, planted


def test_verify_all_gives_the_planted_verifiability(honestyd: Run, tmp_path: Path) -> None:
    auth: list[str] = []
    with planted_state(tmp_path, 99, auth=auth) as (root, cfg, planted):
        db = tmp_path / "h.db"
        out = honestyd("verify", "--all", "--state", root, "--db", db, "--config", cfg, "--at", END, "--json")
        summary = json.loads(out.stdout)["types"]
        again = json.loads(honestyd("verify", "--all", "--state", root, "--db", db, "--config", cfg, "--at", END,
                                    "--json").stdout)["types"]
    assert set(summary) == {"url", "path", "run", "issue"}
    assert all(c["inconclusive"] == 0 for c in summary.values()), summary
    # Fresh conclusive results are a cache: the second pass fetches nothing.
    assert sum(c["checked"] for c in again.values()) == 0
    assert sum(c["cached"] for c in again.values()) == sum(c["checked"] for c in summary.values())
    assert auth and all(a == "" for a in auth)  # no token configured → no Authorization header

    stored = {(c["type"], c["target"]): c for c in map(json.loads, honestyd("checks", "export", "--db", db)
                                                         .stdout.splitlines())}
    for c in planted:
        assert stored[(c["type"], c["target"])]["ok"] == c["ok"], c
    assert any(not c["ok"] for c in planted)  # the planted state has dead links to find

    def verifiability(*args: Any) -> dict[str, Any]:
        res = json.loads(honestyd("score", *args, "--at", END, "--config", cfg, "--json").stdout)
        return {a: r["components"]["source_verifiability"] for a, r in res["agents"].items()}

    from_store = verifiability("--db", db)
    from_plant = verifiability("--state", root, "--checks", root / ".sim" / "checks.jsonl", "--verify-paths")
    assert from_store == from_plant
    assert any(v["ratio"] is not None and v["ratio"] < 1 for v in from_store.values())


def test_checks_export_import_round_trip(honestyd: Run, tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"target":"https://x.org/a","type":"url","checked_at":"2026-05-01T00:00:00Z","ok":false,'
                   '"status":404,"detail":"404"}\n{"target":"run:1234567","type":"run",'
                   '"checked_at":"2026-05-01T00:00:01Z","ok":null}\nnot json\n')
    db = tmp_path / "h.db"
    proc = honestyd("checks", "import", "--db", db, src, check=False)
    assert proc.returncode == 1 and "imported 2 checks, 1 rejected" in proc.stdout
    rows = [json.loads(x) for x in honestyd("checks", "export", "--db", db).stdout.splitlines()]
    assert rows == [
        {"target": "https://x.org/a", "type": "url", "checked_at": "2026-05-01T00:00:00Z", "ok": False,
         "status": 404, "detail": "404"},
        {"target": "run:1234567", "type": "run", "checked_at": "2026-05-01T00:00:01Z", "ok": None, "status": None,
         "detail": ""},
    ]
