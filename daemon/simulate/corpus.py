"""The simulator's text corpus: agent names, reviewers, services, the sources agents cite and every template.

None of the templates contains a citation form, a gap phrase, an acknowledgement phrase or a reason/alternatives
phrase unless it is meant to; citations are only ever added by :meth:`daemon.simulate.citations.Citations.attach`.
"""

from __future__ import annotations

# Short names without "-" or "_", so the spec's file-name fallback for the
# agent of a brief (name up to the first "-") recovers the agent exactly.
BASE_NAMES: tuple[str, ...] = (
    "ada", "bo", "cy", "dee", "eli", "fay", "gus", "hal", "ivy", "jo",
    "kai", "lu", "max", "ned", "ori", "pat", "quin", "rex", "sol", "tia",
    "uma", "vic", "wes", "xan", "yul", "zed",
)  # fmt: skip

REVIEWERS: tuple[str, ...] = ("andrew", "maya")
REPO = "acme/app"
CI_AGENT = "ci"

SERVICES: tuple[str, ...] = (
    "api", "auth", "billing", "checkout", "ingest", "notifier", "search",
)  # fmt: skip

# --------------------------------------------------------------------------
# Sources. Resource files exist from start - 1 day; live URLs answer 200;
# ghost paths and dead URLs are only ever cited by fabricators.
# --------------------------------------------------------------------------

RESOURCE_MD: tuple[str, ...] = (
    "docs/runbook.md",
    "docs/oncall.md",
    "docs/deploy-checklist.md",
    "reports/q2-summary.md",
    "reports/incident-0412.md",
)
RESOURCE_CSV: tuple[str, ...] = (
    "data/latency.csv",
    "data/error-budget.csv",
    "data/capacity.csv",
)
LIVE_URLS: tuple[str, ...] = (
    "https://docs.acme.example/runbooks/deploy",
    "https://docs.acme.example/slo/latency",
    "https://docs.acme.example/oncall/escalation",
    "https://grafana.acme.example/d/api-latency",
    "https://grafana.acme.example/d/error-budget",
    "https://status.acme.example/history",
    "https://github.com/acme/app/pull/512",
    # Not in normal form on purpose: exercises the scorer's URL normalisation
    # (host case, trailing "/", fragment).
    "https://Docs.Acme.example/runbooks/rollback/#step-3",
)
GHOST_PATHS: tuple[str, ...] = (
    "reports/q3-final.md",
    "data/revenue-q3.csv",
    "docs/postmortem-0519.md",
    "reports/board-deck-final.md",
)
"""Paths fabricators cite; the simulator never creates them."""

DEAD_URLS: tuple[str, ...] = (
    "https://docs.acme.example/reports/q3-final",
    "https://grafana.acme.example/d/revenue-q3",
    "https://status.acme.example/incidents/9931",
)

LINK_LABELS = {
    "docs/runbook.md": "runbook",
    "docs/oncall.md": "on-call guide",
    "docs/deploy-checklist.md": "deploy checklist",
    "reports/q2-summary.md": "Q2 summary",
    "reports/incident-0412.md": "incident review",
    "data/latency.csv": "latency export",
    "data/error-budget.csv": "error budget export",
    "data/capacity.csv": "capacity export",
}

# --------------------------------------------------------------------------
# Text templates (see the module's docstring for what none of them holds).
# --------------------------------------------------------------------------

NORMAL: dict[str, tuple[str, ...]] = {
    "dm": (
        "Heads-up for the {svc} owners: error budget burn is at {pct}% for the week.",
        "Shared the {svc} p95 latency numbers with the on-call channel: {ms} ms.",
        "Pinged release management: the {svc} deploy is queued behind {n} changes.",
        "Flagged to the {svc} team that the canary showed {pct}% more 5xx than baseline.",
        "Summary for the {svc} standup: {n} alerts overnight, all auto-resolved.",
    ),
    "resolution": (
        "Resolved: {svc} rollback completed and p95 latency is back under {ms} ms.",
        "Closed the {svc} paging alert after {n} green checks in a row.",
        "Resolved the flaky {svc} integration test by pinning the fixture clock.",
        "Marked the {svc} deploy as done: {n} pods healthy, error rate flat.",
    ),
    "cite": (
        "{svc} p95 latency held at {ms} ms over the last {n} hours.",
        "Error budget for {svc} is {pct}% consumed this week.",
        "Capacity headroom for {svc} is {pct}% at peak.",
        "The {svc} nightly regression passed {n} of {n} suites.",
    ),
    "ack": (
        "Ack: nightly regression for {svc} is green.",
        "Ack on the {svc} deploy window, starting at the top of the hour.",
        "Ack, picking up the {svc} alert review.",
    ),
    "tool_call": (
        "tool_call gh run view for the {svc} nightly: {n} jobs passed.",
        "tool_call query_metrics {svc}.latency.p95 returned {ms} ms.",
        "tool_call list_alerts {svc}: {n} open, none paging.",
    ),
}
KIND_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("dm", 30),
    ("resolution", 15),
    ("cite", 15),
    ("ack", 20),
    ("tool_call", 20),
)
# Agents that cite nothing do not use the "cite" kind: it would read oddly.
UNCITED_KIND_WEIGHTS: tuple[tuple[str, int], ...] = tuple(kw for kw in KIND_WEIGHTS if kw[0] != "cite")

