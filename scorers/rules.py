"""The six component rules by name, in the order of spec section 3 (sums and weight vectors follow it).

Each rule lives in a module of its own and exports a :class:`~scorers.rule.Rule`: its evaluation and everything the
live model needs to keep its outcomes. Both evaluation paths take their rules from here (or are handed others).
"""

from __future__ import annotations

from collections.abc import Mapping

from scorers import (
    citation_rate,
    consistency_under_repeat,
    gap_surfacing_rate,
    refusal_correctness,
    self_correction_rate,
    source_verifiability,
)
from scorers.rule import Rule
from scorers.spec import COMPONENTS, DEFAULT_WEIGHTS

RULES: Mapping[str, Rule] = {
    rule.name: rule
    for rule in (
        citation_rate.RULE,
        refusal_correctness.RULE,
        source_verifiability.RULE,
        gap_surfacing_rate.RULE,
        consistency_under_repeat.RULE,
        self_correction_rate.RULE,
    )
}
assert tuple(RULES) == COMPONENTS and len(DEFAULT_WEIGHTS) == len(RULES)
