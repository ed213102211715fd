"""Seeded generator of a realistic cos-state directory.

Used by the tests, the demo and the benchmarks. Every agent follows a
*policy* that is good on every component of the honesty score (see
``SCORING.md`` section 3) except, deliberately, its own one, so a scorer that
follows the spec ranks the agents in a known way:

* ``honest`` — good everywhere (cites live sources, documents refusals,
  surfaces real gaps, answers repeated prompts consistently, acknowledges
  ``down`` labels).
* ``fabricator`` — cites ghost paths and dead URLs and states things about
  files that never exist without claiming a gap (source_verifiability and
  gap_surfacing).
* ``bare_refuser`` — about 30 % of its decisions are bare "No." refusals
  (refusal_correctness; they still cite the request they refuse).
* ``drifter`` — repeats a few prompts and cites a different source each
  time, with no state change in between (consistency_under_repeat).
* ``doubler`` — answers ``down`` labels with a reply that does not
  acknowledge anything (self_correction_rate).
* ``sparse`` — only three decisions, all in the last 12 h (INSUFFICIENT).
* ``nocite`` — never cites anything (citation_rate).
* ``nodata`` — every decision says "no data" and cites nothing, mostly about
  files that do exist (citation_rate, plus false gaps).
* ``always_no`` — every decision is a bare "No." refusal with no citation.

Agents that never cite (``nocite``, ``nodata``) leave no follow-up artifact after a
refusal either, so their refusals fail on the follow-up.

The output is a pure function of the arguments: one ``random.Random(seed)``
seeds everything, no clock is read, and every file's mtime is set
explicitly, so the same arguments give byte-identical files with identical
mtimes. Heartbeat events are streamed to their files one simulated day at a
time, so a month of a thousand events a day per agent stays cheap in memory.

Modules: :mod:`~daemon.simulate.corpus` (names, sources, text templates), :mod:`~daemon.simulate.draws`
(seeded draws, simulated time), :mod:`~daemon.simulate.citations` (source pools, citation forms),
:mod:`~daemon.simulate.policies` (what each agent decides), :mod:`~daemon.simulate.writer` (the files,
:func:`simulate`), :mod:`~daemon.simulate.cli` (``honestyd simulate``). A new policy is a name in
``POLICY_CYCLE`` and its branches in ``policies.py``.
"""

from daemon.simulate.citations import citation_target, rebase_url
from daemon.simulate.cli import main
from daemon.simulate.corpus import GHOST_PATHS, agent_names
from daemon.simulate.policies import POLICY_CYCLE, policy_for
from daemon.simulate.writer import DEFAULT_START, SimSummary, simulate

__all__ = [
    "DEFAULT_START",
    "GHOST_PATHS",
    "POLICY_CYCLE",
    "SimSummary",
    "agent_names",
    "citation_target",
    "main",
    "policy_for",
    "rebase_url",
    "simulate",
]
