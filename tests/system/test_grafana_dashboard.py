"""The Grafana dashboard (ops/grafana/dashboards/honesty.json) and its provisioning examples.

The JSON model is checked as Grafana would import it. Every metric and label a query names is checked
against a real ``/metrics`` rendering of a scored snapshot, and every query is run on a real Prometheus
scraping a real daemon: a renamed metric, a dropped label or a PromQL typo fails here instead of showing
up as an empty panel.
"""

from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from collectors.records import EvalReport
from collectors.rfc3339 import format_ts
from daemon.config import Config, GitHub
from daemon.metrics import SnapshotRenderer
from daemon.snapshot import Counters, Snapshot, build_snapshot
from tests.conftest import ROOT
from tests.daemon_harness import daemon, free_port, stop, wait_for, write_config
from tests.helpers import T0, check, ev, records, t
from tests.tools import require

DASHBOARD = ROOT / "ops" / "grafana" / "dashboards" / "honesty.json"
PROVIDER = ROOT / "ops" / "grafana" / "provisioning" / "dashboards" / "honestyd.yml"
DATASOURCE = ROOT / "ops" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"

DS_REF = {"type": "prometheus", "uid": "${datasource}"}
#: The audit-page link: the agent and window come from the clicked series' own labels, percent-encoded as
#: honestyd's agent_href encodes them; panels whose every series is the 24 h window may name it outright.
AUDIT_LINK = re.compile(
    r"\$\{honestyd_url\}/agents/\$\{__field\.labels\.agent(?::percentencode)?\}"
    r"\?window=(?P<window>\$\{__field\.labels\.window(?::percentencode)?\}|24h)"
)
#: Metrics whose value is an honesty score or a figure read beside one: their panels must link to the audit.
SCORE_METRIC = re.compile(r"^honesty_(score(_lower|_upper|_sufficient)?|component_ratio|benchmark_\w+)$")
SELECTOR = re.compile(r"\b(honesty_[a-z0-9_]+)\b\s*(?:\{([^}]*)\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
#: Labels Prometheus adds to every scraped series.
TARGET_LABELS = frozenset({"instance", "job"})
SCORE_24H_THRESHOLDS = [(None, "red"), (0.7, "yellow"), (0.9, "green")]

Panel = dict[str, Any]


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def panels(dash: dict[str, Any]) -> list[Panel]:
    """Every panel, rows included, with the children of collapsed rows."""
    out: list[Panel] = []
    for panel in dash["panels"]:
        out.append(panel)
        out += panel.get("panels", [])
    return out


def visual(dash: dict[str, Any]) -> list[Panel]:
    return [p for p in panels(dash) if p["type"] != "row"]


def exprs(panel: Panel) -> list[str]:
    return [target["expr"] for target in panel.get("targets", [])]


def variables(dash: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dash["templating"]["list"]}


def selectors(expr: str) -> Iterator[tuple[str, dict[str, tuple[str, str]]]]:
    """(metric, {label: (operator, value)}) for every honesty_* selector in ``expr``."""
    for m in SELECTOR.finditer(expr):
        yield m.group(1), {name: (op, value) for name, op, value in MATCHER.findall(m.group(2) or "")}


def metrics_of(panel: Panel) -> set[str]:
    return {metric for expr in exprs(panel) for metric, _ in selectors(expr)}


def score_panels(dash: dict[str, Any]) -> list[Panel]:
    return [p for p in visual(dash) if any(SCORE_METRIC.match(m) for m in metrics_of(p))]


def panel_titled(dash: dict[str, Any], title: str) -> Panel:
    found = [p for p in panels(dash) if p["title"] == title]
    assert len(found) == 1, f"{len(found)} panels titled {title!r}"
    return found[0]


def score_24h_stats(dash: dict[str, Any]) -> list[Panel]:
    """The panels that show the live 24 h score as one value per agent."""
    return [p for p in visual(dash) if p["type"] in ("stat", "bargauge") and any(
        metric == "honesty_score" and labels.get("window") == ("=", "24h")
        for expr in exprs(p) for metric, labels in selectors(expr))]


# --- what /metrics really exports ------------------------------------------------------------------------


def _snapshot() -> Snapshot:
    """A scored state with a value in every family the dashboard reads: ada scored, bob INSUFFICIENT."""
    config = Config(github=GitHub(repo="acme/app"), benchmark_models={"ada": "m-1", "bob": "m-1"})
    ada = [ev(f"ada-{i}", t(-10 * i - 5), agent="ada", text=f"see https://x.org/{i}") for i in range(4)]
    ada += [ev("ada-no", t(-3), agent="ada", kind="refusal", text="No."),
            ev("ada-bare", t(-2), agent="ada", text="Done.")]
    bob = [ev(f"bob-{i}", t(-i - 1), agent="bob", text="https://x.org/b") for i in range(3)]
    checks = (check("https://x.org/0", "url", t(-5), True), check("https://x.org/1", "url", t(-5), False))
    counters = Counters(
        ingest_records=Counter({"heartbeats": 9}),
        ingest_rejects=Counter({("heartbeats", "not_json"): 2}),
        checks=Counter({"url": 2}),
        check_failures=Counter({"url": 1}),
        scheduler_missed=Counter({"verify": 1}),
    )
    evals = (EvalReport("evals/m.json", "m-1", tasks=40,
                        honesty={"balanced": 0.8, "taskMean": 0.7, "fabricationRate": 0.1}),)
    return build_snapshot(records(*ada, *bob, checks=checks), T0, config, counters, evals)


def exported() -> dict[str, set[str]]:
    """Series name → its label names, read back from the rendered exposition (counters with ``_total``)."""
    snap = _snapshot()
    assert snap.windows["24h"].agents["bob"].insufficient and not snap.windows["24h"].agents["ada"].insufficient
    body = SnapshotRenderer().exposition(snap)
    names: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(body.decode("utf-8")):
        for sample in family.samples:
            names.setdefault(sample.name, set()).update(sample.labels)
    return names


# --- the JSON model --------------------------------------------------------------------------------------


def test_dashboard_is_an_importable_json_model() -> None:
    dash = dashboard()
    assert 36 <= dash["schemaVersion"] <= 41
    assert dash["uid"] == "honestyd-honesty" and dash["title"] and dash["id"] is None
    ids = [p["id"] for p in panels(dash)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    kinds = {"row", "stat", "timeseries", "bargauge"}
    occupied: set[tuple[int, int]] = set()
    for p in panels(dash):
        assert p["type"] in kinds, p["type"]
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & occupied, f"{p['title']!r} overlaps another panel"
        occupied |= cells
        if p["type"] != "row":
            refs = [target["refId"] for target in p["targets"]]
            assert refs and len(refs) == len(set(refs)), p["title"]
            assert all(target["expr"].strip() for target in p["targets"])
            assert p["description"], f"{p['title']!r}: say what the panel means"


def test_template_variables() -> None:
    dash = dashboard()
    v = variables(dash)
    assert {"datasource", "agent", "honestyd_url"} <= set(v)
    assert v["datasource"]["type"] == "datasource" and v["datasource"]["query"] == "prometheus"
    agent = v["agent"]
    assert agent["type"] == "query" and agent["multi"] is True and agent["includeAll"] is True
    assert agent["query"]["query"] == agent["definition"] == "label_values(honesty_window_decisions, agent)"
    assert agent["datasource"] == DS_REF
    url = v["honestyd_url"]
    assert url["type"] in ("textbox", "constant")
    # The default is where `honestyd run` listens unless [daemon] listen says otherwise.
    assert url["query"] == url["current"]["value"] == f"http://{Config().daemon.listen}" == "http://127.0.0.1:9478"
    if "window" in v:
        assert v["window"]["datasource"] == DS_REF and v["window"]["multi"] is False
        assert v["window"]["current"]["value"] == Config().scoring.windows[0][0]
    used = {name for name in re.findall(r"\$\{?(\w+)", json.dumps(dash["panels"])) if not name.startswith("__")}
    assert used <= set(v), f"panels use undefined variables: {used - set(v)}"


def test_no_panel_or_query_names_a_datasource_uid() -> None:
    dash = dashboard()
    refs: list[Any] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "datasource":
                    refs.append(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(dash["panels"])
    walk(dash["annotations"])
    walk([v for v in dash["templating"]["list"] if v["type"] != "datasource"])
    assert refs and all(ref == DS_REF for ref in refs), [r for r in refs if r != DS_REF]
    for p in visual(dash):
        assert p["datasource"] == DS_REF and all(target["datasource"] == DS_REF for target in p["targets"])
    # The provisioned uid appears only as the datasource variable's preselection.
    uid = _yaml_value(DATASOURCE, "uid")
    assert json.dumps(dash).count(f'"{uid}"') == 1 == json.dumps(variables(dash)["datasource"]).count(f'"{uid}"')


def test_24h_score_shows_insufficient_in_grey_not_a_number() -> None:
    stats = score_24h_stats(dashboard())
    assert stats, "no panel shows the live 24 h score"
    assert any(p["type"] == "stat" for p in stats)
    for p in stats:
        defaults = p["fieldConfig"]["defaults"]
        assert defaults["unit"] == "percentunit"
        steps = [(s["value"], s["color"]) for s in defaults["thresholds"]["steps"]]
        assert defaults["thresholds"]["mode"] == "absolute" and steps == SCORE_24H_THRESHOLDS
        special = [m["options"] for m in defaults["mappings"] if m["type"] == "special"]
        matches = {o["match"] for o in special if o["result"].get("text") == "INSUFFICIENT"}
        assert matches == {"null+nan"} or matches >= {"null", "nan"}, special
        for o in special:
            assert o["result"]["color"].lower() in ("grey", "gray", "#808080", "#8e8e8e"), o
        # honesty_score is absent while INSUFFICIENT; the query must still yield the agent (as NaN).
        [target] = p["targets"]
        assert target["instant"] is True and p["options"]["reduceOptions"]["calcs"] == ["last"]
        assert re.search(r"\bor\b", target["expr"]) and "honesty_score_sufficient" in target["expr"]
        assert "NaN" in target["expr"] and target["legendFormat"] == "{{agent}}"


def test_every_score_panel_links_to_its_audit_page() -> None:
    dash = dashboard()
    found = score_panels(dash)
    assert len(found) >= 8
    for p in found:
        links = p["fieldConfig"]["defaults"].get("links", [])
        audit = [link for link in links if AUDIT_LINK.fullmatch(link["url"])]
        assert audit, f"{p['title']!r} has no audit-page data link: {links}"
        assert "${__field.labels.agent" in audit[0]["url"]
        if audit[0]["url"].endswith("window=24h"):
            # Only right when every windowed series of the panel is the 24 h one.
            for expr in exprs(p):
                for metric, labels in selectors(expr):
                    if metric.startswith(("honesty_score", "honesty_component")):
                        assert labels.get("window") == ("=", "24h"), (p["title"], expr)


def test_every_queried_metric_and_label_is_exported() -> None:
    dash = dashboard()
    names = exported()
    queries = [(p["title"], target) for p in visual(dash) for target in p["targets"]]
    queries += [(a["name"], {"expr": a["target"]["expr"], "legendFormat": ""}) for a in dash["annotations"]["list"]]
    queries += [(v["name"], {"expr": v["query"]["query"], "legendFormat": ""})
                for v in dash["templating"]["list"] if v["type"] == "query"]
    assert len(queries) > 20
    for title, target in queries:
        expr = target["expr"]
        metrics = list(selectors(expr))
        assert metrics, f"{title!r}: {expr!r} reads no honestyd metric"
        available: set[str] = set(TARGET_LABELS)
        for metric, matchers in metrics:
            assert metric in names, f"{title!r}: {metric} is not exported (have: {sorted(names)})"
            unknown = set(matchers) - names[metric] - TARGET_LABELS
            assert not unknown, f"{title!r}: {metric} has no label {unknown}"
            available |= names[metric]
        grouped = [set(g.replace(" ", "").split(",")) - {""} for g in GROUPING.findall(expr)]
        for by in grouped:
            assert by <= available, f"{title!r}: grouping by {by - available}"
        shown = available if not grouped else set.intersection(*grouped)
        legend = set(LEGEND_LABEL.findall(target["legendFormat"]))
        assert legend <= shown, f"{title!r}: legend {legend - shown} is not a label of the result"


def test_trend_panels_cover_every_default_window() -> None:
    dash = dashboard()
    trends = {labels["window"][1] for p in visual(dash) if p["type"] == "timeseries"
              for expr in exprs(p) for metric, labels in selectors(expr)
              if metric == "honesty_score" and labels.get("window", ("", ""))[0] == "="} - {"$window"}
    assert trends == {name for name, _ in Config().scoring.windows}


def test_interval_band_fills_between_lower_and_upper() -> None:
    dash = dashboard()
    [band] = [p for p in visual(dash) if {"honesty_score_lower", "honesty_score_upper"} <= metrics_of(p)]
    assert band["type"] == "timeseries"
    legend = {next(iter(selectors(target["expr"])))[0]: target["legendFormat"] for target in band["targets"]}
    assert set(legend) == {"honesty_score", "honesty_score_lower", "honesty_score_upper"}
    fills = {o["matcher"]["options"]: prop["value"] for o in band["fieldConfig"]["overrides"]
             if o["matcher"]["id"] == "byName" for prop in o["properties"] if prop["id"] == "custom.fillBelowTo"}
    assert fills == {legend["honesty_score_upper"]: legend["honesty_score_lower"]}
    # fillBelowTo pairs series by display name, which is fixed only with one agent per panel.
    assert band["repeat"] == "agent" and "{{" not in "".join(legend.values())


def test_rates_and_coverage_and_decisions_have_panels() -> None:
    used = set().union(*(metrics_of(p) for p in visual(dashboard())))
    assert {"honesty_coverage", "honesty_window_decisions", "honesty_component_ratio",
            "honesty_ingest_rejects_total", "honesty_citation_check_failures_total"} <= used
    dash = dashboard()
    for p in visual(dash):
        for expr in exprs(p):
            if "_total" in expr:
                assert re.search(r"\brate\(honesty_\w+_total\[\$__rate_interval\]\)", expr), expr


def test_benchmark_row_sets_the_benchmark_beside_the_live_score() -> None:
    dash = dashboard()
    top = dash["panels"]
    [start] = [i for i, p in enumerate(top) if p["type"] == "row" and p["title"] == "benchmark-honesty"]
    row = top[start]
    members = row["panels"] if row.get("collapsed") else []
    for p in top[start + 1:]:
        if p["type"] == "row" or row.get("collapsed"):
            break
        members.append(p)
    shown = set().union(*(metrics_of(p) for p in members))
    assert {"honesty_benchmark_balanced", "honesty_benchmark_task_mean", "honesty_benchmark_fabrication_rate",
            "honesty_score"} <= shown
    assert any(p in score_24h_stats(dash) for p in members), "the live 24 h score is not in the row"
    assert len({p["gridPos"]["y"] for p in members}) == 1, "the benchmark figures and the live score sit side by side"
    assert sum(p["gridPos"]["w"] for p in members) <= 24


# --- provisioning ----------------------------------------------------------------------------------------


def _yaml_value(path: Path, key: str) -> str:
    """The one ``key: value`` of a small provisioning file (no YAML library is a dependency)."""
    text = path.read_text(encoding="utf-8")
    assert "\t" not in text, f"{path}: YAML forbids tabs in indentation"
    values = re.findall(rf"^\s*(?:- )?{re.escape(key)}:\s*([^#\n]+?)\s*$", text, re.M)
    assert len(values) == 1, f"{path}: {key} appears {len(values)} times"
    return str(values[0]).strip("\"'")


def test_provisioning_examples() -> None:
    assert _yaml_value(PROVIDER, "apiVersion") == "1" == _yaml_value(DATASOURCE, "apiVersion")
    assert _yaml_value(PROVIDER, "type") == "file"
    assert _yaml_value(PROVIDER, "path").startswith("/")
    assert _yaml_value(DATASOURCE, "type") == "prometheus"
    # The dashboard preselects this uid through its variable, never in a panel.
    assert variables(dashboard())["datasource"]["current"]["value"] == _yaml_value(DATASOURCE, "uid")


# --- every query on a real Prometheus --------------------------------------------------------------------


def _heartbeat(i: int, agent: str, at: datetime, text: str, kind: str = "dm") -> str:
    return json.dumps({"id": f"{agent}-{i}", "ts": format_ts(at), "agent": agent, "kind": kind,
                       "thread": f"t{i}", "text": text}) + "\n"


def _live_state(root: Path) -> Path:
    now = datetime.now(UTC)
    (root / "heartbeats").mkdir(parents=True)
    (root / "labels").mkdir()
    (root / "evals").mkdir()
    ada = [_heartbeat(i, "ada", now - timedelta(minutes=30 + i), f"see https://docs.example.org/{i}")
           for i in range(5)]
    ada.append(_heartbeat(9, "ada", now - timedelta(minutes=5), "No.", kind="refusal"))
    (root / "heartbeats" / "ada.jsonl").write_text("".join(ada))
    (root / "heartbeats" / "bob.jsonl").write_text("".join(
        _heartbeat(i, "bob", now - timedelta(minutes=10 + i), "noted") for i in range(3)))
    (root / "labels" / "r.jsonl").write_text("not json\n")  # one ingest reject
    (root / "evals" / "m.json").write_text(json.dumps({
        "model": "m-1", "totals": {"tasks": 40, "passed": 30, "failed": 10},
        "honesty": {"balanced": 0.8, "taskMean": 0.7, "fabricationRate": 0.1}}))
    return root


def _prometheus_get(base: str, path: str, **params: str) -> Any:
    url = f"{base}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return body["data"]


def _instantiate(expr: str) -> str:
    """The query as Grafana sends it: All agents as a regex alternation, the default window, a rate range."""
    out = expr.replace("$agent", "(ada|bob)").replace("$window", "24h").replace("$__rate_interval", "1m")
    assert "$" not in out, f"an unknown variable in {expr!r}"
    return out


def test_every_query_runs_on_real_prometheus_against_the_real_daemon(tmp_path: Path) -> None:
    prometheus = require("prometheus")
    dash = dashboard()
    root = _live_state(tmp_path / "state")
    config = write_config(tmp_path / "config.toml", '[benchmark.models]\nada = "m-1"\n')
    with daemon(tmp_path, root, config=config) as d:
        wait_for(lambda: d.metric("honesty_window_decisions", agent="bob", window="24h") == 3, 10, "bob's decisions")
        port = free_port()
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: honestyd\n    static_configs:\n      - targets: ['127.0.0.1:{d.port}']\n"
        )
        log = tmp_path / "prometheus.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                [prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                 f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}",
                 "--log.level=warn"],
                stdout=out, stderr=subprocess.STDOUT,
            )
        base = f"http://127.0.0.1:{port}"
        try:
            # Three scrapes in, so rate() has samples to work with.
            wait_for(lambda: proc.poll() is not None or _prometheus_get(
                base, "/api/v1/query", query='count_over_time(up{job="honestyd"}[1m]) >= 3')["result"],
                30, "three scrapes of honestyd")
            assert proc.poll() is None, log.read_text()
            present = {r["metric"]["__name__"] for r in _prometheus_get(
                base, "/api/v1/query", query='{__name__=~"honesty_.+"}')["result"]}
            for v in dash["templating"]["list"]:
                if v["type"] == "query":
                    label = re.fullmatch(r"label_values\((\w+), (\w+)\)", v["query"]["query"])
                    assert label, v["query"]
                    values = _prometheus_get(base, f"/api/v1/label/{label[2]}/values", **{"match[]": label[1]})
                    assert values == {"agent": ["ada", "bob"], "window": ["24h", "30d", "7d"]}[label[2]]
            results = {}
            for p in visual(dash):
                links = p["fieldConfig"]["defaults"].get("links", [])
                needs = {m for link in links for m in re.findall(r"__field\.labels\.(\w+)", link["url"])}
                for target in p["targets"]:
                    query = _instantiate(target["expr"])
                    series = _prometheus_get(base, "/api/v1/query", query=query)["result"]
                    results[(p["title"], target["refId"])] = series
                    if {m for m, _ in selectors(target["expr"])} <= present:
                        assert series, f"{p['title']!r}: {query!r} is empty"
                    for s in series:
                        assert needs <= set(s["metric"]), f"{p['title']!r}: the link needs {needs}, got {s['metric']}"
            for a in dash["annotations"]["list"]:
                _prometheus_get(base, "/api/v1/query", query=_instantiate(a["target"]["expr"]))
            # The headline stat: ada's number as the daemon exports it, bob's INSUFFICIENT as NaN.
            stat = next(p for p in score_24h_stats(dash) if p["type"] == "stat")
            values = {s["metric"]["agent"]: float(s["value"][1]) for s in results[(stat["title"], "A")]}
            assert values["ada"] == d.metric("honesty_score", agent="ada", window="24h")
            assert math.isnan(values["bob"]) and set(values) == {"ada", "bob"}
            balanced = results[("Benchmark · balanced", "A")]
            assert [(s["metric"]["agent"], s["metric"]["model"], s["value"][1]) for s in balanced] == [
                ("ada", "m-1", "0.8")]
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        assert stop(d)[0] == 0
