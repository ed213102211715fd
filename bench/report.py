"""The results table, as text (``python -m bench`` prints it) or Markdown (``python -m bench.report``).

``python -m bench.report [bench/results.json]`` prints the Markdown table of a results file with
the machine it was measured on, ready to paste into docs/performance.md.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench import BENCH_DIR, PARTS
from bench.core import PartResult, Target


def fmt(value: float | None, unit: str) -> str:
    """A figure with a readable unit."""
    if value is None or math.isnan(value):
        return "—"
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    if unit == "ev/s":
        return f"{value / 1000:.1f}k ev/s"
    if unit == "×":
        return f"{value:.2f}×"
    if unit == "MB":
        return f"{value:.0f} MB"
    if unit == "checks/s":
        return f"{value:.0f} checks/s"
    return f"{value:g} {unit}".strip()


def figure(t: Target) -> str:
    return ("≥ " if t.lower_bound else "") + fmt(t.figure, t.unit)


def limit(t: Target) -> str:
    if t.informational:
        return "(info)"
    return f"{'≤' if t.op == '<=' else '≥'} {fmt(t.limit, t.unit)}"


def verdict(t: Target, markdown: bool = False) -> str:
    if t.informational:
        return "info"
    if t.passed:
        return ("pass\\*" if markdown else "pass*") if t.indicative else "PASS"
    return "**FAIL**" if markdown else "FAIL"


def baseline(t: Target) -> str:
    """"subject vs baseline (what)" for a ratio, "baseline (what)" for an absolute target that has one."""
    if t.baseline is None:
        return ""
    name, _, unit = t.baseline_name.rpartition(" (")
    unit = unit.rstrip(")") if name else ""
    name = name or t.baseline_name
    unit = unit if unit in ("s", "MB", "ev/s", "checks/s") else ""

    def show(v: float) -> str:
        return fmt(v, unit) if unit else f"{v:.3g}"

    subject = f"{show(t.subject)} vs " if t.unit == "×" and t.subject is not None else ""
    return f"{subject}{show(t.baseline)} ({name})"


def rows(results: Mapping[str, PartResult], markdown: bool = False) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for part in PARTS:
        r = results.get(part)
        if r is None:
            continue
        if r.error:
            out.append((part, "ERROR", "", r.error.splitlines()[0][:80], "", "ERROR"))
            continue
        out += [(part, t.name, figure(t), baseline(t), limit(t), verdict(t, markdown)) for t in r.targets]
    return out


HEADER = ("part", "measure", "figure", "subject vs baseline", "target", "result")


def table(results: Mapping[str, PartResult]) -> str:
    """A plain-text table for the terminal."""
    body = [HEADER, *rows(results)]
    widths = [max(len(row[i]) for row in body) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + footnote(results)


def footnote(results: Mapping[str, PartResult]) -> str:
    if any(t.indicative and t.passed for r in results.values() for t in r.targets):
        return ("\n\n* passed at the --quick size only: the target is set for ~1M events (or 100k-1M for scaling),"
                " where this may still fail; a FAIL at the quick size is a FAIL.")
    return ""


def markdown(results: Mapping[str, PartResult]) -> str:
    body = [f"| {' | '.join(HEADER)} |", "|" + "---|" * len(HEADER)]
    body += [f"| {' | '.join(cell.replace('|', '/') for cell in row)} |" for row in rows(results, markdown=True)]
    return "\n".join(body) + footnote(results).replace("* passed", "\\* passed")


def load(path: Path) -> tuple[dict[str, Any], dict[str, PartResult]]:
    doc: dict[str, Any] = json.loads(path.read_text())
    results = {}
    for name, part in doc["parts"].items():
        result = PartResult(name, figures=part["figures"], reps=part["reps"], seconds=part["seconds"],
                            notes=part["notes"], error=part["error"])
        result.targets = [Target.from_json(t) for t in part["targets"]]
        results[name] = result
    return doc, results


def machine_line(doc: Mapping[str, Any]) -> str:
    m = doc["machine"]
    ram = f"{m['ram_bytes'] / 2**30:.0f} GiB" if m.get("ram_bytes") else "? GiB"
    commit = (m.get("git_commit") or "unknown")[:12]
    return (f"{doc['mode']} run of {doc['generated_at']}, {doc['duration_s']:.0f} s: {m['cpu_model']},"
            f" {m['cores']} cores, {ram} RAM; Python {m['python']}, SQLite {m['sqlite']},"
            f" honestyd {m['honestyd']} (commit {commit});"
            f" load average {m.get('loadavg_at_start')} at the start")


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else BENCH_DIR / "results.json"
    doc, results = load(path)
    print(machine_line(doc))
    print()
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