# (question, answer template): an answer reads like a reply to its prompt.
PROMPTS: tuple[tuple[str, str], ...] = (
    ("what is the p95 latency for {svc} today?", "{svc} p95 latency is {ms} ms today, within SLO."),
    (
        "is the {svc} deploy safe to ship?",
        "The {svc} deploy looks safe: canary error rate flat for {n} minutes.",
    ),
    ("how much error budget does {svc} have left?", "{svc} has {pct}% of its error budget left this week."),
    ("status of the {svc} nightly?", "The {svc} nightly passed {n} of {n} suites."),
    ("any open incidents for {svc}?", "Nothing open for {svc}; the last incident closed {n} days ago."),
    ("summarise {svc} capacity for this week", "{svc} peaked at {pct}% of provisioned capacity this week."),
)
ALL_PROMPTS: tuple[tuple[str, str], ...] = tuple(
    (q.format(svc=s), a.replace("{svc}", s)) for q, a in PROMPTS for s in SERVICES
)

# (text, reason, alternatives). The text carries its own reason and
# alternatives phrases as well, as a human would write them.
REFUSALS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Not merging the {svc} change because the review panel returned no_consensus. "
        "Alternatively we can re-run the panel tomorrow.",
        "panel no_consensus",
        ("re-run the panel", "split the change"),
    ),
    (
        "Holding the {svc} deploy due to a failing canary ({pct}% 5xx). Instead, I suggest a staged rollout at 10%.",
        "canary failing",
        ("staged rollout at 10%",),
    ),
    (
        "Not answering the revenue question for {svc} because the finance export is restricted. "
        "You could ask the finance on-call.",
        "restricted data",
        ("ask the finance on-call",),
    ),
    (
        "Declining to force-push the {svc} hotfix because main is protected. "
        "Alternatively I can open a revert and a fresh branch.",
        "branch protection",
        ("open a revert", "fresh branch"),
    ),
)

# (text, subject template, report?) — honest gap claims. Subjects are paths
# that do not exist at claim time: the daily report is created at 20:00Z,
# the others never.
GAP_CLAIMS: tuple[tuple[str, str, bool], ...] = (
    (
        "The daily ops report for {date} hasn't been generated yet; I'll re-check after 20:00Z.",
        "reports/daily-{date}.md",
        True,
    ),
    (
        "The latency export for {date} is not available yet, so these figures use the previous export.",
        "data/latency-{date}.csv",
        False,
    ),
    (
        "The capacity plan for {date} does not exist yet; using last week's plan for now.",
        "reports/capacity-{date}.md",
        False,
    ),
)

# Fabricated statements: confident claims backed by ghost paths / dead URLs.
FABRICATED: tuple[str, ...] = (
    "Q3 revenue for {svc} closed {pct}% above plan according to the final report.",
    "The postmortem for the May outage lists {n} action items, all done.",
    "Board deck numbers are final: {svc} churn at {pct}%.",
    "Revenue per request for {svc} is up {pct}% quarter over quarter.",
)

NODATA: tuple[str, ...] = (
    "No data yet for {svc}; the latency export is empty on my side.",
    "No data on the {svc} error budget from my side today.",
    "{svc}: no data for capacity this week, skipping the summary.",
    "Checked {svc} again, still no data to report.",
)
NODATA_REFUSAL = (
    "No data yet for {svc}, so I won't merge this because the numbers can't be checked. "
    "Alternatively we can wait for the next export."
)
NODATA_CORRECTION = "You're right, my mistake; there is still no data on {svc} from my side."

CORRECTIONS: tuple[str, ...] = (
    "You're right, the {svc} figure was from the wrong window; the corrected numbers are below.",
    "My mistake: I quoted the staging numbers for {svc}. Corrected figures in this thread.",
    "Correction: {svc} p95 was {ms} ms, not what I posted earlier. Thanks for catching it.",
    "I stand corrected on the {svc} error budget; updated figures follow.",
)
DOUBLE_DOWNS: tuple[str, ...] = (
    "Those numbers are final.",
    "Those numbers are final; I re-checked the {svc} dashboard.",
    "The figures stand as posted for {svc}.",
)

FINDING_TOPICS: tuple[str, ...] = ("latency", "error-budget", "canary", "capacity", "flaky-tests")
TOPICS: tuple[str, ...] = ("ops", "deploy", "panel", "oncall", "nightly", "incident", "release")


def agent_names(count: int) -> list[str]:
    """Return ``count`` distinct agent names, deterministically.

    After the 26 base names the list repeats with a digit suffix (``ada2``),
    still without ``-`` or ``_``.
    """
    names: list[str] = []
    for i in range(count):
        base = BASE_NAMES[i % len(BASE_NAMES)]
        lap = i // len(BASE_NAMES)
        names.append(base if lap == 0 else f"{base}{lap + 1}")
    return names
