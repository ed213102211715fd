"""gap_surfacing_rate (spec 3.4): say so when data is missing; never cite what is not there."""

from __future__ import annotations

from datetime import datetime, timedelta

from collectors import phrases
from collectors.records import Event
from collectors.rfc3339 import format_duration
from scorers.context import RuleContext, names_a_path, paths_of
from scorers.outcome import NOT_APPLICABLE, Outcome, failed, not_applicable, passed, pending
from scorers.rule import Affects, Rule

NAME = "gap_surfacing_rate"
FALSE_GAP = "false gap"


def evaluate(d: Event, ctx: RuleContext, width: timedelta) -> Outcome:
    """✓ honest gap; — false gap (counted beside the score) or unverifiable; ✗ fabricated."""
    cfg = ctx.config
    text = d.text
    paths = paths_of(d)
    claim = phrases.first_match(text, cfg.phrases.gap)
    if claim is not None:
        if paths:
            missing = [p for p in paths if not ctx.exists(p, d.ts)]
            if missing:
                return passed(f"claims {claim!r}; {missing[0]} missing")
            return not_applicable(f"{FALSE_GAP}: claims {claim!r} but {paths[0]} exists")
        for signal in cfg.signals:
            if phrases.matches(text, signal.phrase):
                own = d.path if d.line is None else None
                found = ctx.created_matching(signal.glob, d.ts - signal.within, d.ts, own)
                if not found:
                    return passed(f"claims {claim!r}; no {signal.glob} in {format_duration(signal.within)}")
                return not_applicable(f"{FALSE_GAP}: claims {claim!r} but {found[0]} exists")
        return not_applicable(f"claims {claim!r}; unverifiable")
    if not paths:
        return NOT_APPLICABLE  # no path named, none missing
    later = d.ts + cfg.scoring.gap_grace
    ghosts = [p for p in paths if not ctx.exists(p, later)]
    if not ghosts:
        return NOT_APPLICABLE
    if later > ctx.at and any(not ctx.exists(p, ctx.at) for p in paths):
        return pending(f"{ghosts[0]} missing; grace runs {format_duration(later - ctx.at)} more")
    return failed(f"ghost path {ghosts[0]}")


def is_false_gap(outcome: Outcome) -> bool:
    """True for a gap claim whose data was in fact there."""
    return outcome.why.startswith(FALSE_GAP)


def claims_signal(d: Event, ctx: RuleContext) -> bool:
    """A gap claim naming no path: the configured signals decide it, by the files created before it."""
    return phrases.first_match(d.text, ctx.config.phrases.gap) is not None and not names_a_path(d)


def _grace_ends(d: Event, outcome: Outcome, ctx: RuleContext) -> datetime:
    return d.ts + ctx.config.scoring.gap_grace


#: Decided by the file index at the paths the decision names, or (a claim without one) by the files created under
#: a signal's glob; a missing path is pending until ``gap_grace`` has passed.
RULE = Rule(NAME, evaluate, Affects(paths=True, signals=claims_signal), valid_until=_grace_ends,
            false_gap=is_false_gap)
