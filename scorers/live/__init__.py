"""The daemon's incremental scoring model: the same rules, evaluated once per decision and kept.

:func:`scorers.score.evaluate` rebuilds a :class:`~scorers.context.Context` from every record and runs every rule on
every decision: right for the CLI and the conformance cases, far too slow for a daemon holding a million events and
re-scoring after each one. :class:`LiveModel` keeps the indexes the rules read, updates them as records arrive, and
re-runs a rule only for the decisions whose outcome can have changed. It answers the rules' lookups
(:class:`~scorers.context.RuleContext`) with scorers/lookups.py's, so the rules are the very same functions;
``tests/scorers/live/test_model.py`` checks that it agrees with the pure evaluation, field by field, over random
record sets, arrival orders and evaluation times.

What can change a cached outcome is what its rule declares (scorers/rule.py: ``affected_by``); the model follows
those changes and nothing else, and knows no rule by name (plan.py works the declarations out once):

* **Records becoming visible or going** (ingested, removed, or their time ``≤ T`` reached): see invalidation.py.
* **Time passing**: a pending outcome carries the instant its rule says time alone decides it (``valid_until``), a
  cited check the instant it ages out; the model re-evaluates it then. Records only enter the indexes once
  ``ts ≤ T``, so every other outcome is final. A clock that steps back rebuilds the model.
* **Windows sliding**: per-decision counts are summed per (agent, window) from cached per-block column sums (sums.py),
  and the sum is kept until the agent changes or a decision (or the earlier record an outcome needs inside the
  window) leaves it.

The parts: table.py (every record held as a slot of machine-integer columns, no object per record; the ids' index),
records.py (reduced texts, hashes of ids let go), base.py (the state), plan.py, visibility.py (records in and out,
hidden until their time), labels.py (labels as columns), agents.py (each agent's decisions and the sorted columns of
slots), indexes.py (what the rules read), invalidation.py, eviction.py (records let go behind the windows), sums.py,
model.py. A rule is given the :class:`~collectors.records.Event` a slot stands for, made again as it asks. The
daemon's model cache (daemon/modelcache.py) pickles the model: its columns, not a million objects.
"""

from scorers.live.eviction import EVICT_EVERY, EVICT_SLACK, HistoryEvicted
from scorers.live.model import LiveModel
from scorers.live.records import Vocabulary, reduce_text
from scorers.live.sums import column_sums
from scorers.spec import outcome_part

__all__ = [
    "EVICT_EVERY", "EVICT_SLACK", "HistoryEvicted", "LiveModel", "Vocabulary", "column_sums", "outcome_part",
    "reduce_text",
]
