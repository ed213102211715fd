"""The bench's arithmetic and verdicts (bench/core.py, bench/report.py, the scale part's projection, the soak's thirds):
what `make bench` prints against each target is computed here, so a slip would misreport a target as met or missed."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from bench import report
from bench.core import PartResult, Target, median, paired_ratio, paired_target, percentile, ratio_target
from bench.parts.scale import _line
from bench.soak import _thirds


@pytest.mark.parametrize("values", [[3.0], [5.0, 1.0], [4.0, 1.0, 3.0, 2.0], [9.0, 2.0, 7.0, 7.0, 1.0]])
def test_median_is_the_statistics_modules(values: list[float]) -> None:
    assert median(values) == statistics.median(values)


VALUES = [12.0, 3.0, 7.0, 1.0, 30.0, 8.0, 2.0]


@pytest.mark.parametrize("q", [1, 10, 50, 90, 99])
def test_percentile_interpolates_between_closest_ranks(q: int) -> None:
    # statistics.quantiles' "inclusive" method is the same linear interpolation (numpy's default), at 1 % steps.
    assert percentile(VALUES, q) == pytest.approx(statistics.quantiles(VALUES, n=100, method="inclusive")[q - 1])


def test_percentile_ends_are_the_extremes() -> None:
    assert (percentile(VALUES, 0), percentile(VALUES, 100)) == (min(VALUES), max(VALUES))


def test_median_and_percentile_of_nothing_raise() -> None:
    with pytest.raises(ValueError, match="median"):
        median([])
    with pytest.raises(ValueError, match="percentile"):
        percentile([], 50)


@pytest.mark.parametrize(("figure", "op", "limit", "passed"), [
    (15.0, "<=", 15.0, True),  # the limit itself meets an "at most"
    (15.01, "<=", 15.0, False),
    (2.0, ">=", 2.0, True),
    (1.99, ">=", 2.0, False),
    (None, "<=", 15.0, False),  # no number measured: a miss, never a pass
    (math.nan, ">=", 0.0, False),
])
def test_a_target_passes_only_on_its_side_of_the_limit(figure: float | None, op: str, limit: float,
                                                       passed: bool) -> None:
    t = Target("t", figure, "s", op, limit)
    assert t.passed is passed
    assert report.verdict(t) == ("PASS" if passed else "FAIL")


def test_an_informational_figure_has_no_verdict_and_survives_json() -> None:
    t = Target("bytes per decision", 120.0, "B", "<=", math.inf)
    assert t.informational and report.verdict(t) == "info" and report.limit(t) == "(info)"
    data = json.loads(json.dumps(t.as_json()))
    assert data["limit"] is None and data["pass"] is None
    assert Target.from_json(data) == t


def test_a_pass_at_the_quick_size_is_marked_and_a_fail_is_not() -> None:
    part = PartResult("rescore", targets=[Target("cold", 3.0, "s", "<=", 15.0), Target("ready", 9.0, "s", "<=", 5.0)])
    part.at_quick_size(True)
    assert [report.verdict(t) for t in part.targets] == ["pass*", "FAIL"]
    assert report.verdict(part.targets[0], markdown=True) == "pass\\*"
    assert "passed at the --quick size only" in report.table({"rescore": part})


def test_a_ratio_target_divides_the_medians_and_keeps_both() -> None:
    t = ratio_target("ingest", 4.0, 10.0, 0.5, "sqlite-utils insert --nl")
    assert (t.figure, t.subject, t.baseline, t.unit) == (0.4, 4.0, 10.0, "×")
    assert t.passed
    assert report.baseline(t) == "4.00 s vs 10.00 s (sqlite-utils insert --nl)"
    assert ratio_target("x", 1.0, 0.0, 1.0, "b").figure is None  # no baseline measured: no ratio, a miss
    assert not ratio_target("x", 1.0, 0.0, 1.0, "b").passed


def test_a_paired_ratio_is_the_median_of_each_repetitions_ratio() -> None:
    subject, baseline = [2.0, 3.0, 10.0], [4.0, 3.0, 5.0]  # ratios 0.5, 1.0, 2.0
    assert paired_ratio(subject, baseline) == 1.0
    assert paired_ratio([1.0, 2.0], [0.0, 4.0]) == 0.5  # a zero baseline's pair is left out
    assert paired_ratio([1.0], [0.0]) is None
    t = paired_target("ingest", subject, baseline, 0.5, "loader")
    # The figure is the paired median, not the ratio of the medians (3.0 / 4.0).
    assert (t.figure, t.subject, t.baseline) == (1.0, 3.0, 4.0)
    assert not t.passed


@pytest.mark.parametrize(("value", "unit", "text"), [
    (0.0123, "s", "12.3 ms"), (19.96, "s", "19.96 s"), (146.4, "MB", "146 MB"), (0.431, "×", "0.43×"),
    (3604.2, "checks/s", "3604 checks/s"), (41_500.0, "ev/s", "41.5k ev/s"), (None, "s", "—"), (math.nan, "s", "—"),
])
def test_figures_are_shown_in_their_unit(value: float | None, unit: str, text: str) -> None:
    assert report.fmt(value, unit) == text


def test_a_results_file_reads_back_into_the_same_table(tmp_path: Path) -> None:
    parts = {
        "rescore": PartResult("rescore", targets=[Target("cold start | no cache", 19.96, "s", "<=", 15.0)]),
        "verify": PartResult("verify", error="Traceback (most recent call last):\n  boom"),
    }
    doc = {"parts": {name: p.as_json() for name, p in parts.items()}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(doc))
    _, back = report.load(path)
    assert report.rows(back) == report.rows(parts)
    assert report.rows(back) == [("rescore", "cold start | no cache", "19.96 s", "", "≤ 15.00 s", "FAIL"),
                                 ("verify", "ERROR", "", "Traceback (most recent call last):", "", "ERROR")]
    assert "| rescore | cold start / no cache | 19.96 s |  | ≤ 15.00 s | **FAIL** |" in report.markdown(back)


def test_the_projection_is_the_line_through_the_two_sizes() -> None:
    # Ready times 3 s at 1M and 5 s at 3M: 1 s per million more, so 22 s at 20M.
    assert _line([1e6, 3e6], [3.0, 5.0], 20e6) == pytest.approx(22.0)
    assert _line([1e6, 3e6], [3.0, 5.0], 1e6) == pytest.approx(3.0)
    assert _line([1e6, 1e6], [3.0, 5.0], 20e6) is None  # one size twice: no slope to draw
    assert _line([1e6], [3.0], 20e6) is None


def test_the_soaks_thirds_compare_the_last_with_the_middle() -> None:
    flat = _thirds([100.0] * 3 + [150.0, 150.0, 150.0] + [153.0, 150.0, 150.0])
    assert flat == {"middle_third_mean": 150.0, "last_third_mean": 151.0, "last_over_middle": 1.007}
    growing = _thirds([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    assert growing["last_over_middle"] == pytest.approx(55.0 / 35.0, abs=1e-3)
    assert _thirds([1.0]) == {"middle_third_mean": None, "last_third_mean": None, "last_over_middle": None}
