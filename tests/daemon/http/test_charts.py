"""daemon/http/charts.py and its template: gaps, the threshold, one point, none, the marks; and the SVG as drawn
(parsed as XML), every text in it escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import date, timedelta

from daemon.http.charts import daily_chart, drops, sparkline
from daemon.http.templating import environment, svg

DAYS = [date(2026, 5, 1) + timedelta(days=k) for k in range(6)]
NS = "{http://www.w3.org/2000/svg}"


def drawn(chart: object) -> ET.Element:
    return ET.fromstring(str(svg(environment(), chart)))  # type: ignore[arg-type]


def test_a_day_without_a_score_breaks_the_line() -> None:
    scores = [0.9, 0.8, None, 0.85, 0.7, None]
    chart = daily_chart({"24h": list(zip(DAYS, scores, strict=True))}, DAYS, threshold=0.7)
    (plot,) = chart.plots
    assert [len(run) for run in plot.runs] == [2, 2] and plot.dots == ()
    assert plot.runs[0][1].x < plot.runs[1][0].x  # the gap lies between the runs
    gaps = [m for m in chart.marks if m.kind == "gap"]
    assert len(gaps) == 2 and all("INSUFFICIENT" in m.title for m in gaps)
    root = drawn(chart)
    assert len(root.findall(f"{NS}polyline")) == 2  # two lines, none across the gap


def test_the_threshold_is_a_line_at_its_height_on_a_fixed_axis() -> None:
    chart = daily_chart({"24h": [(DAYS[0], 1.0), (DAYS[1], 0.0)]}, DAYS[:2], threshold=0.7)
    _left, top, _right, bottom = chart.box
    assert chart.threshold is not None
    y, label = chart.threshold
    assert abs(y - (bottom - 0.7 * (bottom - top))) < 1e-9 and label == "alert below 70 %"
    (run,) = chart.plots[0].runs
    assert (run[0].y, run[1].y) == (top, bottom)  # 100 % at the top, 0 at the bottom, whatever the data
    lines = [e for e in drawn(chart).iter(f"{NS}line") if e.get("class") == "threshold"]
    assert len(lines) == 1 and float(lines[0].get("y1", "0")) == round(y, 1)


def test_one_point_is_a_dot_and_no_point_says_so() -> None:
    one = daily_chart({"24h": [(DAYS[3], 0.5)]}, DAYS[:4])
    assert one.plots[0].runs == () and len(one.plots[0].dots) == 1 and one.points == 1 and not one.empty
    assert len([c for c in drawn(one).iter(f"{NS}circle") if c.get("class") == "dot"]) == 1
    alone = daily_chart({"24h": [(DAYS[0], 0.5)]}, DAYS[:1])
    assert alone.plots[0].dots[0].x == (alone.box[0] + alone.box[2]) / 2  # a single day sits in the middle
    none = daily_chart({"24h": [(d, None) for d in DAYS]}, DAYS, threshold=0.7)
    assert none.points == 0 and none.plots == () and "no daily score yet" in none.empty
    texts = [t.text for t in drawn(none).iter(f"{NS}text")]
    assert none.empty in texts
    empty = daily_chart({}, [])
    assert empty.points == 0 and empty.empty and drawn(empty).tag == f"{NS}svg"


def test_drops_and_weight_changes_are_marked() -> None:
    scores = [0.9, 0.88, None, 0.6, 0.62, 0.3]
    assert drops(list(zip(DAYS, scores, strict=True)), 0.15) == [(DAYS[3], 0.88, 0.6), (DAYS[5], 0.62, 0.3)]
    chart = daily_chart({"24h": list(zip(DAYS, scores, strict=True))}, DAYS, drop=0.15,
                        weight_changes=[(DAYS[1], "weights: active version `a` → `b`"), (date(2020, 1, 1), "old")])
    kinds = sorted(m.kind for m in chart.marks)
    assert kinds == ["drop", "drop", "gap", "weights"]  # the change before the span is not drawn
    weights = next(m for m in chart.marks if m.kind == "weights")
    assert weights.x == chart.plots[0].runs[0][1].x and "`a` → `b`" in weights.title
    assert next(m.title for m in chart.marks if m.kind == "drop").endswith("score drop 88 % → 60 %")


def test_every_text_in_the_svg_is_escaped() -> None:
    name = '<script>alert(1)</script> "x" & {{ 7*7 }}'
    chart = daily_chart({name: [(DAYS[0], 0.5), (DAYS[1], 0.6)]}, DAYS[:2], title=name,
                        weight_changes=[(DAYS[1], "</title><script>x</script>")])
    markup = str(svg(environment(), chart))
    assert "<script>" not in markup and "{{ 7*7 }}" in markup
    root = ET.fromstring(markup)  # well-formed XML: nothing broke out of an element or attribute
    assert root.get("aria-label") == name
    titles = [t.text for t in root.iter(f"{NS}title")]
    assert name in titles and any("</title><script>x</script>" in (t or "") for t in titles)


def test_a_sparkline_keeps_its_gaps_and_threshold() -> None:
    line = sparkline(list(zip(DAYS, [None, 0.5, 0.6, None, 0.9, 0.8], strict=True)), threshold=0.7, title="ada")
    (plot,) = line.plots
    assert [len(r) for r in plot.runs] == [2, 2] and line.threshold is not None and not line.empty
    assert line.x_ticks == () and line.y_ticks == ()  # small: no axes
    assert sparkline([(DAYS[0], None)]).empty == "no daily score"
    assert drawn(sparkline([], threshold=0.7)).tag == f"{NS}svg"


def test_a_day_with_no_row_breaks_the_line_but_is_not_called_insufficient() -> None:
    stored = [(DAYS[0], 0.9), (DAYS[1], 0.8), (DAYS[3], 0.7), (DAYS[4], None), (DAYS[5], 0.6)]  # no row on DAYS[2]
    chart = daily_chart({"24h": stored}, DAYS)
    (plot,) = chart.plots
    assert [len(r) for r in plot.runs] == [2] and len(plot.dots) == 2  # 0, 1 | 3 | 5
    assert [m.kind for m in chart.marks] == ["gap"]  # DAYS[4] only
